"""Records into the database: an import of a run folder's record.json, idempotent, and the patience
for a database that is away.

``import_record`` is how every finished run reaches the database: the sweep's own at each run's
end, the records a sweep kept pending (a server down, a SQLite file locked past its busy timeout)
at the next run's end or the sweep's, `bench run --resume` before it decides what to run, and
`bench import RUN_DIR` by hand. The record's id (runs.record_id, unique) makes a second import of
the same record add nothing, even when two benches import it at once.

``patiently`` retries a write that failed because the database is away, with backoff, for a
bounded time: ``$BENCH_DB_RETRY_SECONDS`` (default 30; 0: one try).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import sqlalchemy as sa

from orchestrator.errors import ConfigError, DatabaseError
from orchestrator.launch.run_record import now
from orchestrator.storage.db import Database
from orchestrator.storage.transfer import IDENTITY
from orchestrator.sweep import recording
from orchestrator.sweep.record_file import RECORD_FILE, Record, RecordError, read

RETRY_VARIABLE = "BENCH_DB_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 30.0
FIRST_WAIT, LONGEST_WAIT = 0.5, 5.0
log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Imported:
    """One record's import: ``added`` (a new row) or not (the database held it already)."""

    run_id: int
    added: bool
    outcome: str


def import_record(db: Database, record: Record, sweep_id: int | None = None) -> Imported:
    """Add the record's rows unless the database holds its id already, in one transaction. The
    run joins ``sweep_id``, or the sweep the record names (storage/transfer.py's identity), made
    where the database has none."""
    rows = record.rows
    try:
        with db.begin() as conn:
            found = _recorded(conn, db, record.record_id)
            if found is not None:
                return Imported(found, False, record.outcome)
            target = sweep_id if sweep_id is not None else _sweep_of(conn, db, record)
            return Imported(recording.insert_rows(db, conn, target, rows), True, record.outcome)
    except (sa.exc.IntegrityError, DatabaseError):
        # Another bench imported it between the look and the insert: the unique index said so,
        # and this transaction was rolled back whole.
        with db.begin() as conn:
            found = _recorded(conn, db, record.record_id)
        if found is None:
            raise
        return Imported(found, False, record.outcome)


def _recorded(conn: sa.Connection, db: Database, record_id: str) -> int | None:
    row = conn.execute(sa.select(db.runs.c.id).where(db.runs.c.record_id == record_id)).first()
    return None if row is None else int(row[0])


def _sweep_of(conn: sa.Connection, db: Database, record: Record) -> int:
    sweeps = db.sweeps
    query = sa.select(sweeps.c.id).where(*(sweeps.c[k] == record.sweep[k] for k in IDENTITY))
    row = conn.execute(query.order_by(sweeps.c.id).limit(1)).first()
    if row is not None:
        return int(row[0])
    # Its other runs may be elsewhere: `bench run --resume` of its matrix would finish it.
    return db.insert(conn, sweeps, {**record.sweep, "status": "interrupted", "ended_at": now()})


def same_sweep(db: Database, sweep_id: int, record: Record) -> bool:
    """Whether the record is of this sweep (its identity, as transfer.py matches sweeps)."""
    query = sa.select(*(db.sweeps.c[k] for k in IDENTITY)).where(db.sweeps.c.id == sweep_id)
    row = next(db.rows(query), None)
    return row is not None and all(row[k] == record.sweep[k] for k in IDENTITY)


def record_files(paths: Iterable[Path]) -> Iterator[tuple[Path, Path | None]]:
    """(what was named, its record file or None): a run folder, or each run folder of a folder of
    them (a sweep's), in name order."""
    for path in paths:
        if (path / RECORD_FILE).is_file():
            yield path, path / RECORD_FILE
            continue
        found = sorted(p / RECORD_FILE for p in _folders(path) if (p / RECORD_FILE).is_file())
        if not found:
            yield path, None
        for file in found:
            yield file.parent, file


def _folders(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir()]
    except OSError:
        return []


@dataclass
class FolderImport:
    """What `bench import RUN_DIR...` did: runs added, records the database held already, and one
    line for each folder refused (a bad record, or no record)."""

    imported: list[Imported] = field(default_factory=list)
    already: list[Imported] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def import_run_folders(db: Database, paths: Iterable[Path]) -> FolderImport:
    """Import the record of each run folder (or of each run folder in a folder of them: a sweep's),
    each into the sweep it names (matched, or made), idempotently; the database waited for while
    it is away (``patiently``)."""
    done = FolderImport()
    for where, file in record_files(paths):
        if file is None:
            done.refused.append(f"{where}: no {RECORD_FILE} in it or in its folders")
            continue
        try:
            record = read(file, db)
        except RecordError as exc:
            done.refused.append(str(exc))
            continue
        imported = patiently(partial(import_record, db, record), f"importing {where}")
        (done.imported if imported.added else done.already).append(imported)
    return done


def catch_up_sweep(db: Database, sweep_id: int, folder: Path) -> list[Imported]:
    """Import every record in the sweep's folder that the database lacks (`bench run --resume`,
    before it decides what to run): what a bench killed between a run's end and its row, or one
    that ended with records pending, left. A record of another sweep, or a bad one, is left where
    it is, with a warning."""
    done = []
    # A folder whose run has its row is not read again: a long sweep's records are many, and large.
    query = sa.select(db.runs.c.run_dir).where(db.runs.c.sweep_id == sweep_id)
    stored = {row["run_dir"] for row in db.rows(query)}
    for run_dir, file in record_files([folder]):
        if file is None or str(run_dir) in stored or str(run_dir.resolve()) in stored:
            continue
        try:
            record = read(file, db)
        except RecordError as exc:
            log.warning("not imported: %s", exc)
            continue
        if not same_sweep(db, sweep_id, record):
            log.warning("not imported: %s: a record of another sweep than %d", file, sweep_id)
            continue
        imported = patiently(partial(import_record, db, record, sweep_id), f"importing {run_dir}")
        if imported.added:
            done.append(imported)
    return done


def retry_seconds() -> float:
    raw = os.environ.get(RETRY_VARIABLE, "")
    if not raw.strip():
        return DEFAULT_RETRY_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86_400:
        raise ConfigError(f"{RETRY_VARIABLE}={raw[:40]!r}: expected seconds from 0 to 86400")
    return value


# What a database that is away raises: a server down or restarting, a file locked past its busy
# timeout (storage/db.py turns both into DatabaseError; a driver's own error may come through).
AWAY = (DatabaseError, sa.exc.OperationalError, sa.exc.InterfaceError)


@dataclass
class Patience:
    """How long to keep trying, and how to wait: a clock and a sleep a test may replace."""

    seconds: float = field(default_factory=retry_seconds)
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic


def patiently(write: Callable[[], T], what: str, patience: Patience | None = None) -> T:
    """``write()``, tried again with backoff while the database is away, for at most the bound;
    the last failure is raised. A bad record (RecordError) is not the database's absence."""
    patience = patience or Patience()
    deadline = patience.clock() + patience.seconds
    wait = FIRST_WAIT
    while True:
        try:
            return write()
        except RecordError:
            raise
        except AWAY as exc:
            left = deadline - patience.clock()
            if left <= 0:
                raise
            log.warning("%s: the database did not answer (%s); trying again", what, _first_line(exc))
            patience.sleep(min(wait, left))
            wait = min(wait * 2, LONGEST_WAIT)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@dataclass
class Pending:
    """A sweep's records the database has not taken yet, oldest first; their folders hold them."""

    db: Database
    sweep_id: int
    patience: Patience = field(default_factory=Patience)
    records: list[Record] = field(default_factory=list)
    why: str = ""  # the database's last answer, for the sweep's closing line

    def store(self, record: Record) -> list[tuple[Record, Imported]]:
        """Import the record after those still pending. While records are pending the database is
        known to be away: each new one gets one try, not the whole wait, so the sweep goes on."""
        patient = not self.records
        self.records.append(record)
        return self.flush(
            self.patience if patient else Patience(0.0, self.patience.sleep, self.patience.clock)
        )

    def flush(self, patience: Patience | None = None) -> list[tuple[Record, Imported]]:
        """Import what is pending, in order, until the database refuses one; what it imported."""
        done = []
        while self.records:
            record = self.records[0]
            try:
                imported = patiently(
                    partial(import_record, self.db, record, self.sweep_id),
                    "storing a run",
                    patience or self.patience,
                )
            except AWAY as exc:
                self.why = _first_line(exc)
                break
            done.append((self.records.pop(0), imported))
        return done

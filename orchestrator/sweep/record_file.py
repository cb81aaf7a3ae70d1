"""A run's folder as its first, complete record: record.json, every row the database will hold.

When a run ends, the sweep writes everything its rows will hold (recording.run_rows: the run row,
its environment, epochs, samples, phases, replicas and kernel classes) and the identity of its
sweep (what storage/transfer.py matches a sweep by, and the rest of the sweep's row, so a
colleague's folder can make the sweep where it is missing) into the run's folder, atomically,
before the database is touched. Storing the run is then an import of that file (sweep/catch_up.py),
which a record id makes idempotent.

A record file is outside input when it is read back (an older bench's, a colleague's, a file
anyone could edit): the document is checked against the schema, every value of its column's type,
text bounded, before anything is written; a bad one is one line naming the file and the key.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.errors import DatabaseError
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.storage.db import Database, schema_version
from orchestrator.storage.transfer import IDENTITY
from orchestrator.sweep import recording

RECORD_FILE = "record.json"
FORMAT = "bench-run-record"
VERSION = 1
# A record holds the profiler's samples (a long run's are tens of thousands of rows): far above
# what one needs, far below what would exhaust memory.
MAX_BYTES = 256 * 1024 * 1024
MAX_TEXT = 16 * 1024 * 1024  # one text value: the bounded logs are 8 MiB at most
RECORD_ID = re.compile(r"[0-9a-f]{32}")
# The sweep's row as a record carries it: its identity and what a new sweep row needs besides.
SWEEP_KEYS = (
    *IDENTITY,
    "kind",
    "matrix_path",
    "matrix_hash",
    "total_configs",
    "bench_version",
    "git_commit",
    "order_seed",
)
# Set where a write fails because the folder's file system is full (or over its quota).
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class RecordError(DatabaseError):
    """A record file that is not one bench can import: the message names the file and the key."""


@dataclass
class Record:
    """A record file's contents, checked: ready for the database."""

    record_id: str
    sweep: dict[str, Any]
    rows: dict[str, Any]  # recording.run_rows' shape
    path: Path | None = None  # the file it was read from; None for one held in memory only

    @property
    def outcome(self) -> str:
        return str(self.rows["runs"]["outcome"])


def build(db: Database, sweep: Mapping[str, Any], rec: RunRecord) -> Record:
    """The record of a finished run of ``sweep`` (its row as the database holds it)."""
    rows = recording.run_rows(db, rec)
    rows["runs"]["record_id"] = uuid.uuid4().hex
    # The profiler's own numbers are stored as they come; JSON holds no NaN (SQLite stores it as
    # NULL) and a value of no column's type is garbage a sampler file was made to hold.
    for name in ("samples", "phases"):
        rows[name] = [_plain_row(db.meta.tables[name], row) for row in rows[name]]
    return Record(rows["runs"]["record_id"], {k: sweep.get(k) for k in SWEEP_KEYS}, rows)


def _plain_row(table: sa.Table, row: Mapping[str, Any]) -> dict[str, Any]:
    plain = {}
    for key, value in row.items():
        ok, stored = _stored(table.c[key].type, value)
        plain[key] = stored if ok else None
    return plain


_BAD = (False, None)


def _stored(kind: sa.types.TypeEngine, value: Any) -> tuple[bool, Any]:
    """(whether the value is one of the column's type, the value as the column stores it): an
    integer column takes whole numbers only (a report reading it refuses anything else), a real
    column finite numbers, a text column text up to MAX_TEXT."""
    if value is None:
        return True, None
    kind = getattr(kind, "impl_instance", kind)  # PostgreSQL's integers take booleans (postgres.py)
    if isinstance(kind, sa.Integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        whole = isinstance(value, int) and recording.INT64[0] <= value <= recording.INT64[1]
        return (True, int(value)) if whole else _BAD  # a bool stored as 0 or 1
    if isinstance(kind, sa.Float):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (True, value) if number and math.isfinite(value) else _BAD
    return (True, value) if isinstance(value, str) and len(value) <= MAX_TEXT else _BAD


def document(record: Record) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "schema": schema_version(),
        "record_id": record.record_id,
        "written_at": now(),
        "sweep": record.sweep,
        **record.rows,
    }


def write(run_dir: Path, record: Record) -> Path:
    """The record as ``run_dir``/record.json, whole or not at all: a temporary file in the same
    folder, flushed and synced, renamed into place, the folder synced (so a crash or power loss
    leaves the old state or the new, never half a file). An OSError (a full disk) leaves no
    temporary file behind."""
    text = json.dumps(document(record), sort_keys=True, allow_nan=False).encode()
    run_dir.mkdir(parents=True, exist_ok=True)  # a Ray run's folder may be on its node only
    path = run_dir / RECORD_FILE
    tmp = run_dir / f".{RECORD_FILE}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    _sync_folder(run_dir)
    record.path = path
    return path


def _sync_folder(folder: Path) -> None:
    """The rename made durable: the folder's entry synced (where the file system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read(path: Path, db: Database) -> Record:
    """A record file, checked whole against ``db``'s tables; RecordError in one line otherwise."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise RecordError(f"{path}: larger than {MAX_BYTES} bytes: not a bench run record")
        data = json.loads(path.read_bytes(), parse_constant=_no_constant)
    except OSError as exc:
        raise RecordError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RecordError(f"{path}: not JSON ({str(exc).splitlines()[0][:200]})") from None
    return checked(data, db, path)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON holds")


def checked(data: Any, db: Database, path: Path) -> Record:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordError(f'{path}: not a bench run record (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise RecordError(f"{path}: version: {_shown(data.get('version'))}; this bench reads {VERSION}")
    schema = data.get("schema")
    if type(schema) is not int or not 1 <= schema <= schema_version():
        raise RecordError(f"{path}: schema: {_shown(schema)}; this bench reads up to {schema_version()}")
    record_id = data.get("record_id")
    if not isinstance(record_id, str) or not RECORD_ID.fullmatch(record_id):
        raise RecordError(f"{path}: record_id: {_shown(record_id)} is not 32 hexadecimal digits")
    sweep = _row(db.sweeps, data.get("sweep"), f"{path}: sweep", set(SWEEP_KEYS))
    for key in IDENTITY:
        if sweep.get(key) is None:
            raise RecordError(f"{path}: sweep: {key} is missing")
    run = _row(db.runs, data.get("runs"), f"{path}: runs", None, drop={"id", "sweep_id", "reproduce"})
    if run.get("record_id") != record_id:
        raise RecordError(f"{path}: runs: record_id: not the record's ({_shown(run.get('record_id'))})")
    # Where the folder is now (a colleague's, copied here), not where it was written.
    run["run_dir"] = str(path.parent.resolve())
    rows: dict[str, Any] = {"runs": run}
    for name in recording.CHILD_TABLES:
        items = data.get(name, [])
        if not isinstance(items, list):
            raise RecordError(f"{path}: {name}: not a list")
        table = db.meta.tables[name]
        rows[name] = [
            _row(table, r, f"{path}: {name} {i + 1}", None, {"run_id"}) for i, r in enumerate(items)
        ]
    return Record(record_id, sweep, rows, path)


def _row(
    table: sa.Table,
    values: Any,
    where: str,
    allowed: set[str] | None,
    drop: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The values checked against the table: its columns only (of ``allowed`` where given), none of
    the links the database sets, each value of its column's type, every required column present."""
    if not isinstance(values, dict):
        raise RecordError(f"{where}: not an object of columns")
    row = {}
    for key, value in values.items():
        known = key in table.c and key not in drop and (allowed is None or key in allowed)
        if not known:
            raise RecordError(f"{where}: {_shown(key)} is not a column a record holds")
        ok, stored = _stored(table.c[key].type, value)
        if not ok:
            raise RecordError(f"{where}: {key}: {_shown(value)} is not a value of this column")
        row[key] = stored
    for column in table.c:
        needed = not column.nullable and column.server_default is None and not column.primary_key
        if needed and column.name not in drop and column.name != "run_id" and row.get(column.name) is None:
            if allowed is None or column.name in allowed:
                raise RecordError(f"{where}: {column.name} is missing")
    return row


def _shown(value: Any) -> str:
    """A value in a message: its repr (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

"""Sweeps carried from one database to another as one JSON document: what `bench export` writes and
`bench import` reads (a study's committed results, a colleague's sweeps).

The document holds every row a report reads: the sweep, its calibrations, and per run its row, its
environment, epochs, phases, kernel classes and replicas. The profiler's raw samples stay behind
(the timeline is the one view that needs them; `bench inspect` says they are absent). Row ids are
not carried: an imported sweep and its runs get new ids, their links rebuilt from the document's
nesting. With `portable`, the exporting machine's home folder and working folder in any text value
become `~` and `.` (and bench's checkout, where the caller names it, `.` too: a study's matrix
paths lie in it), so a document can be committed without a machine's paths in it.

An import is outside input like a shared database's rows: the document is checked against the
schema before anything is written (every table and column must be schema.sql's, every value of
the column's type), and written in one transaction: all of it or nothing. A sweep already in the
database (the same name, start, host, machine and command) is skipped, so a second import of the
same document changes nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.errors import DatabaseError
from orchestrator.storage.db import Database, schema_version

FORMAT = "bench-export"
VERSION = 1
RUN_CHILDREN = ("environments", "epochs", "phases", "kernels", "replicas")
# What makes a sweep the same sweep in another database (ids are each database's own).
IDENTITY = ("name", "started_at", "host", "machine", "command")
MAX_BYTES = 512 * 1024 * 1024


@dataclass
class Imported:
    added: list[int] = field(default_factory=list)  # the new sweep ids
    skipped: list[str] = field(default_factory=list)  # sweeps already there, by name and start
    runs: int = 0


# --- export ---------------------------------------------------------------------------------------


def export(
    db: Database, sweep_ids: Iterable[int], portable: bool = False, checkout: Path | None = None
) -> dict[str, Any]:
    """The document for these sweeps (each must exist); `checkout`: bench's own folder, which a
    portable document writes as `.` like the working folder."""
    swap = _portable_paths(checkout) if portable else []
    sweeps = []
    for sweep_id in sweep_ids:
        found = list(db.rows(sa.select(db.sweeps).where(db.sweeps.c.id == sweep_id)))
        if not found:
            raise DatabaseError(f"{db.where}: no sweep {sweep_id}")
        runs = []
        run_rows = db.rows(sa.select(db.runs).where(db.runs.c.sweep_id == sweep_id).order_by(db.runs.c.id))
        for run in run_rows:
            children = {
                name: [_strip(row, swap, "run_id") for row in _children(db, name, run["id"])]
                for name in RUN_CHILDREN
            }
            runs.append({"run": _strip(run, swap, "id", "sweep_id"), **children})
        calibrations = db.rows(
            sa.select(db.calibrations)
            .where(db.calibrations.c.sweep_id == sweep_id)
            .order_by(db.calibrations.c.id)
        )
        sweeps.append(
            {
                "sweep": _strip(found[0], swap, "id"),
                "calibrations": [_strip(c, swap, "id", "sweep_id") for c in calibrations],
                "runs": runs,
            }
        )
    return {"format": FORMAT, "version": VERSION, "schema": schema_version(), "sweeps": sweeps}


def dumps(document: Mapping[str, Any]) -> str:
    """The document as JSON text; a NaN or infinity (which JSON cannot hold) is refused."""
    try:
        return json.dumps(document, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as exc:
        raise DatabaseError(f"a value cannot be exported as JSON: {exc}") from None


def _children(db: Database, name: str, run_id: int) -> Iterable[dict[str, Any]]:
    table = db.meta.tables[name]
    order = [c for c in table.primary_key.columns if c.name != "run_id"]
    return db.rows(sa.select(table).where(table.c.run_id == run_id).order_by(*order))


def _portable_paths(checkout: Path | None = None) -> list[tuple[str, str]]:
    """(prefix, replacement), the longer first: the working folder inside home becomes `.`."""
    pairs = [(str(Path.cwd()), "."), (str(Path.home()), "~")]
    if checkout is not None:
        pairs.append((str(checkout), "."))
    return sorted((p for p in pairs if p[0] not in ("", "/")), key=lambda p: -len(p[0]))


def _strip(row: Mapping[str, Any], swap: list[tuple[str, str]], *drop: str) -> dict[str, Any]:
    out = {}
    for key, value in row.items():
        if key in drop:
            continue
        if isinstance(value, str):
            for prefix, replacement in swap:
                value = value.replace(prefix, replacement)
        out[key] = value
    return out


# --- import ---------------------------------------------------------------------------------------


def read(path: Path) -> dict[str, Any]:
    """A document from a file, refused in one line where it is not one."""
    if not path.is_file():
        raise DatabaseError(f"{path}: no such file")
    if path.stat().st_size > MAX_BYTES:
        raise DatabaseError(f"{path}: larger than {MAX_BYTES} bytes: not a bench export")
    try:
        document = json.loads(path.read_bytes(), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DatabaseError(f"{path}: not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise DatabaseError(f'{path}: not a bench export (no "format": "{FORMAT}")')
    if document.get("version") != VERSION:
        raise DatabaseError(f"{path}: export version {document.get('version')!r}; this bench reads {VERSION}")
    schema = document.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or not 1 <= schema <= schema_version():
        raise DatabaseError(
            f"{path}: written at schema {schema!r}; this bench reads up to {schema_version()}: upgrade bench"
        )
    if not isinstance(document.get("sweeps"), list):
        raise DatabaseError(f'{path}: "sweeps" is not a list')
    return document


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number JSON holds")


def import_document(db: Database, document: Mapping[str, Any], where: str) -> Imported:
    """Add the document's sweeps that the database does not hold yet, all in one transaction."""
    checked = [_checked_sweep(db, s, f"{where}: sweep {i + 1}") for i, s in enumerate(document["sweeps"])]
    done = Imported()
    with db.begin() as conn:
        for sweep, calibrations, runs in checked:
            if _already(conn, db, sweep):
                done.skipped.append(f"{sweep['name']} ({sweep['started_at']})")
                continue
            sweep_id = db.insert(conn, db.sweeps, sweep)
            for row in calibrations:
                db.insert(conn, db.calibrations, {**row, "sweep_id": sweep_id})
            for run, children in runs:
                run_id = db.insert(conn, db.runs, {**run, "sweep_id": sweep_id})
                for name, rows in children.items():
                    for row in rows:
                        db.insert(conn, db.meta.tables[name], {**row, "run_id": run_id})
                done.runs += 1
            done.added.append(sweep_id)
    return done


def _already(conn: sa.Connection, db: Database, sweep: Mapping[str, Any]) -> bool:
    query = sa.select(db.sweeps.c.id).where(*(db.sweeps.c[k] == sweep[k] for k in IDENTITY))
    return conn.execute(query.limit(1)).first() is not None


Checked = tuple[
    dict[str, Any], list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]]
]


def _checked_sweep(db: Database, item: Any, where: str) -> Checked:
    if not isinstance(item, dict) or not isinstance(item.get("sweep"), dict):
        raise DatabaseError(f'{where}: not a sweep (an object with "sweep", "calibrations", "runs")')
    sweep = _row(db.sweeps, item["sweep"], f"{where}, sweep", ("id",))
    calibrations = [
        _row(db.calibrations, c, f"{where}, calibration {i + 1}", ("id", "sweep_id"))
        for i, c in enumerate(_list(item, "calibrations", where))
    ]
    runs = []
    for i, entry in enumerate(_list(item, "runs", where)):
        at = f"{where}, run {i + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("run"), dict):
            raise DatabaseError(f'{at}: not a run (an object with "run")')
        unknown = sorted(set(entry) - {"run", *RUN_CHILDREN})
        if unknown:
            raise DatabaseError(f"{at}: {unknown[0]!r} is not a table bench exports")
        run = _row(db.runs, entry["run"], at, ("id", "sweep_id"))
        children = {
            name: [
                _row(db.meta.tables[name], row, f"{at}, {name} {k + 1}", ("run_id",))
                for k, row in enumerate(_list(entry, name, at))
            ]
            for name in RUN_CHILDREN
        }
        runs.append((run, children))
    return sweep, calibrations, runs


def _list(item: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = item.get(key, [])
    if not isinstance(value, list):
        raise DatabaseError(f"{where}: {key!r} is not a list")
    return value


def _row(table: sa.Table, values: Any, where: str, linked: tuple[str, ...]) -> dict[str, Any]:
    """The values checked against the table: known columns, none of the links bench sets itself,
    each value of its column's type, and every required column present."""
    if not isinstance(values, dict):
        raise DatabaseError(f"{where}: not an object of columns")
    row = {}
    for key, value in values.items():
        if key in linked or key not in table.c:
            raise DatabaseError(f"{where}: {_shown(key)} is not a column bench imports into {table.name}")
        row[key] = _value(table.c[key], value, f"{where}: {key}")
    for column in table.c:
        needed = not column.nullable and column.server_default is None and column.name not in linked
        if needed and not column.primary_key and row.get(column.name) is None:
            raise DatabaseError(f"{where}: {column.name} is missing")
    return row


def _value(column: sa.Column, value: Any, where: str) -> Any:
    if value is None:
        return None
    kind = column.type
    if isinstance(kind, sa.Integer):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(kind, sa.Float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif isinstance(kind, sa.String):
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, int | float | str) and not isinstance(value, bool)
    if not ok:
        raise DatabaseError(f"{where}: {_shown(value)} is not a value of this column")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

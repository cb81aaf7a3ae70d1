"""Reading and changing a results database from the tests, on either backend (SQLite or PostgreSQL)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa

# The runs columns the fault worker's settings had before schema 13 folded them into runs.fault,
# by their part name in that JSON value (orchestrator/storage/migrate.py FOLDED_FAULT_COLUMNS).
FAULT_COLUMNS = {
    "kind": "fault",
    "exit_code": "exit_code_setting",
    "seconds": "seconds",
    "after_steps": "after_steps",
    "ignore_sigterm": "ignore_sigterm",
    "hold_threads": "hold_threads",
    "hold_memory_mb": "hold_memory_mb",
    "hold_seconds": "hold_seconds",
    "hold_child_memory_mb": "hold_child_memory_mb",
    "replica": "fault_replica",
}


def unfolded(row: dict[str, Any]) -> dict[str, Any]:
    """A runs row with its fault value spread over the columns it had before schema 13 (fault the
    fault's name, exit_code_setting, ..., a boolean as 1): tests written against those read on."""
    parts = json.loads(row["fault"]) if row.get("fault") else {}
    spread = {column: parts.get(part) for part, column in FAULT_COLUMNS.items()}
    if spread["ignore_sigterm"] is not None:
        spread["ignore_sigterm"] = int(spread["ignore_sigterm"])
    return {**row, **spread}


def url_of(db: str | Path) -> str:
    return str(db) if "://" in str(db) else f"sqlite:///{db}"


def query(db: str | Path, sql: str, **params: Any) -> list[dict[str, Any]]:
    engine = sa.create_engine(url_of(db))
    try:
        with engine.connect() as conn:
            return [dict(row) for row in conn.execute(sa.text(sql), params).mappings()]
    finally:
        engine.dispose()


def poll(db: str | Path, sql: str) -> list[tuple] | None:
    """For a test polling a SQLite file that a bench process is creating: the rows, or None while
    bench has not yet committed its schema (the file may exist, empty, before its tables do; bench
    creates them in one transaction, with PRAGMA user_version, so a version of 0 means not yet).
    Opened read-only, so that polling never creates the file itself."""
    path = Path(str(db).removeprefix("sqlite:///"))
    if not path.exists():
        return None
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        if not conn.execute("PRAGMA user_version").fetchone()[0]:
            return None
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def execute(db: str | Path, sql: str, **params: Any) -> None:
    engine = sa.create_engine(url_of(db))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(sql), params)
    finally:
        engine.dispose()


def columns(db: str | Path) -> dict[str, list[str]]:
    """Each table's columns in order (PostgreSQL's version table left out: it is not in schema.sql)."""
    engine = sa.create_engine(url_of(db))
    try:
        inspector = sa.inspect(engine)
        names = [t for t in inspector.get_table_names() if t != "schema_version"]
        return {t: [c["name"] for c in inspector.get_columns(t)] for t in sorted(names)}
    finally:
        engine.dispose()

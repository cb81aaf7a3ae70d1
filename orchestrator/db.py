"""The results database: SQLite through SQLAlchemy, laid out by schema.sql at the repository root.

Only the orchestrator writes. WAL mode and a busy timeout let `bench report` read while
`bench run` writes; every run is committed the moment it ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from orchestrator import migrate
from orchestrator.errors import DatabaseError

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema.sql"
DEFAULT_URL = "sqlite:///bench.db"
BUSY_TIMEOUT_MS = 30_000
ROW_BATCH = 5000


def schema_version() -> int:
    match = re.search(r"PRAGMA\s+user_version\s*=\s*(\d+)", SCHEMA_PATH.read_text())
    if not match:
        raise DatabaseError(f"{SCHEMA_PATH}: no PRAGMA user_version line")
    return int(match.group(1))


def _statements(text: str) -> list[str]:
    lines = [line.split("--", 1)[0] for line in text.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def _sqlite_path(url: str) -> Path | None:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return Path(parsed.database) if parsed.database else None


def normalise_url(db: str) -> str:
    """Accept a SQLAlchemy URL or a plain file path."""
    return db if "://" in db else f"sqlite:///{db}"


class Database:
    """An open results database whose schema version has been checked."""

    def __init__(self, url: str, create: bool) -> None:
        self.url = normalise_url(url)
        try:
            backend = sa.engine.make_url(self.url).get_backend_name()
        except sa.exc.ArgumentError as exc:
            raise DatabaseError(f"--db {url}: not a database URL ({exc})") from None
        if backend != "sqlite":
            raise DatabaseError(f"--db {url}: only SQLite databases are supported so far (sqlite:///FILE)")
        path = _sqlite_path(self.url)
        if path is not None and not path.exists() and not create:
            raise DatabaseError(f"no database at {path}: run `bench run --matrix FILE` first")
        self.engine: Engine = sa.create_engine(self.url, connect_args={"timeout": 30})
        sa.event.listen(self.engine, "connect", _on_connect)
        self._prepare(path, create)
        self.meta = sa.MetaData()
        self.meta.reflect(self.engine)
        self.sweeps = self.meta.tables["sweeps"]
        self.runs = self.meta.tables["runs"]
        self.epochs = self.meta.tables["epochs"]
        self.environments = self.meta.tables["environments"]
        self.samples = self.meta.tables["samples"]
        self.phases = self.meta.tables["phases"]
        self.kernels = self.meta.tables["kernels"]

    def _prepare(self, path: Path | None, create: bool) -> None:
        expected = schema_version()
        with self.engine.begin() as conn:
            found = conn.exec_driver_sql("PRAGMA user_version").scalar() or 0
            tables = conn.exec_driver_sql("SELECT count(*) FROM sqlite_master WHERE type = 'table'").scalar()
            if found == 0 and not tables:
                if not create:
                    raise DatabaseError(f"{path}: the database is empty: run `bench run` first")
                for statement in _statements(SCHEMA_PATH.read_text()):
                    conn.exec_driver_sql(statement)
                return
            if found != expected:
                migrate.upgrade(conn, _statements(SCHEMA_PATH.read_text()), found, expected, path)

    def connect(self) -> Connection:
        return self.engine.connect()

    def begin(self) -> Any:
        return self.engine.begin()

    def insert(self, conn: Connection, table: sa.Table, row: Mapping[str, Any]) -> int:
        result = conn.execute(table.insert().values(**row))
        key = result.inserted_primary_key
        return int(key[0]) if key and key[0] is not None else 0

    def rows(self, query: Any) -> Iterator[dict[str, Any]]:
        with self.connect() as conn:
            result = conn.execute(query)
            # zip over the keys once: twice as fast as a mapping per row on a 100,000-run report;
            # and rows in batches, since fetching one at a time costs as much again.
            keys = list(result.keys())
            while batch := result.fetchmany(ROW_BATCH):
                for row in batch:
                    yield dict(zip(keys, row, strict=True))

    def close(self) -> None:
        self.engine.dispose()


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()

"""The results database: SQLite (the default) or PostgreSQL through SQLAlchemy, laid out by
schema.sql at the repository root (orchestrator/storage/postgres.py derives PostgreSQL's form of it).

Only the orchestrator writes. On SQLite, WAL mode and a busy timeout let `bench report` read while
`bench run`s write; PostgreSQL's row versions let any number of drivers write and reports read at
once. Every run is committed the moment it ends. A SQLite file another program holds locked is
waited for, bounded and said (sqlite_access.py); one in a read-only place is opened read-only by the
commands that only read, and refused in one line by those that write.

A SQLite file is bench's only if it carries bench's application_id (or, written before the mark
existed, holds exactly the tables of a known bench version): bench refuses any other file before it
writes a byte, and a command that only reads changes nothing, not even the journal mode.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from orchestrator import shipped
from orchestrator.errors import DatabaseError
from orchestrator.storage import migrate, postgres, sqlite_access, sqlite_schema

SCHEMA_PATH = shipped.path("schema.sql")
DEFAULT_URL = "sqlite:///bench.db"
ROW_BATCH = 5000


def schema_version() -> int:
    match = re.search(r"PRAGMA\s+user_version\s*=\s*(\d+)", SCHEMA_PATH.read_text())
    if not match:
        raise DatabaseError(f"{SCHEMA_PATH}: no PRAGMA user_version line")
    return int(match.group(1))


def application_id() -> int:
    """The mark schema.sql gives bench's SQLite databases (PRAGMA application_id)."""
    match = re.search(r"PRAGMA\s+application_id\s*=\s*(\d+)", SCHEMA_PATH.read_text())
    if not match:
        raise DatabaseError(f"{SCHEMA_PATH}: no PRAGMA application_id line")
    return int(match.group(1))


def _statements(text: str) -> list[str]:
    lines = [line.split("--", 1)[0] for line in text.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (normalised: normalise_url); None for another database or memory."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return Path(parsed.database) if parsed.database else None


def normalise_url(db: str) -> str:
    """Accept a SQLAlchemy URL or a plain file path; PostgreSQL URLs without a driver get psycopg 3."""
    if "://" not in db:
        return f"sqlite:///{db}"
    for bare in ("postgresql://", "postgres://"):
        if db.startswith(bare):
            return "postgresql+psycopg://" + db[len(bare) :]
    return db


def public_url(url: str) -> str:
    """The URL without its password: what messages and the recorded commands show."""
    try:
        parsed = sa.engine.make_url(normalise_url(url))
    except sa.exc.ArgumentError:
        return url
    if parsed.password is None:
        return normalise_url(url)
    bare = sa.engine.URL.create(
        parsed.drivername, parsed.username, None, parsed.host, parsed.port, parsed.database, parsed.query
    )
    return bare.render_as_string(hide_password=False)


def hide_passwords(text: str) -> str:
    """Mask the password of any URL in a command line before it is recorded."""
    return re.sub(r"(\w[\w+.-]*://[^/:@\s]*:)[^@\s]*@", r"\1***@", text)


class Database:
    """An open results database whose schema version has been checked."""

    def __init__(self, url: str, create: bool, writing: bool | None = None) -> None:
        """``create``: make the database if there is none; ``writing``: the command writes (default:
        as ``create``). Only a writer takes the write lock to look, stamps and sets WAL."""
        self.url = normalise_url(url)
        self.public_url = public_url(url)
        try:
            parsed = sa.engine.make_url(self.url)
        except sa.exc.ArgumentError as exc:
            raise DatabaseError(f"--db {hide_passwords(url)}: not a database URL ({exc})") from None
        self.backend = parsed.get_backend_name()
        path = sqlite_path(self.url)
        # What messages name the database by: its file, or its URL without the password.
        self.where = str(path) if path is not None else self.public_url
        self.read_only = False  # a SQLite file opened read-only (sqlite_access.read_only_engine)
        if self.backend == "sqlite":
            if path is not None and not path.exists() and not create:
                raise DatabaseError(f"no database at {path}: run `bench run --matrix FILE` first")
            if path is not None and path.exists() and not path.is_file():
                # A folder, a FIFO (SQLite would block or fail deep inside), a device.
                raise DatabaseError(f"{path}: not a regular file: use another --db")
            writes = create if writing is None else writing
            # A file that cannot be written: refused to a writer, opened read-only for a reader.
            self.read_only = path is not None and not writes and sqlite_access.read_only(path)
            if path is not None and writes:
                sqlite_access.refuse_writer(path, create)
            if self.read_only and path is not None:
                self.engine: Engine = sqlite_access.read_only_engine(path)
            else:
                timeout = sqlite_access.wait_seconds()
                self.engine = sa.create_engine(self.url, connect_args={"timeout": timeout})
            sa.event.listen(self.engine, "connect", _on_connect)
            with self._not_sqlite():
                statements = _statements(SCHEMA_PATH.read_text())
                sqlite_schema.prepare(
                    self.engine,
                    self.where,
                    create,
                    writes,
                    statements,
                    schema_version(),
                    application_id(),
                    read_only=self.read_only,
                )
        elif self.backend == "postgresql":
            if parsed.drivername != "postgresql+psycopg":
                raise DatabaseError(
                    f"--db {self.public_url}: bench talks to PostgreSQL through psycopg 3: "
                    "write postgresql+psycopg://USER@HOST/NAME"
                )
            self.engine = postgres.create_engine(parsed, self.public_url)
            with self._errors():
                self._prepare_postgres(create)
        else:
            raise DatabaseError(
                f"--db {self.public_url}: bench stores results in SQLite (sqlite:///FILE or a path) "
                "or PostgreSQL (postgresql+psycopg://USER@HOST/NAME)"
            )
        statements = _statements(SCHEMA_PATH.read_text())
        if self.backend == "postgresql":
            # The version matched, so the tables are schema.sql's: derive them rather than reflect
            # them, which would cost a dozen catalog queries (150 ms) on every command.
            self.meta = postgres.portable_metadata(statements)
            postgres.accept_booleans(self.meta)
        else:
            self.meta = sa.MetaData()
            self.meta.reflect(self.engine, only=migrate.table_names(statements))
        self.sweeps = self.meta.tables["sweeps"]
        self.runs = self.meta.tables["runs"]
        self.epochs = self.meta.tables["epochs"]
        self.environments = self.meta.tables["environments"]
        self.samples = self.meta.tables["samples"]
        self.phases = self.meta.tables["phases"]
        self.kernels = self.meta.tables["kernels"]
        self.replicas = self.meta.tables["replicas"]
        self.calibrations = self.meta.tables["calibrations"]

    def _prepare_postgres(self, create: bool) -> None:
        """Create or upgrade under an advisory lock: drivers starting together do it once."""
        expected = schema_version()
        statements = _statements(SCHEMA_PATH.read_text())
        where = self.public_url
        with self.engine.begin() as conn:
            postgres.lock(conn)
            found = postgres.version(conn)
            if found is None:
                ours = set(migrate.table_names(statements)) & set(sa.inspect(conn).get_table_names())
                if ours:
                    raise DatabaseError(
                        f"{where}: has tables named like bench's ({', '.join(sorted(ours))}) but no "
                        f"{postgres.VERSION_TABLE} table: use another database for bench"
                    )
                if not create:
                    raise DatabaseError(f"{where}: the database is empty: run `bench run` first")
                postgres.portable_metadata(statements).create_all(conn)
                postgres.set_version(conn, expected)
                return
            if found != expected:
                migrate.upgrade(conn, statements, found, expected, where)

    @contextmanager
    def _not_sqlite(self) -> Iterator[None]:
        """A file that is not SQLite at all (or is damaged) is refused in one line."""
        try:
            yield
        except sa.exc.DatabaseError as exc:
            if "file is not a database" not in str(exc) and "malformed" not in str(exc):
                raise _sqlite_error(self.where, exc) from None
            raise DatabaseError(
                f"{self.where}: not a bench database (not SQLite): use another --db"
            ) from None

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A PostgreSQL server that cannot be reached is one line naming the fix, not a traceback."""
        try:
            yield
        except sa.exc.DBAPIError as exc:
            if self.backend == "sqlite":
                raise _sqlite_error(self.where, exc) from None
            if self.backend != "postgresql":
                raise
            explained = postgres.explain(exc, sa.engine.make_url(self.url), self.public_url)
            if explained is None:
                raise
            raise explained from None

    def connect(self) -> Connection:
        return self.engine.connect()

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        with self._errors(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def begin_waiting(self) -> Iterator[Connection]:
        """A write transaction whose SQLite lock is taken first, waited for and said if another
        program holds it (sqlite_access.take): what a sweep's start writes through, so that a locked
        file is said before anything runs. On PostgreSQL, begin()."""
        if self.backend != "sqlite":
            with self.begin() as conn:
                yield conn
            return
        with self._errors(), self.engine.connect() as conn:
            sqlite_access.take(conn, self.where, "BEGIN IMMEDIATE")
            yield conn
            conn.commit()

    def insert(self, conn: Connection, table: sa.Table, row: Mapping[str, Any]) -> int:
        result = conn.execute(table.insert().values(**row))
        key = result.inserted_primary_key
        return int(key[0]) if key and key[0] is not None else 0

    def rows(self, query: Any) -> Iterator[dict[str, Any]]:
        with self._errors(), self.connect() as conn:
            result = conn.execute(query)
            # zip over the keys once: twice as fast as a mapping per row on a 100,000-run report;
            # and rows in batches, since fetching one at a time costs as much again.
            keys = list(result.keys())
            numbers = _typed_columns(query) if self.backend == "sqlite" else []
            while batch := result.fetchmany(ROW_BATCH):
                for index, allowed, column in numbers:
                    # SQLite keeps whatever a column is given: a row any program wrote may hold text
                    # where bench reads a number, or bytes where it reads text. One pass per column
                    # and batch, in the row's order.
                    bad = next((row for row in batch if type(row[index]) not in allowed), None)
                    if bad is not None:
                        raise DatabaseError(_bad_value(self.where, keys, bad, index, column))
                for row in batch:
                    yield dict(zip(keys, row, strict=True))

    def reproduce_command(self, run_id: int) -> str:
        """How to run a recorded configuration again. Reports show this, made anew, rather than the
        stored text: a row of a shared database could hold any command for a reader to paste."""
        return f"bench rerun {run_id} --db {shlex.quote(self.public_url)}"

    def close(self) -> None:
        self.engine.dispose()


_INTEGERS: frozenset[object] = frozenset({int, type(None)})
_NUMBERS: frozenset[object] = frozenset({int, float, type(None)})
_TEXTS: frozenset[object] = frozenset({str, type(None)})


def _typed_columns(query: Any) -> list[tuple[int, frozenset[object], Any]]:
    """(position, the Python types allowed, column) of each integer, real or text column a query
    reads (a BLOB where bench reads text is as wrong as text where it reads a number)."""
    found: list[tuple[int, frozenset[object], Any]] = []
    for index, column in enumerate(getattr(query, "selected_columns", ())):
        kind = getattr(column, "type", None)
        if isinstance(kind, sa.Integer):
            found.append((index, _INTEGERS, column))
        elif isinstance(kind, sa.Float):
            found.append((index, _NUMBERS, column))
        elif isinstance(kind, sa.String):
            found.append((index, _TEXTS, column))
    return found


def _bad_value(where: str, keys: list[str], row: Any, index: int, column: Any) -> str:
    owner = getattr(column, "table", None)
    if owner is None:
        owner = getattr(getattr(column, "element", None), "table", None)
    table = getattr(owner, "name", None) or "runs"
    values = dict(zip(keys, row, strict=True))
    if table == "runs" and "id" in values:
        which = f"run {values['id']}"
    elif "run_id" in values:
        which = f"{table} of run {values['run_id']}"
    else:
        which = f"table {table}"
    kinds = ((sa.Integer, "an integer"), (sa.Float, "a number"), (sa.String, "text"))
    expected = next(word for kind, word in kinds if isinstance(column.type, kind))
    shown = repr(row[index])
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{where}: {which}: {keys[index]}: expected {expected}, got {shown}"


def _sqlite_error(where: str, exc: sa.exc.DBAPIError) -> DatabaseError:
    """SQLite's own complaint (cannot open, disk I/O error, locked, read-only, disk full), in one line."""
    return sqlite_access.explain(where, exc)


def _on_connect(dbapi_conn: Any, _record: Any) -> None:
    # No journal mode here: that is the file's own setting, made WAL once when bench creates it
    # (orchestrator/storage/sqlite_schema.py); a connection that only reads must not change it.
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout={sqlite_access.busy_timeout_ms()}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()

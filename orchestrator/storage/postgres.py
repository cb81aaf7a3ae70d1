"""PostgreSQL as the results database: the schema translated from schema.sql, the version row,
and connection failures turned into one line that says what to do.

schema.sql is written in SQLite's dialect and stays the one truth. Its PostgreSQL form is derived,
not written twice: the file is loaded into an in-memory SQLite database, SQLAlchemy reflects it,
and the types are chosen so that both backends hold and order the same values. SQLite's INTEGER
is 64-bit (PostgreSQL's is 32: byte counts would overflow): BIGINT. Its REAL is a double
(PostgreSQL's is single precision: timings would lose digits): DOUBLE PRECISION. Its text
compares byte by byte: TEXT with collation "C", so sorting agrees whatever the server's locale.
A single-column INTEGER PRIMARY KEY that references nothing is SQLite's auto-numbered rowid;
SQLAlchemy gives it a sequence (BIGSERIAL) on PostgreSQL. SQLite keeps its version in
PRAGMA user_version; PostgreSQL has no such slot, so a one-row table holds it.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from orchestrator.errors import DatabaseError

VERSION_TABLE = "schema_version"
# Taken (transaction-scoped) while a database is created or upgraded, so that two drivers starting
# at once on an empty database do not both create it: the second waits, then finds it made.
PREPARE_LOCK = 0x62656E6368  # "bench"
CONNECT_TIMEOUT_S = 10
INSTALL_HINT = "pip install 'psycopg[binary]' (bench's postgres extra: pip install -e '.[postgres]')"


def portable_metadata(statements: list[str]) -> sa.MetaData:
    """schema.sql's tables as SQLAlchemy objects whose types mean the same on both backends."""
    scratch = sa.create_engine("sqlite://")
    with scratch.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
    meta = sa.MetaData()
    meta.reflect(scratch)
    scratch.dispose()
    for table in meta.tables.values():
        for column in table.columns:
            if isinstance(column.type, sa.Integer):
                column.type = sa.BigInteger()
            elif isinstance(column.type, sa.Float):
                column.type = sa.Double()
            elif isinstance(column.type, sa.String):
                column.type = sa.Text(collation="C")
    return meta


def create_engine(url: URL, shown: str) -> Engine:
    try:
        return sa.create_engine(
            url,
            pool_pre_ping=True,  # a server restarted between two runs of a long sweep is reconnected to
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "bench"},
        )
    except ImportError:
        raise DatabaseError(f"--db {shown}: PostgreSQL needs the psycopg package: {INSTALL_HINT}") from None


def lock(conn: Connection) -> None:
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PREPARE_LOCK})")


def version(conn: Connection) -> int | None:
    """The recorded schema version; None where the database has no version table."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    return int(conn.exec_driver_sql(f"SELECT max(version) FROM {VERSION_TABLE}").scalar() or 0)


def set_version(conn: Connection, number: int) -> None:
    conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
    conn.exec_driver_sql(f"DELETE FROM {VERSION_TABLE}")
    conn.exec_driver_sql(f"INSERT INTO {VERSION_TABLE} (version) VALUES ({int(number)})")


def add_column_sql(column: sa.Column, conn: Connection) -> str:
    definition = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
    return f"ALTER TABLE {column.table.name} ADD COLUMN {definition}"


# What libpq says, and what the user should do about it (first match wins).
_EXPLAINED: list[tuple[str, str]] = [
    (
        r"password authentication failed|no password supplied",
        "wrong user or password: fix them in --db, or give the password in ~/.pgpass or PGPASSWORD",
    ),
    (
        r'database "[^"]*" does not exist',
        "no such database on the server: create it (createdb -h {host} -p {port} -U {user} {database}) "
        "or fix the name in --db",
    ),
    (r'role "[^"]*" does not exist', "no such user on the server: create it (createuser) or fix it in --db"),
    (
        r"connection refused",
        "the server refused the connection: is PostgreSQL running there, "
        "listening on that host and port? (pg_isready -h {host} -p {port})",
    ),
    (
        r"could not translate host name|failed to resolve host|name or service not known",
        "unknown host: fix the host name in --db",
    ),
    (
        r"timeout expired|timed out",
        f"no answer within {CONNECT_TIMEOUT_S} s: check the host, the port and any firewall between",
    ),
    (
        r"permission denied",
        "the user may not do that here: make it the database's owner (createdb --owner {user}), or "
        "GRANT CREATE ON SCHEMA public TO {user} (to write) or SELECT ON ALL TABLES (to read)",
    ),
    (
        r"no pg_hba.conf entry",
        "the server does not accept this user from this machine: add a line to its pg_hba.conf",
    ),
]


def explain(exc: sa.exc.DBAPIError, url: URL, shown: str) -> DatabaseError | None:
    """One line naming the problem and the fix, never the password. None for an error that is
    neither about the connection nor one of those above: a bug, whose traceback is wanted."""
    message = str(exc.orig) if exc.orig is not None else str(exc)
    where = {"host": url.host or "localhost", "port": url.port or 5432, "user": url.username or "USER"}
    where["database"] = url.database or "NAME"
    for pattern, advice in _EXPLAINED:
        if re.search(pattern, message, re.I):
            return DatabaseError(f"--db {shown}: {advice.format(**where)}")
    if not isinstance(exc, sa.exc.OperationalError):
        return None
    first = next((line.strip() for line in message.splitlines() if line.strip()), message)
    return DatabaseError(f"--db {shown}: {first}")


class _Integer(sa.TypeDecorator):
    """An integer column that takes booleans as 0/1: SQLite stores them so, PostgreSQL refuses them."""

    impl = sa.BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return int(value) if isinstance(value, bool) else value


def accept_booleans(meta: sa.MetaData) -> None:
    """Let the reflected tables' integer columns take Python booleans (settings such as ignore_sigterm)."""
    for table in meta.tables.values():
        for column in table.columns:
            if isinstance(column.type, sa.Integer):
                column.type = _Integer()

"""Bring an older results database up to schema.sql, where the difference is additions only.

The upgrade is derived from schema.sql itself: tables it has that the database lacks are created,
and columns it has that a table lacks are added (ALTER TABLE ADD COLUMN; on PostgreSQL in the
types orchestrator/postgres.py derives, and DDL is transactional there too). Nothing
recorded is changed. Versions older than OLDEST_UPGRADABLE changed columns, not just added them,
and are refused.
"""

from __future__ import annotations

import logging
import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from orchestrator import postgres
from orchestrator.errors import DatabaseError

OLDEST_UPGRADABLE = 2
log = logging.getLogger(__name__)


def tables_in(statements: list[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """Each CREATE TABLE of the schema: its statement and its column definitions by name."""
    tables = {}
    for statement in statements:
        match = re.match(r"CREATE TABLE (\w+)\s*\((.*)\)\s*$", statement, re.S)
        if not match:
            continue
        columns = {}
        for part in _top_level_parts(match.group(2)):
            name = part.split()[0]
            if name.upper() not in ("PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT"):
                columns[name] = part
        tables[match.group(1)] = (statement, columns)
    return tables


def _top_level_parts(body: str) -> list[str]:
    """Split a column list on the commas that are not inside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in body:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def table_names(statements: list[str]) -> list[str]:
    return list(tables_in(statements))


def upgrade(conn: Connection, statements: list[str], found: int, expected: int, where: object) -> None:
    """Apply the additions from version ``found`` to ``expected`` in the open transaction."""
    if found < OLDEST_UPGRADABLE or found > expected:
        raise DatabaseError(
            f"{where}: schema version {found}, but this bench expects {expected}: "
            f"use a new file with --db, or open it with the bench version that wrote it"
        )
    on_postgres = conn.dialect.name == "postgresql"
    portable = postgres.portable_metadata(statements) if on_postgres else None
    inspector = sa.inspect(conn)
    for table, (create, columns) in tables_in(statements).items():
        have = {c["name"] for c in inspector.get_columns(table)} if inspector.has_table(table) else set()
        if not have:
            if portable is not None:
                portable.tables[table].create(conn)
            else:
                conn.exec_driver_sql(create)
            continue
        for name, definition in columns.items():
            if name not in have:
                if re.search(r"PRIMARY KEY|UNIQUE|NOT NULL(?!.*DEFAULT)", definition, re.I):
                    raise DatabaseError(
                        f"{where}: cannot add column {table}.{name} to a version {found} database"
                    )
                if portable is not None:
                    conn.exec_driver_sql(postgres.add_column_sql(portable.tables[table].c[name], conn))
                else:
                    conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {definition}")
    for statement in statements:
        if statement.upper().startswith("CREATE INDEX"):
            conn.exec_driver_sql(statement.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
    if portable is not None:
        postgres.set_version(conn, expected)
    else:
        conn.exec_driver_sql(f"PRAGMA user_version = {expected}")
    log.warning("%s: upgraded the database from schema version %d to %d", where, found, expected)

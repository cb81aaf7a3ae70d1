"""Bring an older results database up to schema.sql, where the difference is additions only.

The upgrade is derived from schema.sql itself: tables it has that the database lacks are created,
and columns it has that a table lacks are added (SQLite's ALTER TABLE ADD COLUMN). Nothing
recorded is changed. Versions older than OLDEST_UPGRADABLE changed columns, not just added them,
and are refused.

One change is not an added column: a CHECK that lists allowed values and gained some (version 5
added the outcome `skipped`). Every recorded row satisfies the wider list, so the stored table
definition is rewritten in place (SQLite's documented writable_schema procedure for changing
CHECK constraints), never the rows.
"""

from __future__ import annotations

import logging
import re

from sqlalchemy.engine import Connection

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


def upgrade(conn: Connection, statements: list[str], found: int, expected: int, where: object) -> None:
    """Apply the additions from version ``found`` to ``expected`` in the open transaction."""
    if found < OLDEST_UPGRADABLE or found > expected:
        raise DatabaseError(
            f"{where}: schema version {found}, but this bench expects {expected}: "
            f"use a new file with --db, or open it with the bench version that wrote it"
        )
    for table, (create, columns) in tables_in(statements).items():
        have = {row[1] for row in conn.exec_driver_sql(f"PRAGMA table_info({table})")}
        if not have:
            conn.exec_driver_sql(create)
            continue
        for name, definition in columns.items():
            if name not in have:
                if re.search(r"PRIMARY KEY|UNIQUE|NOT NULL(?!.*DEFAULT)", definition, re.I):
                    raise DatabaseError(
                        f"{where}: cannot add column {table}.{name} to a version {found} database"
                    )
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {definition}")
        _widen_checks(conn, table, columns, where)
    for statement in statements:
        if statement.upper().startswith("CREATE INDEX"):
            conn.exec_driver_sql(statement.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
    conn.exec_driver_sql(f"PRAGMA user_version = {expected}")
    log.warning("%s: upgraded the database from schema version %d to %d", where, found, expected)


def _check_list(name: str) -> re.Pattern[str]:
    return re.compile(rf"(CHECK\s*\(\s*{name}\s+IN\s*\()([^)]*)(\))", re.I)


def _widen_checks(conn: Connection, table: str, columns: dict[str, str], where: object) -> None:
    """Rewrite `CHECK (col IN (...))` in the stored definition where schema.sql allows more values."""
    stored = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    sql = stored.scalar() or ""
    new_sql = sql
    for name, definition in columns.items():
        pattern = _check_list(name)
        want, have = pattern.search(definition), pattern.search(new_sql)
        if not want or not have:
            continue
        wider, narrower = (set(re.findall(r"'([^']*)'", m.group(2))) for m in (want, have))
        if not narrower < wider:
            continue
        new_sql = new_sql[: have.start(2)] + want.group(2) + new_sql[have.end(2) :]
    if new_sql != sql:
        version = conn.exec_driver_sql("PRAGMA schema_version").scalar() or 0
        conn.exec_driver_sql("PRAGMA writable_schema = ON")
        conn.exec_driver_sql(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?", (new_sql, table)
        )
        conn.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
        conn.exec_driver_sql("PRAGMA writable_schema = OFF")

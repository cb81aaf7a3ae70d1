"""Bring an older results database up to schema.sql, where the difference is additions, and one fold.

The upgrade is derived from schema.sql itself: tables it has that the database lacks are created,
and columns it has that a table lacks are added (ALTER TABLE ADD COLUMN; on PostgreSQL in the
types orchestrator/storage/postgres.py derives, and DDL is transactional there too). Nothing
recorded is changed. Versions older than OLDEST_UPGRADABLE changed columns, not just added them,
and are refused.

One change is not an added column: the CHECK listing the allowed outcomes gained some (version 5
added `skipped` and the cluster outcomes). Every recorded row satisfies the wider list, so the
constraint is replaced, never the rows: on SQLite by rewriting the stored table definition (its
documented writable_schema procedure for changing CHECK constraints), on PostgreSQL by dropping and
adding the constraint.

The fold: version 13 stores the fault worker's ten settings as one JSON value in runs.fault, where
they were ten columns. Each row's values move into that value (the fault's name as its `kind`) and
the nine other columns are dropped (SQLite 3.35 and later, PostgreSQL); every row is kept.
"""

from __future__ import annotations

import json
import logging
import re

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from orchestrator.errors import DatabaseError
from orchestrator.storage import postgres

OLDEST_UPGRADABLE = 2
log = logging.getLogger(__name__)

_FIRST_TABLES = frozenset({"sweeps", "runs", "epochs", "environments"})
# The tables of each schema version bench can open. A SQLite file without bench's application_id
# (one written before the mark existed) is taken for bench's only if it holds exactly one of these.
TABLES_BY_VERSION = {
    2: _FIRST_TABLES,
    3: _FIRST_TABLES | {"samples", "phases"},
    4: _FIRST_TABLES | {"samples", "phases", "kernels"},
    5: _FIRST_TABLES | {"samples", "phases", "kernels"},
    6: _FIRST_TABLES | {"samples", "phases", "kernels"},
    7: _FIRST_TABLES | {"samples", "phases", "kernels"},
    8: _FIRST_TABLES | {"samples", "phases", "kernels"},
    9: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas"},
    10: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas"},
    11: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
    12: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
    13: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
    14: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
    15: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
    16: _FIRST_TABLES | {"samples", "phases", "kernels", "replicas", "calibrations"},
}
# Version 13 folded the fault worker's ten settings, a runs column each until then, into one JSON
# column, runs.fault: each part's name in that value and the column it came from. A fact of the
# history, written out: it must not follow later changes to the settings' declarations.
FOLDED_FAULT_COLUMNS = (
    ("kind", "fault"),
    ("exit_code", "exit_code_setting"),
    ("seconds", "seconds"),
    ("after_steps", "after_steps"),
    ("ignore_sigterm", "ignore_sigterm"),
    ("hold_threads", "hold_threads"),
    ("hold_memory_mb", "hold_memory_mb"),
    ("hold_seconds", "hold_seconds"),
    ("hold_child_memory_mb", "hold_child_memory_mb"),
    ("replica", "fault_replica"),
)


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


def check_upgradable(found: int, expected: int, where: object) -> None:
    if found < OLDEST_UPGRADABLE or found > expected:
        raise DatabaseError(
            f"{where}: schema version {found}, but this bench expects {expected}: "
            f"use a new file with --db, or open it with the bench version that wrote it"
        )


def upgrade(conn: Connection, statements: list[str], found: int, expected: int, where: object) -> None:
    """Apply the additions from version ``found`` to ``expected`` in the open transaction."""
    check_upgradable(found, expected, where)
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
    _widen_outcome_check(conn, statements)
    if found < 13:
        fold_fault_columns(conn)
    for statement in statements:
        # Version 16's unique index on runs.record_id too: every older row's is NULL, which a
        # unique index allows any number of (SQLite and PostgreSQL alike).
        match = re.match(r"CREATE (UNIQUE )?INDEX", statement, re.I)
        if match:
            conn.exec_driver_sql(statement.replace(match.group(0), f"{match.group(0)} IF NOT EXISTS", 1))
    if portable is not None:
        postgres.set_version(conn, expected)
    else:
        conn.exec_driver_sql(f"PRAGMA user_version = {expected}")
    log.warning("%s: upgraded the database from schema version %d to %d", where, found, expected)


OUTCOME_CHECK = re.compile(r"CHECK\s*\(\s*outcome\s+IN\s*\([^)]*\)\s*\)", re.I)


def _widen_outcome_check(conn: Connection, statements: list[str]) -> None:
    """Give runs.outcome the schema's list of outcomes (version 5 added skipped and the cluster ones).

    SQLite cannot ALTER a CHECK constraint; rewriting its text in sqlite_master is the documented
    way for a change that leaves every stored row valid (a longer list of allowed values does).
    """
    wanted = OUTCOME_CHECK.search(tables_in(statements)["runs"][0])
    if wanted is not None and conn.dialect.name == "postgresql":
        _widen_outcome_check_postgres(conn, wanted.group(0))
        return
    if conn.dialect.name != "sqlite":
        return
    stored = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
    ).scalar()
    found = OUTCOME_CHECK.search(stored or "")
    if wanted is None or found is None or found.group(0) == wanted.group(0):
        return
    version = conn.exec_driver_sql("PRAGMA schema_version").scalar() or 0
    conn.exec_driver_sql("PRAGMA writable_schema = ON")
    conn.exec_driver_sql(
        "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'runs'",
        (OUTCOME_CHECK.sub(lambda _m: wanted.group(0), str(stored), count=1),),
    )
    conn.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    conn.exec_driver_sql("PRAGMA writable_schema = OFF")


def _widen_outcome_check_postgres(conn: Connection, check: str) -> None:
    """PostgreSQL alters constraints in place: drop the outcome CHECK and add the schema's."""
    names = conn.execute(
        sa.text(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'runs'::regclass AND contype = 'c' "
            "AND pg_get_constraintdef(oid) LIKE :outcome"
        ),
        {"outcome": "%outcome%"},
    ).scalars()
    drops = [f"DROP CONSTRAINT {name}" for name in names]
    conn.exec_driver_sql(
        f"ALTER TABLE runs {', '.join([*drops, f'ADD CONSTRAINT runs_outcome_check {check}'])}"
    )


def fold_fault_columns(conn: Connection) -> None:
    """Version 13: the fault worker's columns of each run folded into runs.fault, one JSON value."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
    folded = [(part, column) for part, column in FOLDED_FAULT_COLUMNS if column in have]
    if [column for _, column in folded] == ["fault"]:
        return  # folded already, or nothing to fold
    runs = sa.table("runs", sa.column("id"), *(sa.column(column) for _, column in folded))
    query = sa.select(runs).where(sa.or_(*(runs.c[column].is_not(None) for _, column in folded)))
    for row in conn.execute(query).mappings().all():
        value = {part: _plain(part, row[column]) for part, column in folded if row[column] is not None}
        conn.execute(sa.update(runs).where(runs.c.id == row["id"]).values(fault=json.dumps(value)))
    for _, column in folded:
        if column != "fault":
            conn.exec_driver_sql(f"ALTER TABLE runs DROP COLUMN {column}")


def _plain(part: str, value: object) -> object:
    """A stored value as the JSON value holds it: ignore_sigterm was an integer column, bytes are
    what SQLite may hold in any column (a row is outside input)."""
    if part == "ignore_sigterm" and isinstance(value, int):
        return bool(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value

"""Open a SQLite results database: create it, upgrade it, or refuse a file that is not bench's.

Bench marks its databases with SQLite's application_id (schema.sql). A file is bench's when it
carries that mark, or, written by a bench from before the mark, when its application_id is 0 and
its tables are exactly those of a schema version bench knows; such a file is stamped the next time
bench writes it. Anything else (another program's id, other tables, a file that is not SQLite) is
refused before bench writes a byte.

A writer takes SQLite's write lock before it looks (BEGIN IMMEDIATE), so that two `bench run`s
creating one new file do it once: the second waits on the busy timeout, then finds the schema made.
Only a writer sets WAL, once, in the file; a command that only reads changes nothing. The first
statement of either waits for a lock another program holds, bounded, and says so
(sqlite_access.take).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from orchestrator.errors import DatabaseError
from orchestrator.storage import migrate, sqlite_access

LISTED_TABLES = 6  # how many of a foreign file's table names the refusal shows
WAL_RETRY_S = 0.1  # switching to WAL needs a moment alone with the file: retried this far apart


@dataclass(frozen=True)
class _State:
    application_id: int
    version: int
    tables: frozenset[str]


def prepare(
    engine: Engine,
    where: str,
    create: bool,
    writing: bool,
    statements: list[str],
    expected: int,
    mark: int,
    read_only: bool = False,
) -> None:
    """Check (and, for a writer, create, upgrade or stamp) the database; DatabaseError if not bench's.

    ``create``: an empty file becomes bench's; ``writing``: the command will write (a writer looks
    under the write lock, stamps a legacy bench database, and makes the file WAL); ``read_only``:
    the file is opened read-only (it can be read, never upgraded).
    """
    with engine.connect() as conn:
        sqlite_access.take(
            conn, where, "BEGIN IMMEDIATE" if writing else "SELECT count(*) FROM sqlite_master"
        )
        state = _look(conn)
        if writing or _needs_writing(state, expected, mark):
            if not writing:
                if read_only:
                    raise DatabaseError(
                        f"{where}: schema version {state.version}, older than this bench's {expected}, "
                        "in a place bench cannot write, so it cannot be upgraded: copy the file "
                        "somewhere writable and give --db the copy"
                    )
                # A reader that must upgrade an older bench database writes too: under the lock,
                # and after looking again, since another bench may have done it meanwhile.
                conn.rollback()
                sqlite_access.take(conn, where, "BEGIN IMMEDIATE")
                state = _look(conn)
            _write(conn, state, where, create, statements, expected, mark)
            conn.commit()
        else:
            _check(state, where, statements, expected, mark)
    if writing:
        _wal(engine, where)


def _look(conn: Connection) -> _State:
    names = conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    ).scalars()
    return _State(
        int(conn.exec_driver_sql("PRAGMA application_id").scalar() or 0),
        int(conn.exec_driver_sql("PRAGMA user_version").scalar() or 0),
        frozenset(str(name) for name in names),
    )


def _empty(state: _State) -> bool:
    return state.application_id == 0 and state.version == 0 and not state.tables


def _needs_writing(state: _State, expected: int, mark: int) -> bool:
    """Whether a reader must write: only to bring an older bench database up to this schema."""
    return not _empty(state) and state.version != expected and _is_ours(state, mark)


def _is_ours(state: _State, mark: int) -> bool:
    if state.application_id == mark:
        return True
    known = migrate.TABLES_BY_VERSION.get(state.version)
    return state.application_id == 0 and known is not None and state.tables == known


def _check(state: _State, where: str, statements: list[str], expected: int, mark: int) -> None:
    """What a reader checks: a bench database of this schema (it writes nothing)."""
    if _empty(state):
        raise DatabaseError(f"{where}: the database is empty: run `bench run` first")
    _refuse_foreign(state, where, mark)
    _check_version(state, where, statements, expected)


def _write(
    conn: Connection,
    state: _State,
    where: str,
    create: bool,
    statements: list[str],
    expected: int,
    mark: int,
) -> None:
    if _empty(state):
        if not create:
            raise DatabaseError(f"{where}: the database is empty: run `bench run` first")
        for statement in statements:
            conn.exec_driver_sql(statement)
        return
    _refuse_foreign(state, where, mark)
    if state.version != expected:
        migrate.upgrade(conn, statements, state.version, expected, where)
    else:
        _check_version(state, where, statements, expected)
    if state.application_id != mark:
        conn.exec_driver_sql(f"PRAGMA application_id = {mark}")


def _refuse_foreign(state: _State, where: str, mark: int) -> None:
    if _is_ours(state, mark):
        return
    names = sorted(state.tables)
    shown = ", ".join(names[:LISTED_TABLES]) + (
        f", … ({len(names)} in all)" if len(names) > LISTED_TABLES else ""
    )
    raise DatabaseError(
        f"{where}: not a bench database (application_id {state.application_id:#x}, user_version "
        f"{state.version}, tables: {shown or 'none'}): use another --db"
    )


def _check_version(state: _State, where: str, statements: list[str], expected: int) -> None:
    if state.version != expected:
        # Refused by the same words as a writer's (migrate.upgrade) when the version is not one
        # bench can bring up to date; a readable older one was upgraded under the write lock.
        migrate.check_upgradable(state.version, expected, where)
    missing = set(migrate.table_names(statements)) - state.tables
    if missing:
        raise DatabaseError(
            f"{where}: bench's database lacks its tables {', '.join(sorted(missing))}: use another --db"
        )


def _wal(engine: Engine, where: str) -> None:
    """Make the file WAL (persistent; reports then read while a run writes), if it is not yet."""
    with engine.connect() as conn:
        if str(conn.exec_driver_sql("PRAGMA journal_mode").scalar()).lower() == "wal":
            return
    deadline = time.monotonic() + max(sqlite_access.wait_seconds(), WAL_RETRY_S)
    while True:
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
                return
        except sa.exc.OperationalError as exc:
            if not sqlite_access.locked(exc):
                raise
            if time.monotonic() >= deadline:
                break
            time.sleep(WAL_RETRY_S)
    raise DatabaseError(f"{where}: cannot switch the database to WAL: another program keeps it locked")

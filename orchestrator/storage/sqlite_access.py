"""Reaching a SQLite file that bench does not have to itself: another program holding its lock, a
file in a place that cannot be written, a file system that is full.

A lock. Any program may hold the file's lock for a while: another `bench run` committing a run (a
few milliseconds), the sqlite3 shell in an open transaction, a backup tool. SQLite's busy timeout
waits for it silently; bench waits the same bound (BENCH_DB_WAIT seconds, 30 by default), but once
the wait has lasted NOTICE_S it says so in one line naming the file, so that a command that seems
stuck says what it waits for. Past the bound it is one line and exit 1: nothing was written, and
what was recorded before stays (SQLite commits atomically).

A read-only place. `bench report`, `inspect`, `timeline` and `export` only read: on a file they may
not write (a read-only mount, a file or folder without write permission) they open it read-only.
A WAL file's readers normally write its -shm index beside it; where no -wal file is beside it, the
whole database is in the file and nobody can be writing it, so it is opened immutable (no lock, no
-shm); where a -wal is beside it but no -shm can be made, the two are read from a private copy.
A command that writes is refused in one line naming the file, before it runs anything.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from orchestrator.errors import DatabaseError

WAIT_VARIABLE = "BENCH_DB_WAIT"
DEFAULT_WAIT_S = 30.0
# A bench commit holds the lock for milliseconds (a long run's samples, a few hundred): a lock held
# longer than this is worth a line.
NOTICE_S = 2.0
MOST_WAIT_S = 7 * 24 * 3600.0

log = logging.getLogger(__name__)


def wait_seconds() -> float:
    """How long a command waits for a file another program holds locked (BENCH_DB_WAIT)."""
    text = os.environ.get(WAIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MOST_WAIT_S:  # False for nan
        raise DatabaseError(
            f"{WAIT_VARIABLE}={text[:40]!r}: expected the seconds to wait for a locked database, "
            f"0 to {MOST_WAIT_S:.0f}"
        )
    return value


def busy_timeout_ms() -> int:
    return int(wait_seconds() * 1000)


def read_only(path: Path) -> bool:
    """Whether an existing file, or the folder its journal files go in, cannot be written. As root,
    permissions allow everything and only a read-only mount says no (access(2) checks both)."""
    return path.exists() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _why_read_only(path: Path) -> str:
    try:
        mounted_read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        mounted_read_only = False
    return "on a read-only file system" if mounted_read_only else "no permission to write it or its folder"


def refuse_writer(path: Path, create: bool) -> None:
    """A command that writes, refused in one line before it runs anything, where it cannot write."""
    if read_only(path):
        raise DatabaseError(
            f"{path}: read-only ({_why_read_only(path)}): this command records results there; "
            "give --db a file in a place that can be written (reports can read this one)"
        )
    if create and not path.exists() and path.parent.is_dir() and not os.access(path.parent, os.W_OK):
        raise DatabaseError(
            f"{path}: cannot be created ({_why_read_only(path)}): "
            "give --db a file in a place that can be written"
        )


def read_only_engine(path: Path) -> Engine:
    """An engine that only reads the file: immutable where no -wal file is beside it (the whole
    database is in the file, and a place nobody can write is a file nobody changes), else mode=ro.
    SQLite reads a -wal only through its -shm index: where there is none and none can be made
    beside the file, the file and its -wal are read from a private copy (removed at exit)."""
    wal, shm = _beside(path, "-wal"), _beside(path, "-shm")
    if not wal.exists():
        uri = f"{path.resolve().as_uri()}?immutable=1"
    elif shm.exists() or os.access(path.parent, os.W_OK):
        uri = f"{path.resolve().as_uri()}?mode=ro"
    else:
        uri = f"{_private_copy(path, wal).as_uri()}?mode=ro"
    timeout = wait_seconds()

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)

    # NullPool: each use opens the file anew, as cheap as a pooled connection for a file that
    # nobody writes, and nothing is shared between threads.
    return sa.create_engine("sqlite://", creator=connect, poolclass=sa.pool.NullPool)


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _private_copy(path: Path, wal: Path) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-read-only-"))
    atexit.register(shutil.rmtree, folder, True)
    try:
        shutil.copyfile(path, folder / path.name)
        shutil.copyfile(wal, _beside(folder / path.name, "-wal"))
    except OSError as exc:
        raise DatabaseError(
            f"{path}: its -wal can be read only from a copy, and the copy failed: {exc.strerror or exc}"
        ) from None
    return folder / path.name


def locked(exc: BaseException) -> bool:
    """SQLite's busy answer: another connection holds the lock it needs (or did, past the timeout)."""
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig)


def still_locked(where: str, bound: float) -> DatabaseError:
    return DatabaseError(
        f"{where}: still locked by another program after {bound:g} s: nothing was written; "
        f"run the command again once it lets go ({WAIT_VARIABLE}=SECONDS waits longer)"
    )


def take(conn: Connection, where: str, statement: str) -> None:
    """Run the statement that first takes the file's lock (BEGIN IMMEDIATE for a writer, a read for
    a reader), waiting for a lock another program holds: silently for NOTICE_S, then saying so
    once, up to the bound; past it, DatabaseError."""
    bound = wait_seconds()
    notice = min(NOTICE_S, bound)
    try:
        _busy(conn, notice)
        try:
            conn.exec_driver_sql(statement).close()
            return
        except sa.exc.OperationalError as exc:
            if not locked(exc):
                raise
            if bound <= notice:
                raise still_locked(where, bound) from None
        log.warning(
            "%s is locked by another program: waiting for it (up to %g s; %s sets how long)",
            where,
            bound,
            WAIT_VARIABLE,
        )
        _busy(conn, bound - notice)
        try:
            conn.exec_driver_sql(statement).close()
        except sa.exc.OperationalError as exc:
            if not locked(exc):
                raise
            raise still_locked(where, bound) from None
    finally:
        _busy(conn, bound)


def _busy(conn: Connection, seconds: float) -> None:
    conn.exec_driver_sql(f"PRAGMA busy_timeout={int(seconds * 1000)}").close()


def explain(where: str, exc: sa.exc.DBAPIError) -> DatabaseError:
    """SQLite's own complaint in one line, with what to do where bench knows it."""
    detail = str(exc.orig).splitlines()[0] if exc.orig is not None else type(exc).__name__
    if locked(exc):
        return still_locked(where, wait_seconds())
    if "full" in detail:
        return DatabaseError(
            f"{where}: the file system is full (SQLite says: {detail}): this write was not made, "
            "and what was recorded before it stays; free some space there, then `bench run --resume`"
        )
    if "readonly" in detail or "read-only" in detail:
        return DatabaseError(
            f"{where}: cannot be written (SQLite says: {detail}): give --db a file in a place "
            "that can be written"
        )
    return DatabaseError(f"{where}: SQLite says: {detail}")

"""Two (or more) `bench run`s creating one new database at once: the schema is made once, in one
transaction, and every creator goes on to record (issue 21). Real processes on a real file."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from orchestrator.storage.db import application_id, schema_version
from orchestrator.storage.migrate import TABLES_BY_VERSION

CREATORS = 4
ROUNDS = 12


def _create_and_start_sweep(path: str, barrier, results) -> None:
    from orchestrator.storage.db import Database
    from orchestrator.sweep import recording

    try:
        barrier.wait(timeout=60)
        db = Database(path, create=True)
        recording.start_sweep(db, "race", "matrix", 1, None, None)
        db.close()
        results.put("ok")
    except BaseException as exc:  # the test reports whatever went wrong, traceback or not
        results.put(f"{type(exc).__name__}: {exc}")


def test_concurrent_creators_all_succeed_and_the_schema_is_made_once(tmp_path: Path):
    ctx = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"race-{round_}.db"
        barrier, results = ctx.Barrier(CREATORS), ctx.Queue()
        procs = [
            ctx.Process(target=_create_and_start_sweep, args=(str(path), barrier, results))
            for _ in range(CREATORS)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        outcomes = [results.get(timeout=5) for _ in procs]
        assert outcomes == ["ok"] * CREATORS, (round_, outcomes)
        conn = sqlite3.connect(path)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} - {
            "sqlite_sequence"
        }
        assert tables == TABLES_BY_VERSION[schema_version()]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
        assert conn.execute("PRAGMA application_id").fetchone()[0] == application_id()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM sweeps").fetchone()[0] == CREATORS
        conn.close()

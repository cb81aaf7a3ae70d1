"""A SQLite file another program holds locked (issue 45): bench waits for it, bounded, saying in one
line that it waits and for which file; when the lock goes it goes on and loses no row; past the
bound (BENCH_DB_WAIT) it is a one-line error, exit 1, and nothing recorded is lost. The other program
is a real process holding SQLite's lock (BEGIN EXCLUSIVE) until the test lets it go."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.storage.sqlite_access import WAIT_VARIABLE
from tests.conftest import bench_command

# Holds the lock from "held" until a line comes on its standard input (or it is killed).
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""
WAIT_LINE = "is locked by another program: waiting for it"  # after the file, as --db names it


@contextmanager
def held(db: Path) -> Iterator[subprocess.Popen]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)


def release(holder: subprocess.Popen) -> None:
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    holder.wait(30)


def start_bench(cwd: Path, wait_s: float, *args: str) -> subprocess.Popen:
    env = {**os.environ, WAIT_VARIABLE: str(wait_s)}
    return subprocess.Popen(
        bench_command(*args), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_line(proc: subprocess.Popen) -> str:
    """The first line of bench's standard error: the one saying it waits (bench's own bound ends
    the wait for it, with the error line, if it never comes)."""
    assert proc.stderr is not None
    return proc.stderr.readline()


def bench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """bench in a process of its own, which closes the file when it ends (an in-process command's
    pooled connection would keep a WAL file open, and the journal mode could not be changed)."""
    return subprocess.run(bench_command(*args), cwd=cwd, capture_output=True, text=True, timeout=300)


def rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, sweep_id, config_hash, outcome FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def recorded(workdir: Path, write_matrix) -> Path:
    """A database holding one sweep of two fault runs, and the matrix that made it (m.yaml)."""
    write_matrix(
        """
        name: locked
        settings: {framework: fault, dataset_size: 16, batch_size: 8, epochs: 1, warmup_steps: 0}
        axes:
          seed: [1, 2]
        """
    )
    done = bench(workdir, "run", "--matrix", "m.yaml")
    assert done.returncode == 0, done.stderr
    return workdir / "bench.db"


@pytest.mark.slow
def test_a_run_waits_for_the_lock_says_so_once_and_goes_on(recorded: Path, workdir: Path):
    before = rows(recorded)
    with held(recorded) as holder:
        proc = start_bench(workdir, 120, "run", "--matrix", "m.yaml")
        line = wait_line(proc)
        assert line.startswith(f"bench: bench.db {WAIT_LINE}"), line
        assert proc.poll() is None  # still waiting: nothing ran meanwhile
        assert not list((workdir / "bench-runs").glob("sweep-2"))
        release(holder)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and WAIT_LINE not in err  # said once, before
    after = rows(recorded)
    assert after[: len(before)] == before
    assert [(r[1], r[3]) for r in after[len(before) :]] == [(2, "ok"), (2, "ok")]


@pytest.mark.slow
def test_past_the_bound_a_run_is_one_line_and_records_nothing(recorded: Path, workdir: Path):
    before = rows(recorded)
    with held(recorded) as holder:
        started = time.monotonic()
        proc = start_bench(workdir, 3, "run", "--matrix", "m.yaml")
        out, err = proc.communicate(timeout=120)
        waited = time.monotonic() - started
        release(holder)
    assert proc.returncode == 1
    lines = err.splitlines()
    assert len(lines) == 2 and WAIT_LINE in lines[0], err
    assert lines[1].startswith("error: bench.db: still locked by another program after 3 s"), err
    assert waited >= 3
    assert rows(recorded) == before
    conn = sqlite3.connect(recorded)
    assert conn.execute("SELECT count(*) FROM sweeps").fetchone()[0] == 1
    conn.close()


@pytest.mark.slow
def test_a_report_waits_for_a_lock_that_keeps_readers_out(recorded: Path, workdir: Path):
    """In WAL mode a writer's lock leaves readers be; a rollback-journal file's (an older bench's, or
    one another tool set so) keeps them out: the report waits, says so, then reports."""
    expected = bench(workdir, "report").stdout
    conn = sqlite3.connect(recorded)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    conn.close()
    with held(recorded) as holder:
        proc = start_bench(workdir, 120, "report")
        line = wait_line(proc)
        assert line.startswith(f"bench: bench.db {WAIT_LINE}"), line
        release(holder)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out == expected and err == ""
    with held(recorded) as holder:
        proc = start_bench(workdir, 2.5, "report")
        out, err = proc.communicate(timeout=120)
        release(holder)
    assert proc.returncode == 1 and out == ""
    assert err.splitlines()[-1].startswith("error: bench.db: still locked by another program after 2.5 s")
    assert "Traceback" not in err


@pytest.mark.slow
def test_an_upgrade_waits_for_the_lock(workdir: Path, write_matrix):
    """An older bench's database, locked: the run that upgrades it waits, then upgrades and records."""
    old = workdir / "bench.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v14.sql").read_text())
    conn.close()
    write_matrix("name: up\ninclude:\n  - {framework: fault, dataset_size: 16, batch_size: 8, epochs: 1}\n")
    with held(old) as holder:
        proc = start_bench(workdir, 120, "run", "--matrix", "m.yaml")
        line = wait_line(proc)
        assert line.startswith(f"bench: bench.db {WAIT_LINE}"), line
        release(holder)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] > 14
    assert conn.execute("SELECT outcome FROM runs").fetchall() == [("ok",)]
    conn.close()


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "1e9"])
def test_a_wait_bound_that_is_not_seconds_is_one_line(
    value: str, workdir: Path, write_matrix, monkeypatch, cli
):
    write_matrix("include:\n  - {framework: fault}\n")
    monkeypatch.setenv(WAIT_VARIABLE, value)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {WAIT_VARIABLE}='{value}': expected the seconds to wait"), (
        result.stderr
    )
    assert not (workdir / "bench.db").exists()

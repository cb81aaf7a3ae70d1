"""Nothing lost when things fail around a run (issue 45): bench SIGKILLed between a run's record and
its row, a PostgreSQL server stopped during a run for less than the retry bound (for longer:
tests/test_postgres_errors.py), and a full disk under the run folders. The measure is always the
same: every finished run has one row, and no configuration ran twice (its worker processes counted
by their run folders)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.sweep.adopt import ADOPTED
from orchestrator.sweep.record_file import RECORD_FILE
from orchestrator.sweep.run import AFTER_RECORD_HOOK, BEFORE_RECORD
from tests import dbs
from tests.conftest import bench_command
from tests.test_hostile_signals import children
from tests.test_outcomes import pid_alive
from tests.test_resume import count_runs, start, wait_for

pytestmark = pytest.mark.slow

SLEEPS = """
name: sleepy
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [sleep]
  seconds: [%s]
  seed: [1, 2, 3]
"""


def workers_started(runs: Path) -> int:
    """Worker processes bench started: each leaves its events in a folder of its own."""
    return sum(1 for p in runs.glob("sweep-*/*/events.jsonl"))


def records(runs: Path) -> list[Path]:
    return sorted(runs.glob(f"sweep-*/*/{RECORD_FILE}"))


def bench(workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180):
    return subprocess.run(
        bench_command(*args),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_bench_killed_after_the_record_is_written_then_resume_imports_it_and_runs_it_not_again(
    write_matrix, workdir
):
    write_matrix(SLEEPS % 0.2)
    db = f"sqlite:///{workdir / 'bench.db'}"
    killed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, env={AFTER_RECORD_HOOK: "kill"})
    assert killed.returncode == -9, killed.stderr  # SIGKILLed by the test hook, after the first record
    runs = workdir / "bench-runs"
    assert len(records(runs)) == 1 and count_runs(db) == 0 and workers_started(runs) == 1

    resumed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "sweep 1: 1 finished run(s) imported from their folders' records" in resumed.stderr
    assert "2 ok; 1 already finished" in resumed.stdout
    rows = dbs.query(db, "SELECT config_hash, outcome, record_id FROM runs")
    assert len(rows) == 3 and len({r["config_hash"] for r in rows}) == 3
    assert all(r["outcome"] == "ok" and r["record_id"] for r in rows)
    assert workers_started(runs) == 3  # one worker a configuration: the first was not run again
    assert dbs.query(db, "SELECT status FROM sweeps") == [{"status": "finished"}]


def test_bench_killed_at_a_workers_end_before_its_record_then_resume_adopts_the_run_not_again(
    write_matrix, workdir
):
    """The worker finished, bench was SIGKILLed before it wrote the record: the folder holds the
    worker's result, its logs and samples, and no record.json; --resume builds the record from
    them (adopt.py), imports it, and does not run the configuration again."""
    write_matrix(SLEEPS % 0.2)
    db = f"sqlite:///{workdir / 'bench.db'}"
    env = {AFTER_RECORD_HOOK: BEFORE_RECORD}
    killed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, env=env)
    assert killed.returncode == -9, killed.stderr  # SIGKILLed at the first run's end
    runs = workdir / "bench-runs"
    (ended,) = runs.glob("sweep-*/*/result.json")
    assert records(runs) == [] and count_runs(db) == 0 and workers_started(runs) == 1
    result = json.loads(ended.read_text())

    resumed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "sweep 1: 1 finished run(s) imported from their folders' records" in resumed.stderr
    assert "2 ok; 1 already finished" in resumed.stdout
    assert records(runs)[0].parent == ended.parent
    rows = dbs.query(db, "SELECT id, config_hash, outcome, reason, exit_code, run_dir, record_id FROM runs")
    assert len(rows) == 3 and len({r["config_hash"] for r in rows}) == 3
    assert all(r["outcome"] == "ok" and r["record_id"] for r in rows)
    (adopted,) = [r for r in rows if r["run_dir"] == str(ended.parent)]
    assert adopted["reason"] == ADOPTED and adopted["exit_code"] is None
    others = [r for r in rows if r is not adopted]
    assert all(r["reason"] is None and r["exit_code"] == 0 for r in others)
    # The worker's own figures, as its result gave them.
    epochs = dbs.query(db, f"SELECT repeat, epoch, steps, seconds FROM epochs WHERE run_id = {adopted['id']}")
    assert [(e["repeat"], e["epoch"], e["steps"], e["seconds"]) for e in epochs] == [
        (e["repeat"], e["epoch"], e["steps"], e["seconds"]) for e in result["epochs"]
    ]
    assert workers_started(runs) == 3  # one worker a configuration: the adopted one was not run again
    assert dbs.query(db, "SELECT status FROM sweeps") == [{"status": "finished"}]


def test_another_sweep_that_finds_a_killed_benchs_finished_run_adopts_it(write_matrix, workdir):
    """Not a resume: the next bench run of another matrix finds the run in flight (liveruns.py) and
    stores it as its worker ended, in its own sweep, not `interrupted`."""
    write_matrix(SLEEPS % 0.2)
    write_matrix(SLEEPS.replace("sleepy", "other") % 0.1, "other.yaml")
    db = f"sqlite:///{workdir / 'bench.db'}"
    env = {AFTER_RECORD_HOOK: BEFORE_RECORD}
    killed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, env=env)
    assert killed.returncode == -9, killed.stderr

    other = bench(workdir, "run", "--matrix", "other.yaml", "--db", db)
    assert other.returncode == 0, other.stderr
    rows = dbs.query(db, "SELECT sweep_id, outcome, reason FROM runs ORDER BY id")
    assert [(r["sweep_id"], r["outcome"], r["reason"]) for r in rows] == [
        (1, "ok", ADOPTED),
        *[(2, "ok", None)] * 3,
    ]
    statuses = dbs.query(db, "SELECT status FROM sweeps ORDER BY id")
    assert statuses == [{"status": "interrupted"}, {"status": "finished"}]


def test_a_run_killed_with_its_bench_before_its_result_is_interrupted_and_run_again(write_matrix, workdir):
    """No result (bench, and with it its worker, SIGKILLed mid-run): not adopted; run once more."""
    write_matrix(SLEEPS % 2)
    db = f"sqlite:///{workdir / 'bench.db'}"
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    runs = workdir / "bench-runs"
    wait_for(lambda: workers_started(runs) >= 1)
    proc.kill()
    proc.wait(timeout=30)
    assert not list(runs.glob("sweep-*/*/result.json"))

    resumed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    outcomes = sorted(r["outcome"] for r in dbs.query(db, "SELECT outcome FROM runs"))
    assert outcomes == ["interrupted", "ok", "ok", "ok"]
    assert workers_started(runs) == 4  # the interrupted one ran again, once


ORPHANS = """
name: orphans
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0, timeout: 4}
axes:
  framework: [fault]
  fault: [orphans, ok]
"""


def test_what_a_killed_bench_left_running_at_resume_is_ended_not_adopted_and_run_once_more(
    write_matrix, workdir
):
    """The orphan: the worker's children outlive a SIGKILLed bench (the worker itself dies with it,
    PR_SET_PDEATHSIG). --resume does not count the run finished (it has no result): it ends what is
    left, records the run interrupted and runs the configuration once more (here to its timeout)."""
    write_matrix(ORPHANS)
    db = f"sqlite:///{workdir / 'bench.db'}"
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    wait_for(lambda: children(workdir) is not None)
    _worker, *stubborn = children(workdir) or []
    proc.kill()
    proc.wait(timeout=30)
    assert all(pid_alive(pid) for pid in stubborn)

    resumed = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: not any(pid_alive(pid) for pid in stubborn), timeout=10)
    rows = dbs.query(db, "SELECT fault, outcome, reason FROM runs ORDER BY id")
    assert sorted((dbs.unfolded(r)["fault"], r["outcome"]) for r in rows) == [
        ("ok", "ok"),
        ("orphans", "interrupted"),
        ("orphans", "timeout"),
    ]
    assert all(ADOPTED not in (r["reason"] or "") for r in rows)
    assert len(list(workdir.glob("bench-runs/sweep-*/*-fault-orphans-*/events.jsonl"))) == 2


@pytest.fixture
def own_pg_server():
    """A PostgreSQL server of this test's own, which it stops and starts (the session's serves others)."""
    from tests import postgres_server

    bin_dir = postgres_server.binaries()
    if bin_dir is None:
        if os.environ.get("BENCH_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL is not installed, and BENCH_REQUIRE_POSTGRES=1")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    pytest.importorskip("psycopg")
    with postgres_server.running(bin_dir) as server:
        yield server


def test_a_server_stopped_during_a_sweep_is_waited_for_and_no_run_is_lost_or_run_twice(
    write_matrix, workdir, own_pg_server, monkeypatch
):
    """Down for less than the bound: the run that ended meanwhile waits for it, the sweep ends 0."""
    monkeypatch.setenv("BENCH_DB_RETRY_SECONDS", "60")
    write_matrix(SLEEPS % 2)
    url = own_pg_server.create_database()
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", url)
    runs = workdir / "bench-runs"
    wait_for(lambda: workers_started(runs) >= 1)
    own_pg_server.stop()  # during the first run, which ends while the server is down
    wait_for(lambda: len(records(runs)) >= 1)
    time.sleep(3)
    own_pg_server.start()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert "trying again" in err and "3 ok" in out
    rows = dbs.query(url, "SELECT config_hash, record_id FROM runs")
    assert len(rows) == 3 and len({r["config_hash"] for r in rows}) == 3
    assert workers_started(runs) == 3


FLOOD = """
name: flooded
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [flood, sleep]
  seconds: [0.1]
"""


def test_a_full_disk_under_the_run_folders_stops_the_sweep_in_one_line_keeping_what_was_written(
    write_matrix, workdir
):
    folder = workdir / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()[:200]}")
    try:
        write_matrix(FLOOD)
        db = f"sqlite:///{workdir / 'bench.db'}"
        done = bench(workdir, "run", "--matrix", "m.yaml", "--db", db, "--runs-dir", str(folder))
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("error: the sweep stopped: the disk under the run folders is full"), (
            done.stderr
        )
        (run,) = dbs.query(db, "SELECT outcome, reason, run_dir FROM runs")  # the sweep stopped there
        assert "the disk under the run folders is full" in run["reason"]
        run_dir = Path(run["run_dir"])
        assert (run_dir / "stdout.log").stat().st_size > 0  # what was written is kept
        assert not list(folder.rglob("*.tmp")) and not (run_dir / RECORD_FILE).exists()
        assert dbs.query(db, "SELECT status FROM sweeps") == [{"status": "interrupted"}]
    finally:
        subprocess.run(["umount", str(folder)], check=False)

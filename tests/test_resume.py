"""Interrupting a sweep for real (SIGKILL, Ctrl-C) and finishing it with --resume."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests import dbs
from tests.conftest import bench_command, default_sigint
from tests.test_outcomes import pid_alive

pytestmark = pytest.mark.slow

SLEEPS = """
name: sleepy
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [sleep]
  seconds: [0.6]
  seed: [1, 2, 3, 4, 5, 6]
"""


def rows(db: str, sql: str) -> list[tuple]:
    return [tuple(r.values()) for r in dbs.query(db, sql)]


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def count_runs(db: str) -> int:
    """0 until the database and its runs table exist (either backend)."""
    if db.startswith("sqlite:///") and not Path(db[len("sqlite:///") :]).exists():
        return 0
    try:
        return rows(db, "SELECT count(*) FROM runs")[0][0]
    except sa.exc.DBAPIError:
        return 0


def running_worker_pid(workdir: Path, recorded: int) -> int | None:
    """The pid of the worker the orchestrator has started after `recorded` finished runs."""
    dirs = sorted((workdir / "bench-runs").glob("sweep-*/*"))
    if len(dirs) <= recorded:
        return None
    events = dirs[recorded] / "events.jsonl"
    if not events.exists() or not events.read_text():
        return None
    return json.loads(events.read_text().splitlines()[0])["pid"]


def start(workdir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        bench_command(*args),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


def test_resume_after_sigkill_runs_each_configuration_exactly_once(write_matrix, workdir, db_url):
    write_matrix(SLEEPS)
    db = db_url
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    wait_for(lambda: count_runs(db) >= 2 and running_worker_pid(workdir, count_runs(db)) is not None)
    worker = running_worker_pid(workdir, count_runs(db))
    proc.kill()
    proc.wait()
    # The worker dies with its orchestrator rather than running on as an orphan.
    wait_for(lambda: not pid_alive(worker), timeout=10)
    before = rows(db, "SELECT id, config_hash, outcome FROM runs ORDER BY id")
    assert 2 <= len(before) < 6

    done = subprocess.run(
        bench_command("run", "--matrix", "m.yaml", "--resume", "--db", db),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    after = rows(db, "SELECT id, config_hash, outcome, sweep_id FROM runs ORDER BY id")
    hashes = [r[1] for r in after if r[2] != "interrupted"]
    assert len(hashes) == 6 and len(set(hashes)) == 6
    # The run in flight at the SIGKILL (if the kill did not fall between runs) is recorded
    # interrupted by the resuming bench before it starts (orchestrator/sweep/liveruns.py).
    assert len(after) - len(hashes) <= 1
    assert [r[:3] for r in after[: len(before)]] == before  # nothing finished ran again
    assert {r[3] for r in after} == {1}
    assert rows(db, "SELECT count(*), max(status) FROM sweeps") == [(1, "finished")]


def test_ctrl_c_records_interrupted_and_resume_finishes(write_matrix, workdir, db_url):
    write_matrix(SLEEPS)
    db = db_url
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    wait_for(lambda: count_runs(db) >= 1 and running_worker_pid(workdir, count_runs(db)) is not None)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    interrupted = rows(db, "SELECT config_hash FROM runs WHERE outcome = 'interrupted'")
    assert len(interrupted) == 1
    assert rows(db, "SELECT status FROM sweeps") == [("interrupted",)]

    done = subprocess.run(
        bench_command("run", "--matrix", "m.yaml", "--resume", "--db", db),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    finished = rows(db, "SELECT config_hash FROM runs WHERE outcome = 'ok'")
    assert len(finished) == 6 and len(set(finished)) == 6
    assert interrupted[0] in finished  # the interrupted one ran again
    report = subprocess.run(
        bench_command("report", "--format", "json", "--db", db),
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [r["outcome"] for r in json.loads(report)["runs"]] == ["ok"] * 6


def test_resume_with_nothing_left_runs_nothing(write_matrix, workdir, cli):
    write_matrix("include:\n  - {framework: fault}\n")
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    result = cli("run", "--matrix", "m.yaml", "--resume")
    assert result.exit_code == 0
    assert "1 already finished" in result.output
    assert count_runs(f"sqlite:///{workdir / 'bench.db'}") == 1
    dry = cli("run", "--matrix", "m.yaml", "--resume", "--dry-run")
    assert "skipped by --resume" in dry.output and "0 to run" in dry.output

"""Issue 21, signals and leftovers: SIGHUP, a SIGKILLed bench, processes that escape their group,
and a worker that floods its streams or its event file. Real bench processes, real signals."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.launch import capture, orphans, outcomes
from orchestrator.storage.db import Database
from orchestrator.sweep import liveruns
from orchestrator.sweep.progress import Progress
from orchestrator.sweep.result_fields import where_it_died
from tests import dbs
from tests.conftest import bench_command, default_sigint
from tests.dbs import unfolded
from tests.test_outcomes import pid_alive
from tests.test_resume import wait_for

ORPHANS = """
name: orphans
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [orphans, ok]
"""
QUICK = """
name: quick
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [ok]
"""


def rows(db: str, sql: str) -> list[dict]:
    return list(dbs.query(db, sql))


def start(workdir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        bench_command(*args),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )


def children(workdir: Path) -> list[int] | None:
    """The worker's pid and the two stubborn children it started, once it has named them."""
    found = list((workdir / "bench-runs").glob("sweep-*/*-fault-orphans-*/children.txt"))
    if not found or found[0].read_text().count("\n") < 2:
        return None
    events = found[0].parent / "events.jsonl"
    worker = json.loads(events.read_text().splitlines()[0])["pid"]
    return [worker, *map(int, found[0].read_text().split())]


def in_flight(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob("*.json"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_stop_signal_records_the_run_and_leaves_no_process(write_matrix, workdir, state_dir, sig):
    write_matrix(ORPHANS)
    db = f"sqlite:///{workdir / 'bench.db'}"
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    wait_for(lambda: children(workdir) is not None)
    pids = children(workdir)
    assert pids is not None and all(pid_alive(p) for p in pids)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    run = rows(db, "SELECT outcome, reason FROM runs")
    assert [r["outcome"] for r in run] == ["interrupted"]
    assert signal.Signals(sig).name in run[0]["reason"]
    assert [r["status"] for r in rows(db, "SELECT status FROM sweeps")] == ["interrupted"]
    # The worker, the child in its group and the one that moved to a session of its own.
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10)
    assert in_flight(state_dir) == []


@pytest.mark.slow
def test_after_sigkill_the_next_run_ends_what_was_left_and_records_it(write_matrix, workdir, state_dir):
    write_matrix(ORPHANS)
    write_matrix(QUICK, "quick.yaml")
    db = f"sqlite:///{workdir / 'bench.db'}"
    proc = start(workdir, "run", "--matrix", "m.yaml", "--db", db)
    wait_for(lambda: children(workdir) is not None)
    worker, group_child, session_child = children(workdir) or []
    proc.kill()
    proc.wait()
    # The parent-death signal takes the worker; what it started lives on, as a real framework's
    # data loaders or compiler daemons would.
    wait_for(lambda: not pid_alive(worker), timeout=10)
    assert pid_alive(group_child) and pid_alive(session_child)
    assert len(in_flight(state_dir)) == 2  # the sweep's file and the run's

    done = subprocess.run(
        bench_command("run", "--matrix", "quick.yaml", "--db", db),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    wait_for(lambda: not pid_alive(group_child) and not pid_alive(session_child), timeout=10)
    runs = rows(db, "SELECT sweep_id, outcome, reason, fault, last_phase FROM runs ORDER BY id")
    runs = [unfolded(r) for r in runs]  # runs.fault is one JSON value: its kind read as the fault
    assert [(r["sweep_id"], r["outcome"], r["fault"]) for r in runs] == [
        (1, "interrupted", "orphans"),
        (2, "ok", "ok"),
    ]
    assert "found by the next bench run" in runs[0]["reason"]
    assert "ended 2 process(es)" in runs[0]["reason"]
    assert runs[0]["last_phase"] is not None  # the evidence of the run folder came along
    assert [r["status"] for r in rows(db, "SELECT status FROM sweeps ORDER BY id")] == [
        "interrupted",
        "finished",
    ]
    assert "recorded the run" in done.stderr
    assert in_flight(state_dir) == []


@pytest.mark.slow
def test_a_stderr_flood_is_bounded_and_the_crash_still_decoded(write_matrix, workdir):
    write_matrix(QUICK.replace("fault: [ok]", "fault: [flood]"))
    db = f"sqlite:///{workdir / 'bench.db'}"
    done = subprocess.run(
        bench_command("run", "--matrix", "m.yaml", "--db", db), cwd=workdir, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (run,) = rows(db, "SELECT outcome, signal_name, traceback, run_dir, stderr_tail FROM runs")
    assert (run["outcome"], run["signal_name"]) == ("crash", "SIGSEGV")
    assert "_flood" in run["traceback"] and "Fatal Python error" in run["traceback"]
    folder = Path(run["run_dir"])
    assert sorted(p.name for p in folder.glob("std*")) == ["stderr.log", "stdout.log"]  # no segments
    for name in ("stdout.log", "stderr.log"):
        data = (folder / name).read_bytes()
        marker = re.search(rb"\n\[bench: (\d+) bytes cut here\]\n", data)
        assert marker, name
        assert marker.start() == capture.HEAD_BYTES
        assert len(data) == capture.HEAD_BYTES + len(marker.group(0)) + capture.TAIL_BYTES
        written = capture.HEAD_BYTES + int(marker.group(1)) + capture.TAIL_BYTES
        assert written > 39 << 20  # the fault worker wrote 40 MiB, in whole blocks


# The capture itself, on any stream.


def expected_log(data: bytes, head: int, tail: int) -> bytes:
    if len(data) <= head + tail:
        return data
    return data[:head] + f"\n[bench: {len(data) - head - tail} bytes cut here]\n".encode() + data[-tail:]


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=40),
    head=st.integers(1, 200),
    tail=st.integers(1, 200),
    killed=st.booleans(),
)
def test_a_bounded_log_keeps_head_marker_and_tail(tmp_path_factory, chunks, head, tail, killed):
    path = tmp_path_factory.mktemp("log") / "stderr.log"
    log = capture.BoundedLog(path, head, tail)
    for chunk in chunks:
        log.write(chunk)
        # On disk, during the run: never more than the head and two tail segments (and a chunk).
        assert sum(p.stat().st_size for p in path.parent.iterdir()) <= head + 2 * tail + 2 * 300
    if killed:  # bench died: the next one completes the log from what is on disk
        log.file.close()
        if log.segment is not None:
            log.segment.close()
        capture.finalize(path, tail)
    else:
        log.close()
    assert path.read_bytes() == expected_log(b"".join(chunks), head, tail)
    assert list(path.parent.iterdir()) == [path]


# Reading what a worker wrote: bounded whatever it holds.


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_any_events_file_reads_as_a_list_of_events(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("events") / "events.jsonl"
    path.write_bytes(data)
    events = outcomes.read_events(path)
    assert all(isinstance(e, dict) and isinstance(e["event"], str) for e in events)
    where = where_it_died(events)
    assert where["last_phase"] is None or isinstance(where["last_phase"], str)
    assert all(where[k] is None or type(where[k]) is int for k in ("last_epoch", "last_step"))


EVENT = st.one_of(
    st.builds(
        lambda p, e: {"event": "phase", "phase": p, "epoch": e},
        st.sampled_from(["warmup", "epoch"]),
        st.integers(0, 3),
    ),
    st.builds(lambda e, s: {"event": "step", "epoch": e, "step": s}, st.integers(0, 3), st.integers(1, 99)),
    st.builds(lambda e: {"event": "epoch_end", "epoch": e, "seconds": 1.0}, st.integers(1, 3)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(EVENT, max_size=60))
def test_collapsing_step_events_keeps_where_the_run_died(tmp_path_factory, events):
    path = tmp_path_factory.mktemp("events") / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    read = outcomes.read_events(path)
    assert where_it_died(read) == where_it_died(events)
    assert [e for e in read if e["event"] != "step"] == [e for e in events if e["event"] != "step"]


def test_a_flood_of_events_and_a_huge_line_stay_within_memory(tmp_path):
    path = tmp_path / "events.jsonl"
    with open(path, "w") as f:
        f.write('{"event": "start", "pid": 1}\n')
        f.write('{"event": "phase", "phase": "' + "x" * (40 << 20) + '"}\n')  # 40 MB on one line
        f.write("[" * 50_000 + "\n")  # nesting deep enough to break a recursive parser
        for i in range(30_000):
            f.write(f'{{"event": "phase", "phase": "epoch", "epoch": {i}}}\n')
            for step in (1, 2):
                f.write(f'{{"event": "step", "epoch": {i}, "step": {step}}}\n')
    tracemalloc.start()
    events = outcomes.read_events(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20
    assert len(events) <= outcomes.EVENTS_HEAD + outcomes.EVENTS_TAIL
    assert events[0]["event"] == "start"
    assert events[-1] == {"event": "step", "epoch": 29_999, "step": 2}


def test_an_oversized_result_is_invalid_not_read(tmp_path):
    from orchestrator.launch.process import Finished

    with open(tmp_path / "result.json", "wb") as f:
        f.truncate(outcomes.RESULT_LIMIT + 1)  # sparse: costs no disk
    outcome = outcomes.classify(Finished(returncode=0, wall_seconds=1.0), tmp_path, 10.0)
    assert outcome.outcome == "invalid" and "larger than" in (outcome.reason or "")


def test_the_event_writer_slows_down_past_its_limit(tmp_path, monkeypatch):
    from workers import events as worker_events

    monkeypatch.setattr(worker_events, "STEP_LIMIT", 10_000)
    writer = worker_events.EventWriter(str(tmp_path / "events.jsonl"))
    for step in range(100_000):
        writer.step(1, step)
    writer.emit("epoch_end", epoch=1)
    writer.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) < 10_000 // 30 + 10
    last_steps = [json.loads(line) for line in lines if '"step"' in line]
    assert last_steps[-1]["step"] == 99_999  # the last one held back is written before what follows
    assert json.loads(lines[-1])["event"] == "epoch_end"


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ('{"event": "step"}', "x warmup step"),  # no step number: none shown, not "None"
        ("[1, 2]", "x"),  # not an event: the run's label alone
        ('"text"', "x"),
        ('{"event": "phase", "phase": {"x": 1}}', "x {'x': 1}"),
        ('{"event": "phase", "phase": "\\u001b]0;t\\u0007"}', "x \\x1b]0;t\\x07"),  # shown, not sent
    ],
)
def test_the_progress_line_survives_any_last_event(tmp_path, line, shown):
    import io

    (tmp_path / "events.jsonl").write_text(line + "\n")
    stream = io.StringIO()
    progress = Progress(1, stream=stream, live=True)
    progress.label, progress.run_dir = "x", tmp_path
    progress.tick()
    written = stream.getvalue()
    assert written.startswith("\r\x1b[2K[0/1] "), ascii(written)
    assert written.rstrip(" ").endswith(f"| {shown}"), ascii(written)
    assert not {"\n", "\x1b", "\x07"} & set(written.removeprefix("\r\x1b[2K"))  # only our own sequence


def test_progress_outlives_a_closed_terminal():
    class Gone:
        def write(self, text):
            raise OSError(5, "Input/output error")

        def flush(self):
            pass

        def isatty(self):
            return True

    progress = Progress(1, stream=Gone())  # type: ignore[arg-type]
    progress.tick()
    progress._line("still here")
    assert progress.stream is None


# Finding a run's processes.

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_marked_processes_are_found_in_any_session_and_only_they_are_killed():
    token = orphans.new_token()
    env = {**os.environ, orphans.TOKEN_VARIABLE: token}
    escaped = subprocess.Popen(
        [sys.executable, "-c", STUBBORN], env=env, start_new_session=True, stdout=subprocess.PIPE
    )
    bystander = subprocess.Popen(
        [sys.executable, "-c", STUBBORN],
        env={**os.environ, orphans.TOKEN_VARIABLE: orphans.new_token()},
        stdout=subprocess.PIPE,
    )
    try:
        for proc in (escaped, bystander):
            assert proc.stdout is not None
            proc.stdout.readline()
        assert orphans.marked(token) == [escaped.pid]
        assert orphans.kill_marked(token) == {escaped.pid}
        assert escaped.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
        escaped.kill()
        escaped.wait()


# The state files of runs in flight.


def test_a_live_benchs_files_are_left_alone_and_a_bad_file_set_aside(tmp_path, state_dir):
    db = Database(f"sqlite:///{tmp_path / 'bench.db'}", create=True)
    ledger = liveruns.Ledger(db, 7, state_dir)  # as a running bench holds them
    (state_dir / "run-0.json").write_text('{"version": 1, "kind": "run", "db": 5}\n')
    (state_dir / "sweep-0.json").write_bytes(b"\xff" * 100)
    liveruns.reap_stale(db, 1, state_dir)
    assert ledger.sweep is not None and ledger.sweep.path.exists()
    assert sorted(p.name for p in state_dir.iterdir()) == sorted(
        [ledger.sweep.path.name, "run-0.bad", "sweep-0.bad"]
    )
    with open(ledger.sweep.path, "rb") as f:  # still locked by its owner
        with pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ledger.close("unused")
    assert sorted(p.name for p in state_dir.iterdir()) == ["run-0.bad", "sweep-0.bad"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_state_file_parses_or_says_why(data):
    try:
        parsed = liveruns.parse(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return
    assert parsed["kind"] in ("run", "sweep")


def test_a_stale_sweep_of_a_dead_bench_is_closed(tmp_path, state_dir):
    from orchestrator.sweep import recording

    db = Database(f"sqlite:///{tmp_path / 'bench.db'}", create=True)
    old = recording.start_sweep(db, "old", "matrix", 1, None, None)
    current = recording.start_sweep(db, "current", "matrix", 1, None, None)
    data = {"version": 1, "kind": "sweep", "db": liveruns.db_key(db), "sweep_id": old}
    (state_dir / "sweep-1.json").write_text(json.dumps(data) + "\n")  # nobody holds its lock
    liveruns.reap_stale(db, current, state_dir)
    statuses = [r["status"] for r in db.rows(db.sweeps.select().order_by(db.sweeps.c.id))]
    assert statuses == ["interrupted", "running"]
    assert list(state_dir.iterdir()) == []


def test_the_samplers_phase_tail_is_bounded_and_typed(tmp_path):
    from profiler.sampler import EVENT_LINE_BYTES, EVENTS_READ_BYTES, PhaseTail

    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b'{"event": "phase", "phase": {"not": "text"}, "epoch": "1"}\n[1]\n'
        + b'"phase"' * (EVENTS_READ_BYTES // 7 + 10)  # one endless line
    )
    tail = PhaseTail(str(path))
    tail.poll()
    assert (tail.phase, tail.epoch) == (None, None)
    assert len(tail.partial) <= EVENT_LINE_BYTES
    with open(path, "ab") as f:
        f.write(b'\n{"event": "phase", "phase": "epoch", "epoch": 2}\n')
    for _ in range(3):
        tail.poll()
    assert (tail.phase, tail.epoch) == ("epoch", 2)


def test_outside_a_sweep_a_stop_signal_ends_the_run_and_then_the_command(tmp_path):
    """`bench models` and the environment checks run workers with no sweep around them."""
    import threading

    from orchestrator.launch.process import Interrupted, run_worker

    if signal.getsignal(signal.SIGUSR1) != signal.SIG_DFL:
        pytest.skip("SIGUSR1 is handled or ignored in this test process")
    worker = (
        "import subprocess, sys, time\n"
        "sleep = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "child = subprocess.Popen(sleep, start_new_session=True)\n"
        "open('child', 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGUSR1)).start()
    with pytest.raises(Interrupted, match="SIGUSR1"):
        run_worker([sys.executable, "-c", worker], dict(os.environ), tmp_path, timeout=30)
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    assert not pid_alive(int((tmp_path / "child").read_text()))


@pytest.mark.slow
def test_under_nohup_a_hangup_changes_nothing(write_matrix, workdir):
    write_matrix(QUICK.replace("fault: [ok]", "fault: [sleep]\n  seconds: [2.0]"))
    db = f"sqlite:///{workdir / 'bench.db'}"

    def nohup() -> None:
        default_sigint()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen(
        bench_command("run", "--matrix", "m.yaml", "--db", db),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=nohup,
    )
    wait_for(lambda: list((workdir / "bench-runs").glob("sweep-1/*/events.jsonl")))
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [r["outcome"] for r in rows(db, "SELECT outcome FROM runs")] == ["ok"]

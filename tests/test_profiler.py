"""The sidecar profiler, driven through the fault worker's `hold` (threads and memory on command)
and the real orchestrator, sampler process, cgroup-free memory budget and signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import machine_lock
from tests.conftest import bench_command
from tests.test_outcomes import pid_alive

pytestmark = pytest.mark.slow
MIB = 1 << 20

SWEEP = """
name: profiler
settings:
  framework: fault
  fault: hold
  hold_seconds: 1.5
  dataset_size: 64
  batch_size: 8
include:
  - {hold_threads: 3, hold_memory_mb: 300, dataset_size: 2000, batch_size: 1}
  - {hold_child_memory_mb: 200, dataset_size: 2000, batch_size: 1}
  - {hold_memory_mb: 400, hold_seconds: 8, memory_budget: 150MiB}
  - {hold_seconds: 1.0, sample_interval: 0}
  - {hold_seconds: 2.0, sample_interval: 0.05, seed: 1}
  - {hold_seconds: 1.5, cpus: [1], hold_child_memory_mb: 10}
  - {cpus: "999"}
  - {fault: segfault, after_steps: 2000, dataset_size: 20000, batch_size: 1, warmup_steps: 0}
  - {fault: ok, gpu_memory_budget: 1GiB}
"""


def query(db: Path, sql: str, *args) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute(sql, args)]
    conn.close()
    return rows


def events(run: dict) -> list[dict]:
    path = Path(run["run_dir"]) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sampler_records(run: dict) -> list[dict]:
    path = Path(run["run_dir"]) / "samples.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def machine() -> dict[str, machine_lock.Alone]:
    """What the sweep's fixture found of the machine when it took it alone (machine_lock.alone)."""
    return {}


@pytest.fixture(scope="module")
def sweep(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, machine: dict
) -> tuple[Path, list[dict]]:
    path = tmp_path_factory.mktemp("profiler")
    (path / "m.yaml").write_text(SWEEP)
    command = bench_command("run", "--matrix", "m.yaml")
    # Alone: the sampler's schedule is judged against its clock (test_samples_keep_to_their_schedule).
    with machine_lock.alone(request.config) as found:
        machine["sweep"] = found
        done = subprocess.run(command, cwd=path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    db = path / "bench.db"
    return db, query(db, "SELECT * FROM runs ORDER BY id")


def samples(db: Path, run: dict, phase: str | None = None) -> list[dict]:
    rows = query(db, "SELECT * FROM samples WHERE run_id = ? ORDER BY seq", run["id"])
    return [r for r in rows if phase is None or r["phase"] == phase]


def baseline_rss(db: Path, run: dict) -> int:
    """The worker's RSS without what it held: after the hold, while it trains (the first samples
    of start-up may come too late to see the worker before the hold)."""
    after = [r["rss_bytes"] for r in samples(db, run, "epoch") if r["processes"]]
    assert after, "no samples while training"
    return min(after)


def test_every_configuration_is_a_row(sweep):
    _, runs = sweep
    expected = ["ok", "ok", "oom", "ok", "ok", "ok", "unavailable", "crash", "unsupported"]
    assert [r["outcome"] for r in runs] == expected


def test_a_gpu_memory_budget_on_cpu_is_unsupported_with_its_reason(sweep):
    _, runs = sweep
    assert runs[8]["reason"] == "gpu_memory_budget caps device memory; it does not apply to device cpu"
    assert runs[8]["gpu_memory_budget"] == 1 << 30


def test_thread_count_is_exact(sweep):
    db, runs = sweep
    run = runs[0]
    held = samples(db, run, "hold")
    assert len(held) >= 5
    # the main thread and the three held ones, once all are started
    assert max(r["threads"] for r in held) == 4
    assert statistics.mode(r["threads"] for r in held) == 4
    assert run["threads_max"] == 4


def test_rss_within_ten_percent_of_what_was_allocated(sweep):
    db, runs = sweep
    run = runs[0]
    grown = max(r["rss_bytes"] for r in samples(db, run, "hold")) - baseline_rss(db, run)
    assert abs(grown - 300 * MIB) <= 0.1 * 300 * MIB, grown / MIB
    assert run["rss_peak_bytes"] >= 300 * MIB
    uss = [r["uss_bytes"] for r in samples(db, run) if r["uss_bytes"]]
    assert uss and max(uss) <= run["rss_peak_bytes"]


def test_a_child_process_is_followed_and_its_memory_counted(sweep):
    db, runs = sweep
    run = runs[1]
    held = samples(db, run, "hold")
    assert max(r["processes"] for r in held) == 2
    grown = max(r["rss_bytes"] for r in held) - baseline_rss(db, run)
    # the child's 200 MiB, plus its own interpreter (a few MiB)
    assert 200 * MIB <= grown <= 1.1 * 200 * MIB + 16 * MIB, grown / MIB
    # the child is dropped cleanly once it exits: the samples after the hold see one process
    after = [r for r in samples(db, run) if r["phase"] not in ("hold", "import", None) and not r["final"]]
    assert after and all(r["processes"] == 1 for r in after)


def test_memory_budget_kills_the_tree_and_records_oom_with_evidence(sweep):
    db, runs = sweep
    run = runs[2]
    assert run["outcome"] == "oom"
    assert run["signal_name"] == "SIGKILL"
    assert "memory budget 150 MiB exceeded" in run["reason"]
    assert "in phase hold" in run["reason"]
    assert run["memory_budget"] == 150 * MIB  # and killed in its hold, before the 8 s of it ended
    budget = [r for r in sampler_records(run) if r["kind"] == "budget"]
    assert len(budget) == 1 and budget[0]["rss"] > 150 * MIB
    worker = next(e["pid"] for e in events(run) if e["event"] == "start")
    assert not pid_alive(worker)


def test_sampler_off(sweep):
    db, runs = sweep
    run = runs[3]
    assert run["sampler_status"] == "off" and run["samples_count"] == 0
    assert samples(db, run) == []
    assert not (Path(run["run_dir"]) / "samples.jsonl").exists()


def test_samples_keep_to_their_schedule(sweep, machine):
    machine["sweep"].require_quiet()  # a sampler held off its CPU by other load is late, rightly
    db, runs = sweep
    run = runs[4]
    rows = [r for r in samples(db, run) if not r["final"]]
    assert len(rows) >= 20

    # Drift-corrected: samples sit on start + k * interval, and a late one does not shift the rest,
    # so their distances from that grid stay small. (A loop that sleeps an interval after each sample
    # slides along the grid by its own cost every time, and its offsets spread over the interval.)
    # The grid's origin is not recorded, and the first sample may itself be late (it is taken as the
    # worker starts, beside its start-up): the origin is the sample whose grid fits the rest best.
    def offsets(origin: float) -> list[float]:
        return [abs(((r["t"] - origin) / 0.05 + 0.5) % 1.0 - 0.5) for r in rows]

    best = min((offsets(r["t"]) for r in rows), key=statistics.median)
    assert statistics.median(best) < 0.15, best
    assert rows[-1]["t"] - rows[0]["t"] > 1.5


def test_cpus_pin_the_worker_and_its_children(sweep):
    db, runs = sweep
    run = runs[5]
    assert run["cpus"] == "1" and run["cpu_allowed"] == 1
    start = next(e for e in events(run) if e["event"] == "start")
    assert start["cpus"] == [1]
    held = next(e for e in events(run) if e["event"] == "held")
    # the child is gone now; its affinity was checked through the sampler's process count
    assert held["child_pid"] and max(r["processes"] for r in samples(db, run, "hold")) == 2


def test_unavailable_cpus_are_an_outcome_not_a_crash(sweep):
    _, runs = sweep
    run = runs[6]
    assert run["outcome"] == "unavailable"
    assert "CPU 999 is not available" in run["reason"]


def test_samples_before_a_segfault_are_all_in_the_database(sweep):
    db, runs = sweep
    run = runs[7]
    assert run["outcome"] == "crash" and run["signal_name"] == "SIGSEGV"
    on_disk = [r for r in sampler_records(run) if r["kind"] == "sample"]
    stored = samples(db, run)
    assert len(on_disk) >= 3
    assert [r["t"] for r in stored] == [r["t"] for r in on_disk]
    assert any(r["phase"] == "epoch" for r in stored[:-1])
    assert stored[-1]["final"] == 1


def test_gpu_columns_are_empty_without_an_nvidia_driver(sweep):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver")
    db, runs = sweep
    run = runs[0]
    assert run["sampler_status"] == "ok"
    assert run["gpu_memory_peak_bytes"] is None
    stored = samples(db, run)
    assert len(stored) >= 3 and all(r["gpu_memory_bytes"] is None for r in stored)
    start = next(r for r in sampler_records(run) if r["kind"] == "start")
    assert start["gpu"].startswith("no NVML")


def test_swap_is_recorded_only_where_the_machine_has_swap(sweep):
    """The tree's VmSwap per sample and its peak per run; None (not 0) on a machine without swap."""
    from profiler import swap

    db, runs = sweep
    run = runs[0]
    start = next(r for r in sampler_records(run) if r["kind"] == "start")
    values = [r["swap_bytes"] for r in samples(db, run)]
    if swap.machine_has_swap():
        assert start["swap"] == swap.SOURCE
        assert values and all(v is not None and v >= 0 for v in values)
        assert run["swap_peak_bytes"] == max(values)
    else:
        assert start["swap"] == "none: the machine has no swap"
        assert values and all(v is None for v in values) and run["swap_peak_bytes"] is None
    # The reader itself: VmSwap of live processes (0 without swap), None for one that is gone.
    assert isinstance(swap.process_swap(os.getpid()), int)
    assert swap.tree_swap([os.getpid(), os.getppid()]) == swap.process_swap(os.getpid()) + swap.process_swap(
        os.getppid()
    )
    assert swap.process_swap(2**22 + 7) is None


def test_phases_are_summarised(sweep):
    db, runs = sweep
    run = runs[0]
    phases = query(db, "SELECT * FROM phases WHERE run_id = ? ORDER BY seq", run["id"])
    names = [p["phase"] for p in phases]
    assert "hold" in names and names.index("hold") < names.index("epoch")
    hold = phases[names.index("hold")]
    assert hold["threads_max"] == 4 and hold["rss_peak_bytes"] >= 300 * MIB


def test_nothing_is_left_running(sweep):
    _, runs = sweep
    for run in runs:
        if not (Path(run["run_dir"]) / "events.jsonl").exists():
            continue
        pids = [e.get("pid") for e in events(run) if e["event"] == "start"]
        pids += [e.get("child_pid") for e in events(run) if e["event"] == "held"]
        if (Path(run["run_dir"]) / "samples.jsonl").exists():
            pids += [r.get("sampler_pid") for r in sampler_records(run) if r["kind"] == "start"]
        for pid in filter(None, pids):
            assert not pid_alive(pid), (run["id"], pid)


def test_the_sampler_dying_loses_nothing_of_the_run(write_matrix, workdir):
    write_matrix(
        """
        name: sampler-dies
        settings: {framework: fault, fault: hold, hold_seconds: 3, dataset_size: 64, batch_size: 8}
        """
    )
    proc = subprocess.Popen(bench_command("run", "--matrix", "m.yaml"), cwd=workdir)
    sampler_pid = None
    deadline = time.monotonic() + 20
    while sampler_pid is None and time.monotonic() < deadline:
        for path in workdir.glob("bench-runs/sweep-1/*/samples.jsonl"):
            records = [json.loads(line) for line in path.read_text().splitlines()[:2] if line.strip()]
            if len(records) == 2:  # its start record and a first sample
                sampler_pid = records[0]["sampler_pid"]
        time.sleep(0.05)
    assert sampler_pid, "the sampler never started"
    os.kill(sampler_pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == 0
    run = query(workdir / "bench.db", "SELECT * FROM runs")[0]
    assert run["outcome"] == "ok"
    assert run["sampler_status"].startswith("died after")
    assert run["samples_count"] >= 1


@pytest.mark.quiet  # a spinning process and a sampler: other load moves both
def test_a_samples_cpu_percent_is_over_the_span_its_time_stamps_give(tmp_path, monkeypatch):
    """The CPU % is over the time between two samples' stamps, which the timeline weights it by.
    A sampler held off its CPU in a sample (every other one here, 40 ms) used to divide the next
    sample's CPU seconds by a few milliseconds, while the stamps said 40 ms: 20,998 % on 2 CPUs,
    and a CPU % maximum of 936 % over a whole second. One process spinning on one CPU must read
    at most about 100 % over any second, and its CPU seconds must add up."""
    import psutil

    from profiler import sampler as sampler_module
    from profiler.timeline import _cpu_max, _cpu_spans

    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    real, threads = psutil.Process.cpu_times, psutil.Process.num_threads
    calls = {"n": 0}

    def held_off(self):  # read after the CPU times, before the rest of the sample
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            time.sleep(0.04)
        return threads(self)

    try:
        args = sampler_module.parse_args(["--pid", str(spin.pid), "--out", str(tmp_path / "s.jsonl")])
        args.pid = spin.pid
        with open(tmp_path / "s.jsonl", "w") as out:
            s = sampler_module.Sampler(args, out, gpu=sampler_module.Gpu())
            s.sample()
            monkeypatch.setattr(psutil.Process, "num_threads", held_off)
            first = real(psutil.Process(spin.pid))
            samples = []
            for _ in range(40):
                time.sleep(0.02)
                samples.append(s.sample())
            last = real(psutil.Process(spin.pid))
    finally:
        spin.kill()
        spin.wait()
    spans = _cpu_spans(samples)
    cpu_max = _cpu_max(samples, spans)
    assert cpu_max is not None and cpu_max < 130, [x["cpu"] for x in samples]
    counted = sum(x["cpu"] * spans[id(x)] for x in samples[1:]) / 100
    used = (last.user + last.system) - (first.user + first.system)
    assert counted == pytest.approx(used, abs=0.1)


@pytest.mark.quiet  # whether a rescan sees a child alive depends on who gets the CPU
def test_children_that_live_and_are_reaped_between_two_rescans_count_as_the_runs(tmp_path):
    """A compiler the run starts and waits for within a second (inductor's C++ kernels) is never
    seen by the tree's rescans; its time is in its parent's reaped-children time, and counts as the
    run's, not as other load. Children that are seen alive are not counted twice when reaped."""
    from profiler.sampler import Tree

    code = (
        "import subprocess, sys, time\n"
        "for i in range(12):\n"
        "    subprocess.run([sys.executable, '-c', "
        "'import time\\nend = time.process_time() + 0.2\\nwhile time.process_time() < end: pass'])\n"
        "time.sleep(0.3)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    tree = Tree(parent.pid, time.time())
    counted = 0.0
    last = None
    while parent.poll() is None:
        tree.rescan()
        counted += tree.measure()["cpu_s"]
        times = psutil_times(parent.pid)
        last = times if times is not None else last
        time.sleep(0.1)
    assert last is not None
    used = last.user + last.system + last.children_user + last.children_system
    assert used > 12 * 0.2
    assert counted == pytest.approx(used, rel=0.1), (counted, used)


def psutil_times(pid: int):
    import psutil

    try:
        return psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None

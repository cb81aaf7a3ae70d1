"""What the disturbance figures read on this machine: quiet, and beside busy loops (issue 22).

For each condition, real `bench run` sweeps of one configuration (the fault worker, and PyTorch's
small_cnn: an OpenMP framework, those hit hardest by sharing) record the run's other load
(runs.other_cpu_percent_mean, % of the allowed CPUs over the timed epochs), steal, the flag and the
median epoch seconds. Conditions: nothing started beside the run ("quiet": whatever else the machine
runs is reported with it), then 1 and 2 busy loops, each in a session of its own as another user's
job would be. Before each condition the machine's other load is read as `--wait-idle` reads it
(orchestrator/executors/idle.py, 1 s windows), and the load average and the busiest processes not started
here are printed, so the figures say what else ran.

    .venv/bin/python -m benchmarks.harness.disturbance
    .venv/bin/python -m benchmarks.harness.disturbance --repeats 5 --loops 0,1,2 --frameworks fault
    .venv/bin/python -m benchmarks.harness.disturbance --cost    # what the reading adds to a sample

A benchmark, not a test: it exits 0 once it has measured.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from orchestrator.executors import idle
from profiler import disturbance

REPO = Path(__file__).resolve().parents[2]

MATRICES = {
    "fault": "framework: fault\n  dataset_size: 6000\n  batch_size: 8\n  epochs: 5\n  warmup_steps: 100",
    "pytorch": (
        "framework: pytorch\n  model: small_cnn\n  image_size: 32\n  dataset_size: 512\n  batch_size: 32\n"
        "  classes: 10\n  epochs: 5\n  warmup_steps: 2\n  timeout: 300"
    ),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="sweeps per framework and condition")
    parser.add_argument("--loops", default="0,1", help="busy loops beside the run, per condition")
    parser.add_argument("--frameworks", default="fault,pytorch", help=f"of {', '.join(MATRICES)}")
    parser.add_argument("--idle-windows", type=int, default=5, help="--wait-idle readings per condition")
    parser.add_argument("--cost", action="store_true", help="only: the sampler's added CPU per sample")
    return parser.parse_args(argv)


def cost(calls: int = 2000) -> None:
    """CPU time of the other-load reading a sample adds (/proc/stat and the parent's times)."""
    other = disturbance.OtherLoad(None)
    start = time.process_time()
    for _ in range(calls):
        other.measure(0.0)
    per_call = (time.process_time() - start) / calls
    print(
        f"OtherLoad.measure: {per_call * 1e6:.0f} µs of CPU a sample ({calls} calls); at 0.1 s: "
        f"{per_call * 10 * 1000:.2f} ms/s"
    )


def busy_loops(count: int) -> list[subprocess.Popen]:
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(count)
    ]


def what_else_runs(own: set[int]) -> str:
    """The load average and the busiest processes that are not this benchmark's, over 1 s."""
    procs = [p for p in psutil.process_iter(["pid", "name"]) if p.pid not in own]
    for p in procs:
        try:
            p.cpu_percent(None)
        except psutil.Error:
            pass
    time.sleep(1.0)
    busy = []
    for p in procs:
        try:
            busy.append((p.cpu_percent(None), p.info["name"], p.pid))
        except psutil.Error:
            continue
    top = ", ".join(
        f"{name}[{pid}] {cpu:.0f}%" for cpu, name, pid in sorted(busy, reverse=True)[:4] if cpu >= 1
    )
    return f"loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}; others: {top or 'none above 1%'}"


def sweep(folder: Path, framework: str, name: str) -> dict:
    matrix = folder / f"{name}.yaml"
    matrix.write_text(f"name: {name}\nsettings:\n  " + MATRICES[framework] + "\n")
    db = folder / "bench.db"
    command = [str(REPO / ".venv/bin/bench"), "run", "--matrix", str(matrix), "--db", str(db)]
    subprocess.run(command, check=True, capture_output=True)
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    row = dict(conn.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone())
    conn.close()
    return row


def condition(folder: Path, frameworks: list[str], loops: int, args: argparse.Namespace) -> None:
    started = busy_loops(loops)
    try:
        time.sleep(0.5)  # the loops at full speed before anything is read
        own = {os.getpid(), *(p.pid for p in started)}
        print(f"\n{loops} busy loop(s): {what_else_runs(own)}")
        cpus = os.sched_getaffinity(0)
        seen = [idle.other_load(cpus) for _ in range(args.idle_windows)]
        readings = ", ".join(f"{v:.1f}%" for v in seen if v is not None)
        print(f"  --wait-idle's reading, {args.idle_windows} windows of 1 s: {readings}")
        for framework in frameworks:
            rows = [sweep(folder, framework, f"{framework}-{loops}-{i}") for i in range(args.repeats)]
            for r in rows:
                print(
                    f"  {framework:8} other {r['other_cpu_percent_mean']:6.2f}%  steal "
                    f"{r['steal_percent_mean']:5.2f}%  disturbed {r['disturbed']}  epoch s "
                    f"{r['median_epoch_seconds']:.4f}  run CPU {r['cpu_percent_allowed']:.0f}% of allowed"
                )
            others = [r["other_cpu_percent_mean"] for r in rows]
            print(
                f"  {framework:8} median other load {statistics.median(others):.2f}% (max {max(others):.2f}%)"
            )
    finally:
        for p in started:
            p.kill()
            p.wait()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cost:
        cost()
        return 0
    frameworks = [f for f in args.frameworks.split(",") if f]
    print(
        f"{os.cpu_count()} CPUs; thresholds: other load {disturbance.OTHER_LIMIT:g}%, "
        f"steal {disturbance.STEAL_LIMIT:g}% (profiler/disturbance.py)"
    )
    with tempfile.TemporaryDirectory(prefix="bench-disturbance-") as tmp:
        for loops in (int(n) for n in args.loops.split(",")):
            condition(Path(tmp), frameworks, loops, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The Ray executor's cost: scheduling overhead per run, and the driver with a long queue.

1. Overhead. 40 fault-worker runs (`fault: hold`, `hold_seconds: 1`) with the local executor, then
   with the Ray executor on a one-node and a two-node Ray cluster started here
   (ray.cluster_utils.Cluster, one bench_slot per node). For each: the makespan (run_configs from
   first submission to the last record written), the per-run overhead beyond the local executor
   (nodes x makespan - local makespan) / runs, and the nodes' idle share
   1 - (sum of the runs' worker wall seconds) / (nodes x makespan).
2. Queue. 10,000 configurations (`fault: ok`) queued on the two-node cluster: the time from
   run_configs' start to the first task's start, and the driver's RSS as runs finish, for
   --queue-seconds; then the sweep is interrupted (as Ctrl-C would).

A benchmark, not a test: it asserts nothing and exits 0 once it has measured.

    .venv/bin/python -m benchmarks.harness.ray_overhead
    .venv/bin/python -m benchmarks.harness.ray_overhead --runs 40 --hold 1 --queue 10000 --queue-seconds 90
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import tempfile
import time
from pathlib import Path

import psutil
from ray.cluster_utils import Cluster

from orchestrator.config.run_config import RunConfig
from orchestrator.executors.base import Executor
from orchestrator.executors.local import LocalExecutor
from orchestrator.executors.ray_cluster import RayExecutor
from orchestrator.storage.db import Database
from orchestrator.sweep import recording
from orchestrator.sweep.progress import Progress
from orchestrator.sweep.run import run_configs

SLOT = {"bench_slot": 1}


def configs(n: int, **fields: object) -> list[RunConfig]:
    base = dict(framework="fault", dataset_size=32, batch_size=8, epochs=1, warmup_steps=0)
    return [RunConfig(**{**base, **fields, "seed": i}) for i in range(n)]  # type: ignore[arg-type]


def sweep(folder: Path, name: str, todo: list[RunConfig], executor: Executor, progress: Progress) -> tuple:
    db = Database(str(folder / f"{name}.db"), create=True)
    sweep_id = recording.start_sweep(db, name, "matrix", len(todo), None, None)
    start = time.monotonic()
    run_configs(db, sweep_id, todo, folder / name, None, progress, executor=executor)
    makespan = time.monotonic() - start
    busy = sum(r["wall_seconds"] for r in db.rows(db.runs.select()))
    outcomes = sorted({r["outcome"] for r in db.rows(db.runs.select())})
    db.close()
    return makespan, busy, outcomes


def overhead(args: argparse.Namespace, folder: Path) -> None:
    todo = configs(args.runs, fault="hold", hold_seconds=args.hold)
    quiet = io.StringIO()
    local, busy, outcomes = sweep(folder, "local", todo, LocalExecutor(None), Progress(len(todo), quiet))
    idle = 1 - busy / local
    print(f"local: makespan {local:.2f} s, {local / args.runs:.3f} s/run, idle {idle:.1%}, {outcomes}")
    for nodes in (1, 2):
        cluster = Cluster(
            initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "resources": SLOT}
        )
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=1, resources=SLOT)
        cluster.wait_for_nodes()
        try:
            t0 = time.monotonic()
            executor = RayExecutor(cluster.address, False, None)
            connect = time.monotonic() - t0
            try:
                span, busy, outcomes = sweep(
                    folder, f"ray{nodes}", todo, executor, Progress(len(todo), quiet)
                )
            finally:
                executor.close()
        finally:
            cluster.shutdown()
        extra = (nodes * span - local) / args.runs
        idle = 1 - busy / (nodes * span)
        print(
            f"ray, {nodes} node(s): connect {connect:.2f} s, makespan {span:.2f} s, "
            f"overhead beyond local {extra:+.3f} s/run, idle {idle:.1%}, {outcomes}"
        )


class Watch(Progress):
    """Progress that notes the first start and the driver's RSS as runs end, and stops the sweep
    (KeyboardInterrupt, as Ctrl-C) after the time allowed."""

    def __init__(self, total: int, seconds: float) -> None:
        super().__init__(total, io.StringIO())
        self.first_start: float | None = None
        self.rss: list[tuple[float, int, int]] = []
        self.until = time.monotonic() + seconds
        self.me = psutil.Process()

    def begin(
        self, config: RunConfig, run_dir: Path, node: str | None = None, since: float | None = None
    ) -> None:
        if self.first_start is None:  # when the task said it started, on the node's clock (this machine's)
            self.first_start = time.monotonic() - (time.time() - since if since else 0.0)
        super().begin(config, run_dir, node, since)

    def end(self, outcome: str, run_id: int, detail: str = "", run_dir: Path | None = None) -> None:
        super().end(outcome, run_id, detail, run_dir)
        self.rss.append((time.monotonic(), self.done, self.me.memory_info().rss))
        if time.monotonic() > self.until:
            raise KeyboardInterrupt


def queue(args: argparse.Namespace, folder: Path) -> None:
    me = psutil.Process()
    before = me.memory_info().rss
    t0 = time.monotonic()
    todo = configs(args.queue)
    built = time.monotonic() - t0
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "resources": SLOT})
    cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    try:
        executor = RayExecutor(cluster.address, False, None)
        watch = Watch(len(todo), args.queue_seconds)
        start = time.monotonic()
        try:
            sweep(folder, "queue", todo, executor, watch)
        finally:
            executor.close()
    finally:
        cluster.shutdown()
    first = (watch.first_start or start) - start
    print(
        f"queue of {args.queue}: configurations built in {built:.2f} s (RSS {before / 2**20:.0f} -> "
        f"{watch.rss[0][2] / 2**20 if watch.rss else 0:.0f} MiB at the first record); first task started "
        f"{first:.2f} s after run_configs began"
    )
    marks = [watch.rss[int(len(watch.rss) * f)] for f in (0, 0.25, 0.5, 0.75)] + watch.rss[-1:]
    for t, done, rss in marks:
        print(f"  {t - start:6.1f} s: {done:5d} runs recorded, driver RSS {rss / 2**20:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--hold", type=float, default=1.0)
    parser.add_argument("--queue", type=int, default=10_000)
    parser.add_argument("--queue-seconds", type=float, default=90.0)
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        if not args.skip_overhead:
            overhead(args, Path(tmp))
        queue(args, Path(tmp))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

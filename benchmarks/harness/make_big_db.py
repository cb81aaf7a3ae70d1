"""Write a results database the size of a long study, for timing `bench report` on it.

100,000 runs (by default) of 100,000 distinct configurations in one sweep (the worst case for
the default table, which shows the latest sweep), every configuration field filled as a real sweep
fills it, a tenth of the runs failed with a stderr tail and a traceback, three epochs per run
and 20 samples per run (two million sample rows), all through the real schema.sql. The numbers
are made up (this is a database for timing reports, not results); their shapes are the real
ones.

    .venv/bin/python -m benchmarks.harness.make_big_db /tmp/big.db [--runs 100000 --samples 20 --sweeps 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from orchestrator.config.run_config import IMAGE_MODELS as MODELS
from orchestrator.config.run_config import RunConfig
from orchestrator.storage.db import Database

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
OPTIMIZERS = (("sgd", 0.01), ("sgd", 0.001), ("adam", 0.001), ("rmsprop", 0.0001))
FAILURES = (("crash", "killed by SIGSEGV", -11), ("oom", "memory budget 2 GiB exceeded", -9))
PHASES = ("import", "build", "data", "warmup", "epoch", "epoch", "epoch", "eval")


def configs() -> Iterator[RunConfig]:
    """Distinct configurations: the grid of the studies, then again with the next seed."""
    grid = list(itertools.product(FRAMEWORKS, MODELS, ("cpu", "cuda"), BATCHES, OPTIMIZERS, (0, 1, 2)))
    for seed in itertools.count():
        for f, m, d, b, (o, lr), t in grid:
            yield RunConfig(
                framework=f, model=m, device=d, batch_size=b, optimizer=o, lr=lr, threads=t, epochs=3,
                seed=seed,
            )  # fmt: skip


def sweep_rows(conn: sqlite3.Connection, count: int) -> list[int]:
    ids = []
    for i in range(count):
        cur = conn.execute(
            "INSERT INTO sweeps (name, kind, started_at, ended_at, status, total_configs, host, machine,"
            " bench_version, command) VALUES (?, 'matrix', ?, ?, 'finished', 0, 'big', ?, '0.1.0', ?)",
            (f"study-{i}", "2026-11-22T00:00:00+00:00", "2026-11-22T06:00:00+00:00",
             "AMD EPYC / 2 cpus / 23.5 GiB / no gpu", f"bench run --matrix study-{i}.yaml"),
        )  # fmt: skip
        ids.append(int(cur.lastrowid or 0))
    return ids


def run_row(run_id: int, sweep_id: int, config: RunConfig, rng: random.Random) -> dict:
    row = {("exit_code_setting" if k == "exit_code" else k): v for k, v in config.to_dict().items()}
    seconds = config.dataset_size / config.batch_size * 0.002 * (1 + rng.random())
    failed = rng.random() < 0.1
    outcome, reason, code = rng.choice(FAILURES) if failed else ("ok", None, 0)
    row.update(
        id=run_id, sweep_id=sweep_id, config_hash=config.config_hash,
        config_json=json.dumps(config.to_dict(), sort_keys=True), outcome=outcome, reason=reason,
        exit_code=code, signal_name="SIGSEGV" if code == -11 else ("SIGKILL" if code else None),
        traceback="Fatal Python error: Segmentation fault\n" * 20 if failed else None,
        stderr_tail=("x" * 100 + "\n") * 40 if failed else "", last_phase="epoch", last_epoch=2,
        started_at="2026-11-22T01:00:00+00:00", ended_at="2026-11-22T01:01:00+00:00",
        wall_seconds=seconds * 3 + 5, parameter_count=25557032, steps_per_epoch=7,
        median_epoch_seconds=None if failed else seconds,
        min_epoch_seconds=None if failed else seconds * 0.98,
        max_epoch_seconds=None if failed else seconds * 1.03,
        images_per_second=None if failed else config.dataset_size / seconds,
        seconds_per_image=None if failed else seconds / config.dataset_size,
        final_train_loss=None if failed else 1.2, final_val_accuracy=None if failed else rng.random(),
        run_dir=f"bench-runs/sweep-{sweep_id}/{run_id:06d}",
        worker_command="python -m workers --spec spec.json",
        reproduce=f"bench rerun {run_id}", samples_count=0, sampler_status="ok", cpu_allowed=2,
        cpu_percent_mean=150.0 + rng.random() * 40, cpu_percent_max=199.0, cpu_percent_allowed=85.0,
        threads_max=12, threads_steady=9, rss_peak_bytes=rng.randrange(1 << 28, 1 << 32),
        rss_mean_bytes=float(1 << 28),
    )  # fmt: skip
    return row


def insert(conn: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    if rows:
        keys = list(rows[0])
        sql = f"INSERT INTO {table} ({', '.join(keys)}) VALUES ({', '.join('?' for _ in keys)})"
        conn.executemany(sql, [tuple(r[k] for k in keys) for r in rows])


def write_runs(conn: sqlite3.Connection, count: int, samples: int, sweeps: list[int]) -> None:
    rng, source = random.Random(0), configs()
    runs, epochs, sample_rows = [], [], []
    for run_id in range(1, count + 1):
        row = run_row(run_id, sweeps[(run_id - 1) * len(sweeps) // count], next(source), rng)
        row["samples_count"] = samples
        runs.append(row)
        for epoch in (1, 2, 3):
            s = (row["median_epoch_seconds"] or 1.0) * (0.98 + 0.04 * rng.random())
            epochs.append({"run_id": run_id, "repeat": 0, "epoch": epoch, "seconds": s, "steps": 7,
                           "images": 7 * row["batch_size"], "val_accuracy": rng.random()})  # fmt: skip
        for seq in range(samples):
            sample_rows.append({"run_id": run_id, "seq": seq, "t": seq * 0.1, "phase": PHASES[seq % 8],
                                "cpu_percent": 180.0, "threads": 9, "processes": 1,
                                "rss_bytes": 1 << 28, "final": int(seq == samples - 1)})  # fmt: skip
        if run_id % 5000 == 0 or run_id == count:
            insert(conn, "runs", runs)
            insert(conn, "epochs", epochs)
            insert(conn, "samples", sample_rows)
            runs, epochs, sample_rows = [], [], []
            print(f"  {run_id} runs written", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=20, help="samples per run")
    parser.add_argument("--sweeps", type=int, default=1, help="the runs are shared out over this many sweeps")
    args = parser.parse_args(argv)
    if args.path.exists():
        raise SystemExit(f"{args.path} exists; give a new file")
    start = time.monotonic()
    Database(str(args.path), create=True).close()  # the real schema, from schema.sql
    conn = sqlite3.connect(args.path)
    conn.execute("PRAGMA synchronous = OFF")
    with conn:
        write_runs(conn, args.runs, args.samples, sweep_rows(conn, args.sweeps))
    conn.close()
    size = args.path.stat().st_size / (1 << 20)
    print(f"{args.path}: {args.runs} runs, {size:.0f} MiB, in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

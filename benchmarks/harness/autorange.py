"""How much timing a run needs: the run-to-run spread of a run's median against min_time/min_steps.

For each configuration (framework, model) and each (min_time, min_steps) setting, the same run is
made --rounds times, each in a fresh worker process (orchestrator.launch.execute.execute, as `bench run`
does), the settings interleaved round by round so that slow drift and the other engineers' jobs
fall on every setting alike. Each run's figure is its median seconds per image over its timed
epochs (orchestrator.config.samples.run_summary, what the reports show). Per setting it prints the
runs' medians, their spread ((max - min) / median across rounds: the re-run difference a reader
would see), the timed epochs and steps a run had, its wall time, and the CPU (in cores) that other
processes used meanwhile (/proc/stat): on a shared machine that explains most of the spread.

The configuration is the one that showed no spread in issue 22: one timed epoch of two steps
(dataset_size 48, batch 16), warm-up 2. A benchmark, not a test: it asserts nothing and exits 0
once it has measured.

    .venv/bin/python -m benchmarks.harness.autorange                               # pytorch, tensorflow
    .venv/bin/python -m benchmarks.harness.autorange --frameworks pytorch --models small_cnn resnet50 \\
        --settings 0:1 1:10 2:20 --rounds 5 --json autorange.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import RunConfig
from orchestrator.launch.execute import execute
from orchestrator.sweep.folders import run_folder

LOADED_CORES = 0.2  # other load above which the figures are said to describe a loaded machine


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frameworks", nargs="+", default=["pytorch", "tensorflow"])
    parser.add_argument("--models", nargs="+", default=["small_cnn"])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["0:1", "1:10", "2:20", "4:40"],
        help="min_time:min_steps pairs (0:1 is a run of its configured epochs only)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="runs of each setting")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dataset-size", type=int, default=48, help="48 at batch 16: two steps an epoch")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--env-root", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write every measurement here")
    return parser.parse_args(argv)


def busy_cores_seconds() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat), minus ours and our children's."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    busy = (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy - (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime)


def measure(config: RunConfig, runs: Path, index: int, env_root: str | None) -> dict[str, Any]:
    start, others = time.monotonic(), busy_cores_seconds()
    rec = execute(config, run_folder(runs, index, config), env_root)
    wall = time.monotonic() - start
    load = (busy_cores_seconds() - others) / wall if wall > 0 else 0.0
    if rec.outcome.outcome != "ok" or not rec.epochs:
        raise SystemExit(f"{config.label()}: run failed ({rec.outcome.outcome}): {rec.stderr_tail[-1500:]}")
    summary = samples.run_summary(rec.epochs)
    return {
        "ms_per_image": 1000 * summary["seconds_per_image"],
        "timed_epochs": summary["timed_epochs"],
        "timed_steps": summary["timed_steps"],
        "timed_seconds": summary["timed_seconds"],
        "wall_seconds": wall,
        "other_load": max(load, 0.0),
    }


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def summary_line(name: str, setting: str, rows: list[dict[str, Any]]) -> str:
    ms = [r["ms_per_image"] for r in rows]
    return (
        f"{name:24} {setting:>7}  median ms/image {statistics.median(ms):8.3f}"
        f"  re-run spread {100 * spread(ms):5.1f}%"
        f"  timed epochs {statistics.median(r['timed_epochs'] for r in rows):5.0f}"
        f"  steps {statistics.median(r['timed_steps'] for r in rows):5.0f}"
        f"  wall {statistics.median(r['wall_seconds'] for r in rows):5.1f} s"
        f"  other load {statistics.median(r['other_load'] for r in rows):4.2f} cores"
        f"  runs: {' '.join(f'{v:.3f}' for v in ms)}"
    )


def one_configuration(
    args: argparse.Namespace, base: RunConfig, runs: Path, first: int
) -> dict[str, list[dict[str, Any]]]:
    """Every setting's runs of one configuration, the settings interleaved round by round."""
    pairs = [(s, *s.split(":")) for s in args.settings]
    per: dict[str, list[dict[str, Any]]] = {s: [] for s, _, _ in pairs}
    index = first
    for _ in range(args.rounds):
        for setting, seconds, steps in pairs:
            config = replace(base, min_time=float(seconds), min_steps=int(steps))
            index += 1
            per[setting].append(measure(config, runs, index, args.env_root))
    name = f"{base.framework}/{base.model}"
    for setting in per:
        print(summary_line(name, setting, per[setting]), flush=True)
    loaded = max(r["other_load"] for rows in per.values() for r in rows)
    if loaded > LOADED_CORES:
        print(
            f"WARNING: {name}: other processes used up to {loaded:.2f} cores during these runs: "
            "the spread measures that load as much as the sample count",
            flush=True,
        )
    return per


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-autorange-") as tmp:
        for framework in args.frameworks:
            for model in args.models:
                base = RunConfig(
                    framework=framework,
                    model=model,
                    image_size=args.image_size,
                    batch_size=args.batch_size,
                    dataset_size=args.dataset_size,
                    threads=args.threads,
                    classes=3,
                    timeout=600.0,
                )
                first = len(results) * args.rounds * len(args.settings)
                results[f"{framework}/{model}"] = one_configuration(args, base, Path(tmp), first)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

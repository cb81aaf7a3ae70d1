"""What does `trace: kernels` cost? The same configuration traced and untraced, in fresh processes.

Each round runs the configuration twice through orchestrator.launch.execute (exactly as `bench run` runs
it: its own process, its framework's environment), once with `trace: kernels` and once without,
the order alternating ABBA across rounds so that slow drift of the machine cancels. Per run, the
median of its timed epochs; per condition, the median over its runs; ratio = traced / untraced.
The sidecar sampler is off (sample_interval 0): it is not what is measured here. "other load" is
the CPU (in cores) that processes other than this benchmark and its children used meanwhile: on
a shared machine it explains most disagreements between rounds.

    .venv/bin/python -m benchmarks.harness.tracing_overhead
    .venv/bin/python -m benchmarks.harness.tracing_overhead --frameworks pytorch,mxnet --rounds 4
    .venv/bin/python -m benchmarks.harness.tracing_overhead --frameworks pytorch --rounds 6 --malloc-tuned

A benchmark, not a test: it always exits 0 once it has measured.
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

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.execute import execute
from orchestrator.sweep.folders import run_folder

ABBA = (True, False, False, True)
# glibc returns big freed blocks to the kernel, so steps fault their activations back in, and how
# many depends on the process's allocation history (docs/performance.md): a profiler changes it.
# --malloc-tuned keeps blocks up to 32 MiB on the heap and never trims it, for both conditions.
MALLOC_VARIABLES = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
    "MALLOC_TOP_PAD_": str(256 << 20),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frameworks", default="pytorch,mxnet", help="comma-separated")
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30, help="training steps per timed epoch")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of two runs (ABBA order)")
    parser.add_argument("--threads", type=int, default=0, help="0: the framework's default")
    parser.add_argument("--malloc-tuned", action="store_true", help="glibc malloc kept from trimming")
    parser.add_argument("--cpus", default=None, help='pin the runs to these CPUs, e.g. "1"')
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace, framework: str) -> RunConfig:
    # A validation split of one batch keeps the untimed evaluation between epochs short.
    size = (args.steps + 1) * args.batch_size
    return RunConfig(
        framework=framework,
        model=args.model,
        image_size=args.image_size,
        batch_size=args.batch_size,
        threads=args.threads,
        cpus=args.cpus,
        epochs=args.epochs,
        warmup_steps=5,
        dataset_size=size,
        val_fraction=args.batch_size / size,
        timeout=1800,
        sample_interval=0,
    )


class LoadMeter:
    """CPU used on the whole machine minus what this process and its children used, in cores."""

    def _busy(self) -> float:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        return (sum(values[:8]) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")

    def _ours(self) -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def start(self) -> tuple[float, float, float]:
        return time.monotonic(), self._busy(), self._ours()

    def stop(self, mark: tuple[float, float, float]) -> float:
        wall = time.monotonic() - mark[0]
        return max((self._busy() - mark[1]) - (self._ours() - mark[2]), 0.0) / wall if wall else 0.0


def one_run(config: RunConfig, root: Path, index: int, meter: LoadMeter) -> dict:
    mark = meter.start()
    rec = execute(config, run_folder(root, index, config), None)
    load = meter.stop(mark)
    if rec.outcome.outcome != "ok":
        outcome = rec.outcome
        raise SystemExit(f"{config.label()} ended {outcome.outcome}: {outcome.reason} ({rec.run_dir})")
    seconds = [e["seconds"] for e in rec.epochs]
    trace = rec.trace or {}
    return {
        "traced": config.trace == "kernels",
        "median_epoch_seconds": statistics.median(seconds),
        "epochs": seconds,
        # Minor page faults per timed epoch: an allocator that returns memory to the kernel makes
        # step times move by several percent (docs/performance.md); a profiler changes allocations.
        "minor_faults": statistics.median(e.get("minor_faults") or 0 for e in rec.epochs),
        "other_load": load,
        "backend": trace.get("backend"),
        "trace_status": trace.get("status"),
        "run_dir": str(rec.run_dir),
    }


def measure(args: argparse.Namespace, framework: str, root: Path) -> dict:
    base = make_config(args, framework)
    meter, runs = LoadMeter(), []
    for r in range(args.rounds):
        order = (ABBA[(2 * r) % 4], ABBA[(2 * r + 1) % 4])
        for traced in order:
            config = replace(base, trace="kernels" if traced else None)
            run = one_run(config, root, len(runs) + 1, meter)
            run["round"] = r + 1
            runs.append(run)
            print(
                f"  {framework} round {r + 1} {'traced  ' if traced else 'untraced'} "
                f"{run['median_epoch_seconds']:.4f} s/epoch  other load {run['other_load']:.2f}  "
                f"minor faults/epoch {run['minor_faults']:.0f}",
                flush=True,
            )
    return summarise(framework, runs)


def summarise(framework: str, runs: list[dict]) -> dict:
    traced = [r["median_epoch_seconds"] for r in runs if r["traced"]]
    plain = [r["median_epoch_seconds"] for r in runs if not r["traced"]]
    rounds = sorted({r["round"] for r in runs})
    pairs = []
    for n in rounds:
        a = next(r for r in runs if r["round"] == n and r["traced"])
        b = next(r for r in runs if r["round"] == n and not r["traced"])
        pairs.append(a["median_epoch_seconds"] / b["median_epoch_seconds"])
    row = {
        "framework": framework,
        "backend": next(r["backend"] for r in runs if r["traced"]),
        "traced_median": statistics.median(traced),
        "untraced_median": statistics.median(plain),
        "ratio": statistics.median(traced) / statistics.median(plain),
        "round_ratios": pairs,
        "runs": runs,
    }
    print(
        f"{framework} ({row['backend']}): traced {row['traced_median']:.4f} s/epoch, untraced "
        f"{row['untraced_median']:.4f} s/epoch, ratio {row['ratio']:.3f} "
        f"(per round {', '.join(f'{p:.3f}' for p in pairs)})",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.malloc_tuned:
        os.environ.update(MALLOC_VARIABLES)  # the workers inherit the orchestrator's environment
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp:
        for framework in args.frameworks.split(","):
            rows.append(measure(args, framework.strip(), Path(tmp) / framework.strip()))
    print(json.dumps([{k: v for k, v in r.items() if k != "runs"} for r in rows], indent=2))
    print(f"benchmark wall time: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

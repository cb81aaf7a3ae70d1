"""Harness overhead: the harness's steady-state step time against a bare hand-written loop.

For one framework (--framework), each round runs the same configuration twice, each in a fresh
process of that framework environment's interpreter: once through the harness
(orchestrator.launch.execute.execute, i.e. `python -m workers --spec spec.json`, timed by the shared
runner) and once as the bare loop in benchmarks/inside/bare_<framework>_loop.py (same model translation,
data, batch, threads, warm-up and number of timed steps; plain framework code and
time.perf_counter). The order alternates ABBA across rounds so that slow drift (thermal, other
load) cancels. It reports every round, the medians and
ratio = harness median / bare median. A benchmark, not a test: it always exits 0 once it has
measured, and prints a WARNING when the ratio is outside the tolerance.

Each run also shows "other load", the CPU (in cores) that processes other than this benchmark and
its child used while the run lived (/proc/stat), and the child's minor page faults: on a shared
machine, and with glibc's allocator, those explain most disagreements between rounds.

Last, one process compares the runner's loop body with the bare step in alternating chunks of
about 20 ms (bare_<framework>_loop.py --paired): the harness's own per-step cost, resolved far
below the run-to-run noise of separate processes.

With --task inference (and --features: the model up to its pooled features) the step is a forward
pass in evaluation mode without gradients: the harness runs the configuration with task inference
(the adapter's infer_step), and the bare loop its hand-written forward pass in the framework's own
fast idiom (bare_<framework>_loop.py --task inference).

    .venv/bin/python -m benchmarks.harness.overhead --framework tensorflow
    .venv/bin/python -m benchmarks.harness.overhead --framework pytorch --device cuda --model resnet50 \\
        --image-size 224 --batch-size 64 --threads 0
    .venv/bin/python -m benchmarks.harness.overhead --framework mxnet --model resnet50 --image-size 64 \\
        --batch-size 8 --steps 20 --warmup 3 --rounds 6
    .venv/bin/python -m benchmarks.harness.overhead --framework jax --task inference --features \\
        --model resnet50 --image-size 64 --batch-size 8 --warmup 3 --rounds 0 --steps 20 --paired-passes 8
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.harness import overhead_paired
from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL, IMAGE_MODELS, TASKS, RunConfig
from orchestrator.launch.execute import execute
from orchestrator.launch.lifecycle import worker_env
from orchestrator.launch.sidecar import SAMPLES_FILE
from orchestrator.provision import envs
from orchestrator.sweep.folders import run_folder

# The repository root: a framework's interpreter finds benchmarks.inside (and workers) there.
REPO = Path(__file__).resolve().parents[2]
INSIDE = "benchmarks.inside"
FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax")
# glibc returns big freed blocks to the kernel (munmap, heap trim), so every step faults its
# activations back in, page by page; how many depends on the process's allocation history.
# These keep blocks up to 32 MiB on the heap and never trim it.
MALLOC_VARIABLES = {
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
    "MALLOC_TOP_PAD_": str(256 << 20),
}
PAIRED_CHUNK = 0.02  # seconds: a chunk of steps in the in-process comparison (bare_common.paired)
log = logging.getLogger("overhead")


@dataclass
class Measurement:
    step_seconds: float
    steps: int
    other_load: float  # cores used by other processes while this run lived
    wall_seconds: float
    faults: int  # the child's minor page faults over its whole life
    threads: str
    sampler: float | None = None  # cores the harness's sidecar sampler used over its life


@dataclass
class Row:
    order: str  # "HB" or "BH": which ran first in this round
    harness: Measurement
    bare: Measurement


@dataclass
class Usage:
    other_load: float
    wall_seconds: float
    child_faults: int


class CpuMeter:
    """CPU used on the whole machine minus what this process and its children used, per second;
    and the minor page faults of the children reaped meanwhile."""

    def __init__(self) -> None:
        self.tick = os.sysconf("SC_CLK_TCK")

    def _busy(self) -> float:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
        return (sum(values[:8]) - idle) / self.tick

    def _ours(self) -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    def start(self) -> tuple[float, float, float, int]:
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        return time.monotonic(), self._busy(), self._ours(), faults

    def stop(self, mark: tuple[float, float, float, int]) -> Usage:
        wall = time.monotonic() - mark[0]
        others = (self._busy() - mark[1]) - (self._ours() - mark[2])
        faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - mark[3]
        return Usage(max(others, 0.0) / wall if wall > 0 else 0.0, wall, faults)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Harness step time against a bare loop in the same framework, alternating ABBA.",
        epilog="example: .venv/bin/python -m benchmarks.harness.overhead --framework paddle --rounds 6",
    )
    parser.add_argument("--framework", default="pytorch", choices=FRAMEWORKS)
    parser.add_argument("--model", default="small_cnn", choices=IMAGE_MODELS)
    parser.add_argument(
        "--task",
        default="train",
        choices=TASKS,
        help="train: optimizer steps; inference: forward passes in evaluation mode, no gradients",
    )
    parser.add_argument(
        "--features", action="store_true", help="with --task inference: the model up to its pooled features"
    )
    parser.add_argument(
        "--device", default="cpu", choices=("cpu", "cuda"), help="cuda: PyTorch only (both sides synchronise)"
    )
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="0 = the framework's default (default 2)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run (one epoch)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed warm-up steps per run")
    parser.add_argument(
        "--rounds", type=int, default=8, help="rounds, each one harness run and one bare run (0: none)"
    )
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quiet-load", type=float, default=0.1, help="cores of other load below which a run counts as quiet"
    )
    parser.add_argument(
        "--idle-wait", type=float, default=60.0, help="seconds to wait for a quiet machine before each run"
    )
    parser.add_argument(
        "--malloc-tuned",
        action="store_true",
        help="diagnostic: give both sides glibc settings that keep freed memory (no page faults per step)",
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=None,
        help="the harness's sidecar sampler interval in seconds (0: no sampler; default: the harness's)",
    )
    parser.add_argument(
        "--paired-passes", type=int, default=4, help="passes of the in-process comparison (0: none)"
    )
    parser.add_argument("--tolerance", type=float, default=1.02, help="warn when the ratio is beyond this")
    parser.add_argument("--env-root", default=None, help="the framework environments' folder")
    parser.add_argument("--keep-runs", type=Path, default=None, help="keep the harness run folders here")
    parser.add_argument("--save", type=Path, default=None, help="write every measurement to this JSON file")
    args = parser.parse_args(argv)
    if args.features and args.task != "inference":
        parser.error("--features applies to --task inference (the pooled features, no training)")
    return args


def make_config(args: argparse.Namespace) -> RunConfig:
    """One epoch of exactly --steps steps: the smallest data set whose training split gives it."""
    config = RunConfig(
        framework=args.framework,
        model=args.model,
        device=args.device,
        batch_size=args.batch_size,
        epochs=1,
        warmup_steps=args.warmup,
        repeats=1,
        timeout=3600.0,
        image_size=args.image_size,
        classes=args.classes,
        threads=args.threads,
        seed=args.seed,
        sample_interval=args.sample_interval,
        # As a matrix stores them: training is task None, and features False is None (zoo_parity.py's
        # arguments have neither: it compares training steps).
        task="inference" if getattr(args, "task", "train") == "inference" else None,
        features=True if getattr(args, "features", False) else None,
        sequence_length=getattr(args, "sequence_length", 0) or None,
    )
    size = args.steps * args.batch_size
    while replace(config, dataset_size=size).train_size < args.steps * args.batch_size:
        size += 1
    return replace(config, dataset_size=size)


def run_harness(
    config: RunConfig, runs: Path, index: int, env_root: str | None, meter: CpuMeter
) -> Measurement:
    mark = meter.start()
    rec = execute(config, run_folder(runs, index, config), env_root)
    use = meter.stop(mark)
    if rec.outcome.outcome != "ok" or not rec.epochs:
        raise SystemExit(f"harness run failed ({rec.outcome.outcome}): {rec.stderr_tail[-2000:]}")
    epoch = rec.epochs[-1]
    applied = (rec.outcome.result or {}).get("info", {}).get("threads", {})
    threads = f"{json.dumps(applied, sort_keys=True)} env {rec.thread_env}"
    step = epoch["seconds"] / epoch["steps"]
    return Measurement(
        step,
        epoch["steps"],
        use.other_load,
        use.wall_seconds,
        use.child_faults,
        threads,
        sampler_load(rec.run_dir),
    )


def sampler_load(run_dir: Path) -> float | None:
    """The sidecar sampler's own CPU over its wall time (its "end" record), None without one."""
    try:
        lines = (run_dir / SAMPLES_FILE).read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        record = json.loads(line)
        if record.get("kind") == "end" and record.get("wall_seconds"):
            return record["cpu_seconds"] / record["wall_seconds"]
    return None


def bare_loop(config: RunConfig, python: Path, *extra: str) -> dict[str, Any]:
    """Run benchmarks/inside/bare_<framework>_loop.py in the harness's worker environment; its JSON."""
    return run_script(config, python, f"bare_{config.framework}_loop", *extra)[-1]


def run_script(config: RunConfig, python: Path, script: str, *extra: str) -> list[dict[str, Any]]:
    """Run a module of benchmarks/inside/ with the framework's interpreter and the configuration's
    arguments, in the harness's worker environment; the JSON lines it printed."""
    env, _ = worker_env(config)  # the same thread variables and PYTHONPATH as the harness's worker
    # The repository root first: `-m` finds benchmarks.inside there from any folder, and the
    # bare loop's `workers` is the checkout's, the code the harness's worker tree copies.
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env["PYTHONPATH"]])
    cmd = [
        str(python),
        "-m",
        f"{INSIDE}.{script}",
        "--model",
        config.model,
        "--image-size",
        str(config.image_size),
    ]
    cmd += ["--classes", str(config.classes), "--batch-size", str(config.batch_size)]
    cmd += ["--threads", str(config.threads), "--warmup", str(config.warmup_steps)]
    cmd += ["--steps", str(config.train_size // config.batch_size)]
    cmd += ["--dataset-size", str(config.dataset_size)]
    cmd += ["--val-fraction", str(config.val_fraction), "--lr", str(config.lr)]
    cmd += ["--momentum", str(config.momentum), "--seed", str(config.seed), "--device", config.device]
    if config.task == "inference":
        cmd += ["--task", "inference", *(["--features"] if config.features else [])]
    if config.sequence_length:
        cmd += ["--sequence-length", str(config.sequence_length)]
    cmd += extra
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"{script} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_bare(config: RunConfig, python: Path, meter: CpuMeter) -> Measurement:
    mark = meter.start()
    out = bare_loop(config, python)
    use = meter.stop(mark)
    threads = json.dumps(out["threads"], sort_keys=True)
    step = out["step_seconds"]
    return Measurement(step, out["steps"], use.other_load, use.wall_seconds, use.child_faults, threads)


def wait_until_idle(meter: CpuMeter, threshold: float, limit: float) -> None:
    """Wait (up to limit seconds) for a second in which other processes use under threshold cores."""
    start = time.monotonic()
    while True:
        mark = meter.start()
        time.sleep(1.0)
        other = meter.stop(mark).other_load
        if other < threshold:
            return
        if time.monotonic() - start >= limit:
            log.warning("  machine still busy after %.0f s (other load %.2f cores); going on", limit, other)
            return


def spread(values: list[float]) -> str:
    mid = statistics.median(values)
    return f"{min(values) * 1e3:.2f}-{max(values) * 1e3:.2f} ms ({(max(values) - min(values)) / mid:.1%})"


def summary(rows: list[Row], what: str) -> float:
    harness = [r.harness.step_seconds for r in rows]
    bare = [r.bare.step_seconds for r in rows]
    per_round = [h / b for h, b in zip(harness, bare, strict=True)]
    ratio = statistics.median(harness) / statistics.median(bare)
    print(f"\n{what} ({len(rows)}):")
    print(f"  harness median {statistics.median(harness) * 1e3:.2f} ms/step, range {spread(harness)}")
    print(f"  bare    median {statistics.median(bare) * 1e3:.2f} ms/step, range {spread(bare)}")
    print(
        f"  per-round harness/bare: median {statistics.median(per_round):.4f}, "
        f"range {min(per_round):.4f}-{max(per_round):.4f}"
    )
    print(f"  ratio = harness median / bare median = {ratio:.4f}")
    return ratio


def report(config: RunConfig, rows: list[Row], args: argparse.Namespace) -> None:
    first = rows[0]
    print(
        f"\nconfiguration: {config.label()} image {config.image_size} steps {first.harness.steps}"
        f" warm-up {config.warmup_steps} dataset {config.dataset_size}"
    )
    print(f"threads: harness {first.harness.threads}; bare {first.bare.threads}")
    interval = DEFAULT_SAMPLE_INTERVAL if config.sample_interval is None else config.sample_interval
    print(f"harness sidecar sampler: {f'every {interval:g} s' if interval else 'off'}")
    if MALLOC_VARIABLES.keys() <= os.environ.keys():
        print(f"allocator: {' '.join(f'{k}={os.environ[k]}' for k in MALLOC_VARIABLES)} (both sides)")
    print(
        "\n| round | order | harness ms/step | bare ms/step | harness/bare | other load H | other load B"
        " | faults H | faults B | sampler H |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        h, b = r.harness, r.bare
        sampler = "-" if h.sampler is None else f"{h.sampler:.3f}"
        print(
            f"| {i} | {r.order} | {h.step_seconds * 1e3:.2f} | {b.step_seconds * 1e3:.2f} |"
            f" {h.step_seconds / b.step_seconds:.4f} | {h.other_load:.2f} | {b.other_load:.2f} |"
            f" {h.faults / 1e3:.0f}k | {b.faults / 1e3:.0f}k | {sampler} |"
        )
    ratio = summary(rows, "all rounds")
    quiet = [r for r in rows if max(r.harness.other_load, r.bare.other_load) < args.quiet_load]
    if 0 < len(quiet) < len(rows):
        summary(quiet, f"quiet rounds only, other load < {args.quiet_load} cores in both runs")
    wall = sum(r.harness.wall_seconds + r.bare.wall_seconds for r in rows)
    print(f"process wall time: {wall:.0f} s for {2 * len(rows)} runs")
    if not 1 / args.tolerance <= ratio <= args.tolerance:
        print(f"WARNING: ratio {ratio:.4f} (all rounds) is outside 1/{args.tolerance}..{args.tolerance}")
    if len(quiet) < len(rows):
        print(
            f"WARNING: {len(rows) - len(quiet)} of {len(rows)} rounds ran beside other load "
            f">= {args.quiet_load} cores: their figures are noisy"
        )


def step_name(config: RunConfig) -> str:
    """The adapter's step the runner times for this configuration (workers/runner.py)."""
    return "infer_step" if config.task == "inference" else "train_step"


def run_paired(config: RunConfig, python: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The in-process comparison: chunks of harness steps, the adapter's step alone (train_step or
    infer_step) and bare steps in turn."""
    log.info("in-process paired chunks (%d passes)", args.paired_passes)
    wait_until_idle(CpuMeter(), args.quiet_load, args.idle_wait)
    out = bare_loop(config, python, "--paired", str(args.paired_passes), "--chunk-seconds", str(PAIRED_CHUNK))
    overhead_paired.report(out, args.quiet_load)
    return out


def one_round(r: int, config: RunConfig, python: Path, runs: Path, args: argparse.Namespace) -> Row:
    meter = CpuMeter()
    harness_first = r % 2 == 0  # ABBA: H B | B H | H B | ...
    log.info("round %d/%d (%s)", r + 1, args.rounds, "harness, bare" if harness_first else "bare, harness")
    results: dict[str, Measurement] = {}
    for side in ("harness", "bare") if harness_first else ("bare", "harness"):
        wait_until_idle(meter, args.quiet_load, args.idle_wait)
        if side == "harness":
            results[side] = run_harness(config, runs, r, args.env_root, meter)
        else:
            results[side] = run_bare(config, python, meter)
    h, b = results["harness"], results["bare"]
    if h.steps != b.steps:
        raise SystemExit(f"step counts differ: harness {h.steps}, bare {b.steps}")
    log.info(
        "  harness %.2f ms/step (other load %.2f), bare %.2f ms/step (other load %.2f)",
        *(h.step_seconds * 1e3, h.other_load, b.step_seconds * 1e3, b.other_load),
    )
    return Row("HB" if harness_first else "BH", h, b)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    args = parse_args(argv)
    if args.device == "cuda" and args.framework != "pytorch":
        log.error("--device cuda: only the PyTorch bare loop runs on a GPU, not %s", args.framework)
        return 2
    config = make_config(args)
    if args.malloc_tuned:
        os.environ.update(MALLOC_VARIABLES)  # both the harness's worker and the bare loop inherit them
    python, where = envs.python_for(args.framework, args.env_root)
    if python is None:
        log.error("no %s environment: %s", args.framework, where)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        runs = args.keep_runs or Path(tmp)
        runs.mkdir(parents=True, exist_ok=True)
        rows = [one_round(r, config, python, runs, args) for r in range(args.rounds)]
    if rows:
        report(config, rows, args)
    paired = run_paired(config, python, args) if args.paired_passes else None
    if args.save:
        saved = {"config": config.to_dict(), "rounds": [asdict(r) for r in rows], "paired": paired}
        args.save.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
    print(f"benchmark wall time: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

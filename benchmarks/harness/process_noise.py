"""Noise that bench can remove: the between-process spread of one configuration under launch policies.

The same configuration is run --rounds times under each policy, each run a fresh worker process
(orchestrator.launch.execute.execute, as `bench run` does), the policies interleaved round by round
in an order shuffled with a recorded seed, so that slow drift and the other engineers' jobs fall on
every policy alike. A policy is a way to launch the worker: the `cpus` setting (pinned), variables
added to its environment, or a command it starts under (execute's extra_env and prefix):

    default   as bench launches it today
    pinned    cpus: one fixed CPU (the last bench may use), threads 1
    hashseed  PYTHONHASHSEED=0
    no-aslr   started under `setarch -R` (no address-space randomisation), where the kernel allows
    malloc    glibc's allocator fixed: one arena, fixed trim and mmap thresholds (GLIBC_TUNABLES)
    env-size  the environment padded to a fixed size (it moves the stack, Mytkowicz et al. 2009)
    all       every one of them together

Each run's figure is its median seconds per image over its timed epochs
(orchestrator.config.samples.run_summary, what the reports show). Per policy it prints n, the runs'
median ms per image, the coefficient of variation between processes (stdev / mean of the runs'
figures) with a 95 % bootstrap interval (runs resampled), the CV net of rounds (each run over its
round's median across policies: the drift all policies shared taken out), and the CPU (in cores) that other
processes used meanwhile (/proc/stat). Before each round it waits while another process runs
pytest (--wait-for), and it starts no round that would end after --deadline. A benchmark, not a
test: it asserts nothing and exits 0 once it has measured.

    .venv/bin/python -m benchmarks.harness.process_noise --rounds 8 --json process_noise.json
    .venv/bin/python -m benchmarks.harness.process_noise --model resnet50 --image-size 64 --rounds 4
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.harness.autorange import busy_cores_seconds
from orchestrator.config import samples
from orchestrator.config.run_config import RunConfig
from orchestrator.launch.execute import execute
from orchestrator.launch.lifecycle import worker_env
from orchestrator.sweep.folders import run_folder

ENV_SIZE = 16384  # bytes of environment (NAME=value\0 each) the env-size policy pads to
PAD_NAME = "BENCH_ENV_PAD"
# One arena, and thresholds fixed so glibc does not move them as the run frees large blocks
# (the dynamic mmap threshold makes the heap's shape depend on the run's history).
MALLOC_ENV = {
    "MALLOC_ARENA_MAX": "1",
    "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432",
}
POLICIES = ("default", "pinned", "hashseed", "no-aslr", "malloc", "env-size", "all")
BOOTSTRAP = 2000
WAIT_SECONDS = 20.0


@dataclass
class Policy:
    """How one policy launches the worker; ``unavailable``: why it cannot here."""

    name: str
    cpus: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    prefix: list[str] = field(default_factory=list)
    unavailable: str | None = None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", default="pytorch")
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--rounds", type=int, default=8, help="runs of each policy")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dataset-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=43, help="shuffles the policies within each round")
    parser.add_argument(
        "--wait-for", default="pytest", help="wait while a process matching this runs ('': never)"
    )
    parser.add_argument("--deadline", default=None, help="HH:MM UTC: start no round that would end later")
    parser.add_argument("--env-root", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write every measurement here")
    return parser.parse_args(argv)


def aslr_off_works() -> str | None:
    """None where `setarch -R` runs a process without address-space randomisation, else why not."""
    if shutil.which("setarch") is None:
        return "no setarch on this machine"
    maps = []
    for _ in range(2):
        done = subprocess.run(["setarch", "-R", "cat", "/proc/self/maps"], capture_output=True, text=True)
        if done.returncode != 0:
            return f"setarch -R refused: {done.stderr.strip()[:200]}"
        maps.append(done.stdout)
    return None if maps[0] == maps[1] else "setarch -R ran, but the address space still moved"


def padded_env(config: RunConfig, extra: dict[str, str]) -> dict[str, str]:
    """``extra`` plus a variable that brings the worker's environment to ENV_SIZE bytes."""
    env = {**worker_env(config)[0], **extra}
    size = sum(len(k) + len(v) + 2 for k, v in env.items()) + len(PAD_NAME) + 2
    if size > ENV_SIZE:
        raise SystemExit(f"the environment is {size} bytes already, above ENV_SIZE {ENV_SIZE}")
    return {**extra, PAD_NAME: "x" * (ENV_SIZE - size)}


def policy(name: str, base: RunConfig, aslr_problem: str | None) -> Policy:
    one_cpu = str(max(os.sched_getaffinity(0)))
    if name == "default":
        return Policy(name)
    if name == "pinned":
        return Policy(name, cpus=one_cpu)
    if name == "hashseed":
        return Policy(name, extra_env={"PYTHONHASHSEED": "0"})
    if name == "no-aslr":
        return Policy(name, prefix=["setarch", "-R"], unavailable=aslr_problem)
    if name == "malloc":
        return Policy(name, extra_env=dict(MALLOC_ENV))
    if name == "env-size":
        return Policy(name, extra_env=padded_env(base, {}))
    extra = padded_env(base, {"PYTHONHASHSEED": "0", **MALLOC_ENV})
    prefix = [] if aslr_problem else ["setarch", "-R"]
    return Policy(name, cpus=one_cpu, extra_env=extra, prefix=prefix)


def measure(config: RunConfig, how: Policy, runs: Path, index: int, env_root: str | None) -> dict[str, Any]:
    config = replace(config, cpus=how.cpus)
    start, others = time.monotonic(), busy_cores_seconds()
    folder = run_folder(runs, index, config)
    rec = execute(config, folder, env_root, extra_env=how.extra_env, prefix=how.prefix)
    wall = time.monotonic() - start
    load = (busy_cores_seconds() - others) / wall if wall > 0 else 0.0
    if rec.outcome.outcome != "ok" or not rec.epochs:
        raise SystemExit(f"{how.name}: run failed ({rec.outcome.outcome}): {rec.stderr_tail[-1500:]}")
    shutil.rmtree(folder, ignore_errors=True)  # hundreds of runs: keep the disk as it was
    summary = samples.run_summary(rec.epochs)
    return {
        "ms_per_image": 1000 * summary["seconds_per_image"],
        "timed_epochs": summary["timed_epochs"],
        "wall_seconds": wall,
        "other_load": max(load, 0.0),
    }


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values)


def cv_interval(values: list[float], seed: int) -> tuple[float, float]:
    """95 % percentile bootstrap of the CV, the runs resampled."""
    rng = random.Random(seed)
    draws = sorted(cv(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP))
    return draws[int(0.025 * BOOTSTRAP)], draws[int(0.975 * BOOTSTRAP) - 1]


def net_of_rounds(per: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Each run's figure over its round's median across policies: what is left of the spread once
    the drift that every policy of a round shared (the machine's, not the process's) is taken out."""
    rounds = min(len(rows) for rows in per.values())
    medians = [statistics.median(rows[i]["ms_per_image"] for rows in per.values()) for i in range(rounds)]
    return {name: [rows[i]["ms_per_image"] / medians[i] for i in range(rounds)] for name, rows in per.items()}


def summary_line(name: str, rows: list[dict[str, Any]], seed: int, net: list[float]) -> str:
    if len(rows) < 2:
        return f"{name:9} n={len(rows)}: too few runs for a spread"
    ms = [r["ms_per_image"] for r in rows]
    low, high = cv_interval(ms, seed)
    loads = [r["other_load"] for r in rows]
    drift_free = f"{100 * cv(net):4.1f}%" if len(net) > 1 else "  -  "
    return (
        f"{name:9} n={len(ms):2}  median {statistics.median(ms):7.3f} ms/image"
        f"  CV {100 * cv(ms):5.1f}% (95% {100 * low:4.1f}-{100 * high:4.1f})"
        f"  net of rounds {drift_free}"
        f"  range {min(ms):.3f}-{max(ms):.3f}"
        f"  other load median {statistics.median(loads):4.2f} max {max(loads):4.2f} cores"
    )


def others_running(pattern: str) -> list[int]:
    """Processes whose command line matches ``pattern``, other than this one."""
    if not pattern:
        return []
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split() if int(p) != os.getpid()]


def wait_until_quiet(pattern: str) -> float:
    """Seconds waited while another process matched ``pattern``."""
    waited = 0.0
    while others_running(pattern):
        time.sleep(WAIT_SECONDS)
        waited += WAIT_SECONDS
    return waited


def deadline_of(text: str | None) -> float | None:
    if text is None:
        return None
    hours, minutes = (int(v) for v in text.split(":"))
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(hour=hours, minute=minutes, second=0, microsecond=0).timestamp()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = RunConfig(
        framework=args.framework,
        model=args.model,
        image_size=args.image_size,
        batch_size=args.batch_size,
        dataset_size=args.dataset_size,
        epochs=args.epochs,
        threads=args.threads,
        classes=3,
        timeout=600.0,
    )
    aslr_problem = aslr_off_works()
    policies = [policy(name, base, aslr_problem) for name in args.policies]
    for how in policies:
        if how.unavailable:
            print(f"{how.name}: unavailable here ({how.unavailable})", flush=True)
    live = [how for how in policies if not how.unavailable]
    per: dict[str, list[dict[str, Any]]] = {how.name: [] for how in live}
    rng, deadline, index, waited, round_seconds = (
        random.Random(args.seed),
        deadline_of(args.deadline),
        0,
        0.0,
        0.0,
    )
    with tempfile.TemporaryDirectory(prefix="bench-process-noise-") as tmp:
        for number in range(args.rounds):
            waited += wait_until_quiet(args.wait_for)
            if deadline is not None and time.time() + round_seconds > deadline:
                print(f"deadline {args.deadline}: stopped before round {number + 1}", flush=True)
                break
            order = rng.sample(live, len(live))
            began = time.monotonic()
            for how in order:
                index += 1
                per[how.name].append(measure(base, how, Path(tmp), index, args.env_root))
            round_seconds = max(round_seconds, time.monotonic() - began)
            print(
                f"round {number + 1}: {' '.join(h.name for h in order)} ({round_seconds:.0f} s)", flush=True
            )
            if args.json:  # after every round, so a run cut short still leaves its figures
                record = {"config": base.label(), "seed": args.seed, "waited_seconds": waited, "runs": per}
                args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{base.label()}: waited {waited:.0f} s for other pytest runs", flush=True)
    net = net_of_rounds(per) if len(per) > 1 and all(len(rows) > 1 for rows in per.values()) else {}
    for name, rows in per.items():
        print(summary_line(name, rows, args.seed, net.get(name, [])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

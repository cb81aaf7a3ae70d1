"""A framework's modes and precisions on small_cnn at a tiny size: build, first step, steady step.

Run it from the project's .venv with ``--framework tensorflow`` (or ``paddle``, any adapter); it
re-runs itself in that framework environment's interpreter. In one process, for each mode x
precision asked for (``--modes``, ``--precisions``), the adapter is set up and built (the
``build`` seconds include graph mode's tracing), then the first training step is timed alone (XLA
compiles there), then ``--steps`` more steps, each timed; it prints one line per combination: build
seconds, first-step seconds, the median step in ms, and the two first losses, or the Unsupported
message. Nothing is asserted; the figures go to docs/frameworks/<framework>.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

# The repository root, on the framework interpreter's PYTHONPATH so that it finds this module
# (run again with -m) and `workers`.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = "benchmarks.frameworks.modes_first_steps"
INSIDE = "--inside"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="tensorflow")
    parser.add_argument("--modes", default="eager,graph,compiled")
    parser.add_argument("--precisions", default="fp32,bf16,fp16")
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args(argv)


def outside(argv: list[str]) -> int:
    from orchestrator.provision import envs

    args = parse(argv)
    python, why = envs.python_for(args.framework)
    if python is None:
        sys.exit(f"the {args.framework} environment is missing: {why}")
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.call([str(python), "-m", MODULE, INSIDE, *argv], env=env)


def one(args: argparse.Namespace, mode: str, precision: str) -> str:
    import importlib

    from workers import models, runner
    from workers.adapters import base

    adapter = importlib.import_module("workers.adapters." + args.framework).Adapter
    config = dict(
        framework=args.framework, model="small_cnn", device="cpu", batch_size=args.batch_size,
        optimizer="sgd", lr=0.01, momentum=0.9, epochs=1, warmup_steps=0, repeats=1, dataset="synthetic",
        dataset_size=args.batch_size * (args.steps + 2) * 5 // 4 + 1, image_size=args.image_size, classes=4,
        val_fraction=0.2, threads=args.threads, seed=0, mode=mode, precision=precision,
    )  # fmt: skip
    started = time.perf_counter()
    try:
        a = adapter(config)
        a.setup()
        arch = models.build_arch("small_cnn", 4, args.image_size)
        arch["layers"] = [node for node in arch["layers"] if node["op"] != "dropout"]
        a.build(arch)
    except base.Unsupported as exc:
        return f"{mode:9s}{precision:6s}unsupported: {exc}"
    built = time.perf_counter() - started
    train_size, _ = a.load_data()
    a.reset()
    a.prepare_epoch(runner.epoch_order(0, 1, train_size))
    times, losses = [], []
    for i in range(args.steps + 2):
        t = time.perf_counter()
        a.train_step(i)
        a.synchronize()
        times.append(time.perf_counter() - t)
        if i < 2:
            losses.append(a.epoch_loss())
    steady = statistics.median(times[2:]) * 1000
    return (f"{mode:9s}{precision:6s}build {built:6.2f} s  first step {times[0]:6.2f} s  "
            f"median step {steady:8.1f} ms  losses {losses[0]:.6f} {losses[1]:.6f}")  # fmt: skip


def inside(argv: list[str]) -> None:
    args = parse(argv)
    print(f"{args.framework}: small_cnn {args.image_size} px, batch {args.batch_size}, "
          f"{args.threads} threads, {args.steps} steady steps", flush=True)  # fmt: skip
    for precision in args.precisions.split(","):
        for mode in args.modes.split(","):
            print(one(args, mode, precision), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == INSIDE:
        inside(sys.argv[2:])
    else:
        sys.exit(outside(sys.argv[1:]))

"""Zoo parity: bench's port of a model against the framework's own model-zoo model, step for step.

In framework F's own environment (benchmarks/inside/zoo_<F>.py, run with that environment's interpreter
and the harness's worker environment variables), one process builds bench's port through F's
adapter, exactly as the harness does, and F's own model-zoo model (no weights downloaded), at the
same input size, batch, number of classes and threads, with SGD and momentum and softmax
cross-entropy on both. The bench side is the adapter's train_step as the runner calls it; the zoo
side is F's idiomatic hand-written step (the bare loop's) on the zoo model; both read the same
batch tensors. The steps are taken in alternating chunks, every order equally often (as
overhead.py --paired-passes does), so both sides see the same machine.

It prints the per-pass ratios bench/zoo, their median and range, the median of per-turn ratios
with a 95% bootstrap interval, both parameter counts and where the architectures differ
(benchmarks/frameworks/zoo_models.py). A benchmark, not a test: it exits 0 once it has measured; a
framework without a zoo, or a model its zoo lacks, is said and exits 0 too.

    .venv/bin/python -m benchmarks.frameworks.zoo_parity --framework paddle --model resnet50
    .venv/bin/python -m benchmarks.frameworks.zoo_parity --framework mxnet --model vgg16 \
        --batch-size 32 --passes 6
    .venv/bin/python -m benchmarks.frameworks.zoo_parity --framework tensorflow --counts  # counts only
    .venv/bin/python -m benchmarks.frameworks.zoo_parity --framework mxnet --model resnet50 --ops  # operators

--ops times nothing: one warm step of each side runs under the framework's operator profiler (the
tracer `trace: kernels` uses) and the operators whose calls differ are listed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.frameworks import zoo_models
from benchmarks.harness import overhead, overhead_paired
from orchestrator.config.run_config import MODELS
from orchestrator.provision import envs

GOAL = 1.05  # the goal: bench's port within 1.05 of the zoo model's step time, or faster
log = logging.getLogger("zoo_parity")


def all_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Bench's port against the framework's own model-zoo model, in alternating chunks.",
        epilog="example: .venv/bin/python -m benchmarks.frameworks.zoo_parity --framework paddle "
        "--model resnet50",
    )
    parser.add_argument("--framework", required=True, choices=overhead.FRAMEWORKS)
    parser.add_argument("--model", choices=MODELS, help="required unless --counts")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument(
        "--sequence-length", type=int, default=0, help="a language model's tokens a sequence (0: its context)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--threads", type=int, default=all_cores(), help="default: every core this process may use"
    )
    parser.add_argument("--steps", type=int, default=10, help="steps per pass, each taken by both sides")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps by each side first")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--chunk-seconds",
        type=float,
        default=0.02,
        help="about how long a chunk of steps takes (at least 1 step)",
    )
    parser.add_argument(
        "--counts", action="store_true", help="only the trainable parameter counts, every model"
    )
    parser.add_argument(
        "--ops", action="store_true", help="no timing: the operators one step of each side runs, with calls"
    )
    parser.add_argument(
        "--quiet-load", type=float, default=0.1, help="cores of other load below which a pass counts as quiet"
    )
    parser.add_argument(
        "--idle-wait", type=float, default=60.0, help="seconds to wait for a quiet machine first"
    )
    parser.add_argument("--env-root", default=None, help="the framework environments' folder")
    # The zoo scripts run on the CPU (the overhead benchmark's configuration needs a device).
    parser.set_defaults(device="cpu")
    parser.add_argument(
        "--resnet-v1",
        action="store_true",
        help="build bench's ResNet50 as v1 (the stride on each downsampling block's first 1x1, as "
        "Keras's and Gluon's are): the same work as the zoo model, to time the port alone",
    )
    parser.add_argument("--save", type=Path, default=None, help="write the measurement to this JSON file")
    args = parser.parse_args(argv)
    if not args.counts and args.model is None:
        parser.error("--model is required (or --counts)")
    if args.resnet_v1 and args.model != "resnet50":
        parser.error("--resnet-v1 is for --model resnet50")
    args.sample_interval = None  # overhead.make_config's harness-only setting
    return args


def per_pass(values: list[list[float]]) -> list[float]:
    return [statistics.mean(chunks) for chunks in values]


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    """The per-pass table, the ratios' median and range, the counts and the differences."""
    pair = zoo_models.PAIRS[(args.framework, args.model)]
    bench, zoo, loads = per_pass(out["paired"]["bench"]), per_pass(out["paired"]["zoo"]), out["other_load"]
    print(
        f"\n{args.framework} {out.get('version')}, {args.model}, {args.image_size} px,"
        f" batch {args.batch_size}, {args.classes} classes,"
        f" threads {json.dumps(out.get('threads'), sort_keys=True)}"
    )
    print(f"bench's port (the adapter's train_step): {out['port_parameters']:,} trainable parameters")
    print(f"zoo model {out['zoo']} (the bare loop's step): {out['zoo_parameters']:,} trainable parameters")
    print(
        f"{len(loads)} passes of {out['steps']} steps in chunks of {out['chunk']},"
        " each chunk taken by both sides in turn:"
    )
    print("\n| pass | bench ms/step | zoo ms/step | bench/zoo | other load |")
    print("|---|---|---|---|---|")
    for i, (b, z, load) in enumerate(zip(bench, zoo, loads, strict=True)):
        print(f"| {i + 1} | {b * 1e3:.1f} | {z * 1e3:.1f} | {b / z:.4f} | {load:.2f} |")
    ratios = [b / z for b, z in zip(bench, zoo, strict=True)]
    median = statistics.median(ratios)
    print(f"\nbench/zoo per pass: median {median:.4f}, range {min(ratios):.4f}-{max(ratios):.4f}")
    chunks_b = [t for p in out["paired"]["bench"] for t in p]
    chunks_z = [t for p in out["paired"]["zoo"] for t in p]
    turns = overhead_paired.interval(chunks_b, chunks_z, overhead_paired.median_ratio)
    print(f"bench/zoo per turn ({len(chunks_b)} turns): median {turns} (95% bootstrap interval)")
    print(f"goal: within {GOAL} of the zoo model, or faster: {'met' if median <= GOAL else 'NOT met'}")
    noisy = sum(load >= args.quiet_load for load in loads)
    if noisy:
        print(
            f"WARNING: {noisy} of {len(loads)} passes ran beside other load >= {args.quiet_load} cores: noisy"
        )
    if args.resnet_v1:
        print("bench's port built as ResNet v1 (--resnet-v1): the stride placement below is removed")
    differences(pair)


def differences(pair: zoo_models.Pair) -> None:
    if not pair.differences:
        print("architectures: the same, layer for layer")
        return
    print("architectures differ:")
    for line in pair.differences:
        print(f"  - {line}")


def counts(lines: list[dict[str, Any]], args: argparse.Namespace) -> None:
    documented = args.image_size == 224 and args.classes == 1000
    print(f"\n{args.framework}: trainable parameters at {args.image_size} px, {args.classes} classes")
    print("\n| model | zoo model | bench's port | zoo | zoo - port | documented (224 px, 1000 classes) |")
    print("|---|---|---|---|---|---|")
    for line in lines:
        pair = zoo_models.PAIRS[(args.framework, line["model"])]
        extra = line["zoo_parameters"] - line["port_parameters"]
        note = f"{pair.extra_parameters:+,}"
        if documented and extra != pair.extra_parameters:
            note += " (UNEXPECTED)"
        print(
            f"| {line['model']} | {line['zoo']} | {line['port_parameters']:,} | {line['zoo_parameters']:,}"
            f" | {extra:+,} | {note} |"
        )
    for line in lines:
        print(f"\n{line['model']}:")
        differences(zoo_models.PAIRS[(args.framework, line["model"])])


def operators(out: dict[str, Any], args: argparse.Namespace) -> None:
    """The operators whose calls per step differ between the two sides (counts, never times)."""
    bench, zoo = out["bench_ops"], out["zoo_ops"]
    same = sorted(name for name in bench if bench[name] == zoo.get(name))
    print(
        f"\n{args.framework} {args.model}, {args.image_size} px, batch {args.batch_size}:"
        " the operators of one step"
    )
    print(f"bench's port: {sum(bench.values())} calls; zoo model {out['zoo']}: {sum(zoo.values())} calls")
    print("\n| operator | bench's port | zoo model |")
    print("|---|---|---|")
    for name in sorted(set(bench) | set(zoo)):
        if bench.get(name) != zoo.get(name):
            print(f"| {name} | {bench.get(name, '-')} | {zoo.get(name, '-')} |")
    print(f"\nthe same calls on both sides: {', '.join(same) or 'none'}")
    differences(zoo_models.PAIRS[(args.framework, args.model)])


def zoo_check(args: argparse.Namespace) -> str:
    """What the framework's environment itself says of the zoo bench would need for its CNNs
    (PyTorch's torchvision), so the reason printed is checked here rather than only remembered."""
    if args.framework != "pytorch":
        return ""
    python, where = envs.python_for(args.framework, args.env_root)
    if python is None:
        return f" (and there is no pytorch environment: {where})"
    done = subprocess.run([str(python), "-c", "import torchvision"], capture_output=True, text=True)
    if done.returncode == 0:
        return " (torchvision imports in this environment, but bench has no zoo_pytorch.py yet)"
    lines = done.stderr.strip().splitlines()
    return f" (here: {lines[-1] if lines else f'import torchvision exits {done.returncode}'})"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    args = parse_args(argv)
    if args.framework in zoo_models.UNAVAILABLE:
        seen = zoo_check(args)
        print(f"{args.framework}: zoo parity unavailable: {zoo_models.UNAVAILABLE[args.framework]}{seen}")
        return 0
    models = zoo_models.pairs_of(args.framework) if args.counts else [args.model]
    if not args.counts and (args.framework, args.model) not in zoo_models.PAIRS:
        why = zoo_models.NOT_SHIPPED.get((args.framework, args.model), "no zoo counterpart")
        print(f"{args.framework} {args.model}: no zoo model to compare with: {why}{zoo_check(args)}")
        return 0
    python, where = envs.python_for(args.framework, args.env_root)
    if python is None:
        log.error("no %s environment: %s", args.framework, where)
        return 2
    started = time.monotonic()
    script = f"zoo_{args.framework}"
    if args.counts:
        args.model, args.steps, args.batch_size = models[0], 1, 1  # counting needs no data to speak of
        config = overhead.make_config(args)
        lines = overhead.run_script(config, python, script, "--count-only", "--model", ",".join(models))
        counts(lines, args)
        out: Any = lines
    elif args.ops:
        args.steps, args.warmup = 1, max(1, args.warmup)
        config = overhead.make_config(args)
        out = overhead.run_script(config, python, script, "--ops")[-1]
        operators(out, args)
    else:
        config = overhead.make_config(args)
        overhead.wait_until_idle(overhead.CpuMeter(), args.quiet_load, args.idle_wait)
        extra = ["--paired", str(args.passes), "--chunk-seconds", str(args.chunk_seconds)]
        extra += ["--resnet-v1"] if args.resnet_v1 else []
        out = overhead.run_script(config, python, script, *extra)[-1]
        report(out, args)
    if args.save:
        args.save.write_text(
            json.dumps({"args": sys.argv[1:], "result": out}, indent=1, sort_keys=True) + "\n"
        )
    print(f"benchmark wall time: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

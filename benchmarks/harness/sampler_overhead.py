"""Does the sidecar sampler disturb what it measures? Throughput with it against without it.

One real worker (`python -m workers`, the PyTorch environment) trains for many short epochs; the
real sampler (orchestrator.launch.sidecar, as `bench run` starts it) follows it from the first moment.
At each epoch boundary the benchmark lets the sampler run or freezes it (SIGSTOP: a stopped
process takes no CPU and touches nothing), alternating ABBA, so both conditions see the same
process, the same warm caches and the same drift of the machine. Per epoch the worker's own
clock gives the throughput; ratio = median(on) / median(off), and the median of the ratios of
neighbouring on/off epochs (the figure that cancels slow drift). The sampler's own CPU time per
second of run is measured from its /proc entry over the "on" epochs only.

Run it once per interval (default: the default interval, then a sweep) to find where the
overhead reaches 1%:

    .venv/bin/python -m benchmarks.harness.sampler_overhead
    .venv/bin/python -m benchmarks.harness.sampler_overhead --intervals 0.01,0.02,0.05,0.1,0.25,1.0 \
        --epochs 24

A benchmark, not a test: it always exits 0 once it has measured.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL, RunConfig
from orchestrator.launch.lifecycle import worker_env, write_spec
from orchestrator.launch.sidecar import Sidecar, SidecarSettings
from orchestrator.provision import envs

ABBA = (True, False, False, True)
# The benchmark's own polling disturbs both conditions alike; it runs niced, like the sampler.
POLL_SECONDS = 0.02


@dataclass
class Epoch:
    index: int
    sampled: bool
    images_per_second: float
    sampler_cpu: float  # sampler CPU seconds during the epoch (0 when frozen)
    wall: float


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--intervals", default=str(DEFAULT_SAMPLE_INTERVAL), help="comma-separated seconds")
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="0: the framework's default")
    parser.add_argument("--epochs", type=int, default=24, help="timed epochs per interval (a multiple of 4)")
    parser.add_argument("--epoch-images", type=int, default=640, help="training images per epoch")
    parser.add_argument(
        "--control",
        action="store_true",
        help="A/A: keep the sampler frozen in both conditions, to see the noise floor of the method",
    )
    parser.add_argument("--sampler-nice", type=int, default=None, help="override the sampler's niceness")
    return parser.parse_args(argv)


def make_config(args: argparse.Namespace, interval: float) -> RunConfig:
    # A validation split of one batch keeps the untimed evaluation between epochs short.
    size = args.epoch_images + args.batch_size
    return RunConfig(
        framework="pytorch",
        model=args.model,
        image_size=args.image_size,
        batch_size=args.batch_size,
        threads=args.threads,
        epochs=args.epochs,
        warmup_steps=5,
        dataset_size=size,
        val_fraction=args.batch_size / size,
        timeout=3600,
        sample_interval=interval,
    )


class EventTail:
    """New events of the worker's stream, as they are flushed."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if b'"step"' not in line]


def cpu_seconds(proc: psutil.Process) -> float:
    try:
        times = proc.cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0


class NicedSidecar(Sidecar):
    """The real sidecar, with the sampler's niceness overridden (to measure what it buys)."""

    nice: int | None = None

    def command(self) -> list[str]:
        return super().command() + ([] if self.nice is None else ["--nice", str(self.nice)])


def measure(
    config: RunConfig, python: Path, run_dir: Path, args: argparse.Namespace
) -> tuple[list[Epoch], dict]:
    """One worker, the sampler on and frozen in ABBA order by epoch; the per-epoch figures."""
    run_dir.mkdir(parents=True)
    write_spec(run_dir, config)
    env, _ = worker_env(config)
    sidecar = NicedSidecar(SidecarSettings(config.sample_interval or DEFAULT_SAMPLE_INTERVAL), run_dir)
    sidecar.nice = args.sampler_nice
    sidecar.launch()
    assert sidecar.proc is not None
    sampler = psutil.Process(sidecar.proc.pid)
    with open(run_dir / "stderr.log", "wb") as err:
        worker = subprocess.Popen(
            [str(python), "-m", "workers", "--spec", "spec.json"], cwd=run_dir, env=env, stderr=err
        )
    sidecar.start(worker.pid, time.time())
    tail, epochs, states = EventTail(run_dir / "events.jsonl"), [], {}
    mark = (0.0, 0.0)
    while worker.poll() is None:
        for event in tail.read():
            if event["event"] == "phase" and event["phase"] == "epoch":
                on = ABBA[(event["epoch"] - 1) % 4]
                if args.control:  # A/A: the "on" epochs are labelled so, but the sampler stays frozen
                    os.kill(sampler.pid, signal.SIGSTOP)
                    states[event["epoch"]] = on
                    mark = (cpu_seconds(sampler), time.monotonic())
                    continue
                os.kill(sampler.pid, signal.SIGCONT if on else signal.SIGSTOP)
                states[event["epoch"]] = on
                mark = (cpu_seconds(sampler), time.monotonic())
            elif event["event"] == "epoch_end":
                used, wall = cpu_seconds(sampler) - mark[0], time.monotonic() - mark[1]
                e = event["epoch"]
                epochs.append(Epoch(e, states[e], event["images_per_second"], used, wall))
                os.kill(sampler.pid, signal.SIGCONT)  # evaluation is sampled, as in a real run
        time.sleep(POLL_SECONDS)
    os.kill(sampler.pid, signal.SIGCONT)
    sidecar.stop()
    end = {}
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "end":
            end = record
    if worker.returncode != 0:
        raise SystemExit(f"the worker failed ({worker.returncode}); see {run_dir / 'stderr.log'}")
    return epochs, end


def report(interval: float, epochs: list[Epoch], end: dict) -> dict:
    on = [e for e in epochs if e.sampled]
    off = [e for e in epochs if not e.sampled]
    # Neighbouring pairs (1,2), (3,4), ...: each pair has one epoch of each kind, in ABBA order.
    pairs = [
        (a if a.sampled else b, b if a.sampled else a)
        for a, b in zip(epochs[::2], epochs[1::2], strict=False)
        if a.sampled != b.sampled
    ]
    pair_ratios = [s.images_per_second / f.images_per_second for s, f in pairs]
    ratio = statistics.median(e.images_per_second for e in on) / statistics.median(
        e.images_per_second for e in off
    )
    cpu_per_second = sum(e.sampler_cpu for e in on) / sum(e.wall for e in on)
    row = {
        "interval": interval,
        "epochs": len(epochs),
        "on_median_ips": statistics.median(e.images_per_second for e in on),
        "off_median_ips": statistics.median(e.images_per_second for e in off),
        "ratio_medians": ratio,
        "ratio_pairs_median": statistics.median(pair_ratios),
        "ratio_pairs_min": min(pair_ratios),
        "ratio_pairs_max": max(pair_ratios),
        "sampler_cpu_per_second": cpu_per_second,
        "sampler_cpu_total": end.get("cpu_seconds"),
        "samples": end.get("samples"),
    }
    print(
        f"interval {interval:>6.3f} s: on {row['on_median_ips']:8.1f} img/s, off {row['off_median_ips']:8.1f}"
        f" img/s, ratio {ratio:.4f} (pairs: median {row['ratio_pairs_median']:.4f}, "
        f"{row['ratio_pairs_min']:.3f}–{row['ratio_pairs_max']:.3f}), sampler CPU "
        f"{1000 * cpu_per_second:.2f} ms/s ({100 * cpu_per_second:.2f}% of a core)",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.nice(10)
    python, where = envs.python_for("pytorch", None)
    if python is None:
        raise SystemExit(f"no PyTorch environment: {where} (bench env setup pytorch)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
        for i, text in enumerate(args.intervals.split(",")):
            interval = float(text)
            config = make_config(args, interval)
            epochs, end = measure(config, python, Path(tmp) / f"run{i}", args)
            rows.append(report(interval, epochs, end))
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

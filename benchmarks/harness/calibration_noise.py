"""How far apart two calibrations of an unchanged machine are, and what one costs.

bench's reports call two calibrations (profiler/calibration.py) of the same speed when their
speed, the geometric mean of the three figures' ratios, lies within TOLERANCE (35 %)
(orchestrator/report/notes/calibration.py). This takes
N calibrations back to back, the way `bench run` takes them (orchestrator.launch.calibration.take:
its own process, one thread), and prints for each figure the median, the range, and the largest
ratio between any two of them: the noise the tolerance has to stand above. Then, with
``--load``, the same again beside a busy loop on every core: what a machine shared with other
work does to a calibration of one thread.

    .venv/bin/python -m benchmarks.harness.calibration_noise
    .venv/bin/python -m benchmarks.harness.calibration_noise --count 20 --load

A benchmark, not a test: it always exits 0 once it has measured. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import sys
import time

from orchestrator.launch import calibration


def _spin(stop: float) -> None:
    while time.monotonic() < stop:
        pass


def series(count: int) -> list[dict[str, float]]:
    out = []
    for _ in range(count):
        figures = calibration.take()
        if "error" in figures:
            raise SystemExit(f"calibration failed: {figures['error']}")
        out.append(figures)
    return out


def summary(name: str, taken: list[dict[str, float]]) -> None:
    print(f"{name}: {len(taken)} calibrations")
    for key in calibration.FIGURES:
        values = [t[key] for t in taken]
        apart = max(values) / min(values) - 1
        print(
            f"  {key:14s} median {statistics.median(values):8.2f}  range {min(values):.2f}-{max(values):.2f}"
            f"  largest apart {apart * 100:5.1f} %"
        )
    # The reports' verdict reads the speed: the geometric mean of the three figures' ratios, here to
    # each figure's median over the series (orchestrator/report/notes/calibration.py).
    medians = {k: statistics.median(t[k] for t in taken) for k in calibration.FIGURES}
    speeds = [
        math.prod(t[k] / medians[k] for k in calibration.FIGURES) ** (1 / len(calibration.FIGURES))
        for t in taken
    ]
    apart = max(speeds) / min(speeds) - 1
    print(f"  speed          range {min(speeds):.3f}-{max(speeds):.3f}  largest apart {apart * 100:5.1f} %")
    seconds = [t["seconds"] for t in taken]
    inside = f"median {statistics.median(seconds):.2f}  max {max(seconds):.2f}"
    print(f"  seconds        {inside} (inside the process)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--load", action="store_true", help="then again beside a busy loop on every core")
    args = parser.parse_args()
    began = time.monotonic()
    quiet = series(args.count)
    wall = (time.monotonic() - began) / args.count
    summary("quiet", quiet)
    print(f"  wall per calibration, process start included: {wall:.2f} s")
    if args.load:
        cores = multiprocessing.cpu_count()
        stop = time.monotonic() + 3600
        spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(cores)]
        for p in spinners:
            p.start()
        try:
            summary(f"beside {cores} busy processes", series(args.count))
        finally:
            for p in spinners:
                p.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A calibration: the same fixed work, timed the same way at the start and end of every sweep, so
two sweeps (or the two ends of one) can say whether their machine ran at the same speed.

Why: on this project's 2-vCPU VM, PyTorch's fp32 ResNet50 step took 11.1 s one day and 5.5 s the
next, both runs quiet by bench's own check (no other load, no steal): what changed was outside the
VM (docs/fairness.md, "The same machine, twice as fast"). Figures of two such sessions must not be
set side by side, and nothing in the runs themselves says so. A fixed piece of work does.

Three figures, each the best of REPS timings, on one thread (the launcher sets the thread
variables to 1 before numpy loads its BLAS):

- ``python_mops``: millions of iterations a second of a pure-Python integer loop (the
  interpreter, one core's integer speed);
- ``matmul_gflops``: float32 GFLOP/s of numpy's matrix product (the BLAS every framework's
  dense layers resemble, one core's vector units);
- ``memory_gbps``: GB/s of a 64 MiB array copied (read and write counted), past the caches.

Run as ``python -m profiler.calibration`` with bench's own interpreter; prints one JSON object.
About a second on the 2-vCPU machine (docs/performance.md).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from typing import Any

REPS = 7
LOOP = 1_000_000
MATMUL_N = 384
MATMUL_TIMES = 8
COPY_BYTES = 64 << 20
COPY_TIMES = 4


FIGURES = ("python_mops", "matmul_gflops", "memory_gbps")
LARGEST = 1e9  # no figure of the three comes near it on any machine


def figure(value: Any) -> float | None:
    """A figure as read back (the calibration's output, a database row): a finite number above 0
    and below LARGEST, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0 < value < LARGEST else None


def _timed(work: Any) -> list[float]:
    work()  # once untimed: first touch of the memory, the BLAS's own start
    out = []
    for _ in range(REPS):
        start = time.perf_counter()
        work()
        out.append(time.perf_counter() - start)
    return out


def _loop() -> None:
    x = 0
    for i in range(LOOP):
        x = (x * 31 + i) & 0xFFFF


def measure() -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
    b = rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32)
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)

    def matmul() -> None:
        for _ in range(MATMUL_TIMES):
            np.matmul(a, b)

    def copy() -> None:
        for _ in range(COPY_TIMES):
            np.copyto(dst, src)

    began = time.perf_counter()
    figures: dict[str, Any] = {}
    for name, work, amount in (
        ("python_mops", _loop, LOOP / 1e6),
        ("matmul_gflops", matmul, 2 * MATMUL_N**3 * MATMUL_TIMES / 1e9),
        ("memory_gbps", copy, 2 * COPY_BYTES * COPY_TIMES / 1e9),
    ):
        times = _timed(work)
        # The best of the timings: a pause of the VM or a neighbour's burst lengthens some of them
        # (back to back on the quiet machine, the medians of the Python loop and of the copy lay up
        # to 18 % and 43 % apart, docs/performance.md), while a machine that runs slower as a whole
        # lengthens every one, the best included.
        figures[name] = amount / min(times)
        # How far the timings spread: (max - min) / median, so a noisy calibration says so.
        figures[name.rsplit("_", 1)[0] + "_spread"] = (max(times) - min(times)) / statistics.median(times)
    figures["seconds"] = time.perf_counter() - began
    figures["reps"] = REPS
    return figures


def main() -> int:
    print(json.dumps(measure(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The report of the in-process comparison (bare_common.paired), for benchmarks/harness/overhead.py.

Every pass takes the same steps in chunks, each chunk three times in turn: by the runner's loop
body (the adapter's step and the step event), by the adapter's step alone and by the bare step.
The adapter's step is train_step, or infer_step for task inference (the output's "step" says which).
The three chunks of one turn ran a fraction of a second apart, so a statistic of per-turn
ratios or differences cancels the machine's slower swings, which the means of whole passes keep.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

SIDES = ("harness", "adapter", "bare")
RESAMPLES = 2000  # bootstrap resamples of the turns, for the 95% intervals


def report(out: dict[str, Any], quiet_load: float) -> None:
    """Print the per-pass table and the summaries (all passes, and the quiet ones if they differ)."""
    runs, loads, passes = out["paired"], out["other_load"], len(out["other_load"])
    step = out.get("step", "train_step")
    print(
        f"\nin one process, {passes} passes of {out['steps']} steps in chunks of {out['chunk']}, each chunk"
    )
    print(f"taken in turn by the runner's loop body (adapter.{step} + step event), {step} alone,")
    print("and bare:")
    print(f"\n| pass | harness ms/step | {step} ms/step | bare ms/step | harness/bare | other load |")
    print("|---|---|---|---|---|---|")
    for i, (h, a, b, load) in enumerate(
        zip(runs["harness"], runs["adapter"], runs["bare"], loads, strict=True)
    ):
        hm, am, bm = (statistics.mean(v) for v in (h, a, b))
        print(f"| {i + 1} | {hm * 1e3:.3f} | {am * 1e3:.3f} | {bm * 1e3:.3f} | {hm / bm:.4f} | {load:.2f} |")
    summary(runs, range(passes), "all passes", step)
    quiet = [i for i, load in enumerate(loads) if load < quiet_load]
    if 0 < len(quiet) < passes:
        summary(runs, quiet, f"quiet passes only, other load < {quiet_load} cores", step)
    if len(quiet) < passes:
        print(
            f"WARNING: {passes - len(quiet)} of {passes} passes ran beside other load "
            f">= {quiet_load} cores: their figures are noisy"
        )


def summary(
    runs: dict[str, list[list[float]]], passes: Sequence[int], what: str, step: str = "train_step"
) -> None:
    h, a, b = ([t for i in passes for t in runs[side][i]] for side in SIDES)
    print(f"  {what}, {len(b)} chunks each; median paired differences:")
    print(f"    {step} - bare {median_difference(a, b)}")
    print(f"    step event (harness - {step}) {median_difference(h, a)}")
    print(f"    harness - bare {median_difference(h, b)}")
    per_turn, means = interval(h, b, median_ratio), interval(h, b, mean_ratio)
    print(f"  paired ratio harness/bare: median of per-turn ratios {per_turn}; of means {means}")
    print(f"    (of medians {statistics.median(h) / statistics.median(b):.4f})")


def median_difference(x: list[float], y: list[float]) -> str:
    return f"{statistics.median([u - v for u, v in zip(x, y, strict=True)]) * 1e6:+.1f} us/step"


def median_ratio(x: list[float], y: list[float]) -> float:
    return statistics.median([u / v for u, v in zip(x, y, strict=True)])


def mean_ratio(x: list[float], y: list[float]) -> float:
    return statistics.mean(x) / statistics.mean(y)


def interval(x: list[float], y: list[float], stat: Callable[[list[float], list[float]], float]) -> str:
    """stat and its 95% bootstrap interval, resampling whole turns (the pairs stay together)."""
    rng, n = random.Random(0), len(x)
    values = []
    for _ in range(RESAMPLES):
        picks = [rng.randrange(n) for _ in range(n)]
        values.append(stat([x[i] for i in picks], [y[i] for i in picks]))
    values.sort()
    low, high = values[int(0.025 * RESAMPLES)], values[int(0.975 * RESAMPLES) - 1]
    return f"{stat(x, y):.4f} ({low:.4f}-{high:.4f})"

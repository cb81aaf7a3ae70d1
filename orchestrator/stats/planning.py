"""How many runs a configuration needs, and the smallest difference some runs could detect: one
formula read both ways.

On the log scale a run's figure is its configuration's true time plus the process's own luck,
spread σ = √ln(1 + CV²) for a between-run coefficient of variation CV (log-normal). A ratio of two
cells is then a difference of means on that scale, and the two-sample normal calculation at level α
(two-sided) and power 1 − β gives, with n runs a side,

    detectable difference δ = (z(1 − α/2) + z(1 − β)) · σ · √(1/m + 1/n) · √(π/3)
    runs needed          n = ⌈ 2 (z(1 − α/2) + z(1 − β))² σ² / ln(1 + d)² · π/3 ⌉

√(π/3) (π/3 ≈ 1.047 more runs) because the verdict comes from the Mann–Whitney test, whose
asymptotic efficiency against the t-test is 3/π on normal data. A difference is reported as a
relative one, e^δ − 1 (5 % = 1.05× the time). The planner never says fewer runs than the exact test
needs to reach α at all (mannwhitney.smallest_p: 4 a side at 5 %), and the detectable difference of
runs below that floor is None: no difference, however large, could be called. Up to exactpower.SMALL (20)
runs a side, where the exact test's steps make the formula optimistic, both read the test's power
from exactpower.py's simulation of the same model instead of the formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from orchestrator.errors import StatsError
from orchestrator.stats import exactpower, mannwhitney, sample

ALPHA = 0.05
POWER = 0.8
DIFFERENCE = 0.05
MOST_RUNS = 10_000  # a plan past this says the difference cannot be told apart on this machine

# Mann–Whitney's asymptotic relative efficiency against the t-test on normal data is 3/π.
EFFICIENCY = 3 / math.pi


def _z(alpha: float, power: float) -> float:
    if not 0 < alpha < 1:
        raise StatsError(f"level {alpha!r}: it must lie between 0 and 1")
    if not 0 < power < 1:
        raise StatsError(f"power {power!r}: it must lie between 0 and 1")
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def _positive(value: float, what: str, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StatsError(f"{what} {value!r}: not a finite number")
    if value < 0 or (value == 0 and not zero_ok):
        raise StatsError(f"{what} {value!r}: it must be {'at least 0' if zero_ok else 'above 0'}")
    return float(value)


def fewest_runs(alpha: float = ALPHA) -> int:
    """The fewest runs a side at which the exact Mann–Whitney test can reach `alpha` at all."""
    n = 2
    while mannwhitney.smallest_p(n, n) > alpha:
        n += 1
    return n


def runs_needed(cv: float, difference: float = DIFFERENCE, alpha: float = ALPHA, power: float = POWER) -> int:
    """Runs per configuration to detect a relative `difference` (0.05: 5 %) between two
    configurations whose runs spread with coefficient of variation `cv` (0.1: 10 %)."""
    z = _z(alpha, power)
    sigma = math.sqrt(math.log1p(_positive(cv, "coefficient of variation", zero_ok=True) ** 2))
    delta = math.log1p(_positive(difference, "difference to detect"))
    needed = math.ceil(2 * z**2 * sigma**2 / delta**2 / EFFICIENCY)
    if needed <= exactpower.SMALL:
        if sigma == 0:
            return fewest_runs(alpha)
        for n in range(fewest_runs(alpha), exactpower.SMALL + 1):
            if exactpower.smallest_shift(n, n, alpha, power) <= delta / sigma:
                return n
        return exactpower.SMALL + 1
    if needed > MOST_RUNS:
        raise StatsError(
            f"telling {difference:.1%} apart at a {cv:.1%} spread between runs takes more than "
            f"{MOST_RUNS} runs a configuration: reduce the spread first"
        )
    return max(needed, fewest_runs(alpha))


def detectable(
    log_spread: float | None, m: int, n: int, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest relative difference m and n runs of spread `log_spread` (σ of the runs' log
    figures) could detect; None where the runs cannot detect any (too few, or no spread known)."""
    z = _z(alpha, power)
    if log_spread is None or mannwhitney.smallest_p(m, n) > alpha:
        return None
    if max(m, n) <= exactpower.SMALL:
        return math.expm1(exactpower.smallest_shift(m, n, alpha, power) * log_spread)
    return math.expm1(z * log_spread * math.sqrt(1 / m + 1 / n) / math.sqrt(EFFICIENCY))


def log_spread(cells: Sequence[sample.Cell]) -> float | None:
    """The pooled standard deviation of the runs' log figures within each cell (degrees of freedom:
    runs − 1 per cell); None where no cell has two runs."""
    squares = 0.0
    freedom = 0
    for runs in cells:
        logs = [math.log(f) for f in sample.figures(runs)]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        freedom += len(logs) - 1
    return math.sqrt(squares / freedom) if freedom else None


def between_run_cv(cells: Sequence[Sequence[sample.RunLike]]) -> float | None:
    """Earlier runs' coefficient of variation between processes, pooled over their cells (each
    cell's own centre removed), as the planner takes it; None where no cell has two runs."""
    checked = [sample.cell(runs, f"cell {i + 1}") for i, runs in enumerate(cells)]
    spread = log_spread(checked)
    return None if spread is None else math.sqrt(math.expm1(spread**2))

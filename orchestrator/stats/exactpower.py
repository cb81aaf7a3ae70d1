"""The exact Mann–Whitney test's power over few runs, where the normal formula (planning.py)
promises more than the test delivers: its p-values come in steps (4 runs against 4 can only reject
at U = 0 or 16), so at a plan of 4 runs the formula's 80 % is really about 63 % (simulated:
docs/reports.md). Up to SMALL runs a side, planning.py therefore asks this module instead.

The power is estimated on the log scale of the planning model (each run's log figure normal with
spread σ, B's shifted by δ), over TRIALS draws that are the same for every shift (common random
numbers, from a seed fixed per m and n): the estimate is deterministic, and rises with the shift,
so the smallest detectable shift can be found by bisection.
"""

from __future__ import annotations

import functools

import numpy as np

from orchestrator.stats import mannwhitney

SMALL = 20  # runs a side up to which the power is simulated (the formula is close enough above)
TRIALS = 4000


@functools.lru_cache(maxsize=4)  # a bisection asks one pair many times; 1.3 MB a pair at most
def _draws(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1009 * m + n)
    return rng.standard_normal((TRIALS, m)), rng.standard_normal((TRIALS, n))


def exact_power(m: int, n: int, shift: float, alpha: float) -> float:
    """The share of trials in which the exact test rejects, B's runs `shift` σ slower than A's."""
    a, b = _draws(m, n)
    u = (b[:, None, :] + shift < a[:, :, None]).sum(axis=(1, 2))
    reject = np.asarray(mannwhitney.rejections(m, n, alpha))
    return float(reject[u].mean())


@functools.cache  # it depends on m, n, alpha and power alone: a table's comparisons share it
def smallest_shift(m: int, n: int, alpha: float, power: float) -> float:
    """The smallest shift, in σ, the exact test detects with `power` over m and n runs (which can
    reach alpha at all: the caller checks mannwhitney.smallest_p first)."""
    low, high = 0.0, 1.0
    # Far enough, every trial has U = 0, which the test rejects wherever it can reach alpha at all.
    while exact_power(m, n, high, alpha) < power and high < 2**20:
        low, high = high, high * 2
    for _ in range(40):  # to 2⁻⁴⁰ of the bracket: far below any difference a report prints
        middle = (low + high) / 2
        if exact_power(m, n, middle, alpha) >= power:
            high = middle
        else:
            low = middle
    return high

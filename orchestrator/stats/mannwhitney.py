"""The Mann–Whitney U test on two cells' run figures, two-sided.

Why this test: it asks whether one configuration's runs tend to take less time than the other's,
from their order alone, so it needs no assumption about the shape of the between-process spread
(which on bench's machines is lumpy: a process lands on one of a few speeds), and one wild run moves
it no more than any other run. asv's `compare` uses it for the same reason.

Exact where it can be: with no tie between the two cells and at most 30 runs a side, the p-value
is counted from U's exact distribution under "no difference" (every split of the pooled runs
equally likely). Otherwise (ties, which real timings rarely have, or many runs) it is the normal
approximation with the tie correction and a continuity correction. The exact test has a floor: the
smallest two-sided p-value over m and n runs is 2 / C(m + n, m), so 3 runs against 3 (0.1) can
never reach 5 %, and 4 against 4 (0.029) can.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

EXACT_UP_TO = 30  # runs a side; U's distribution then has at most 901 values, counted in a blink


@dataclass(frozen=True)
class Test:
    """U (pairs where B's run took less time, ties counting half), the two-sided p-value, and
    which computation gave it."""

    u: float
    p_value: float
    method: str


def u_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(1.0 if y < x else 0.5 if y == x else 0.0 for x in a for y in b)


@functools.cache
def _counts(m: int, n: int) -> tuple[int, ...]:
    """How many orderings of m A-runs and n B-runs give each U = 0 … m·n, by the recurrence on
    where the largest value falls (it is an A's: it beats all n B's; a B's: it beats none)."""
    if m == 0 or n == 0:
        return (1,)
    with_a = _counts(m - 1, n)  # the largest is an A's: U grows by n
    with_b = _counts(m, n - 1)
    found = [0] * (m * n + 1)
    for u, ways in enumerate(with_a):
        found[u + n] += ways
    for u, ways in enumerate(with_b):
        found[u] += ways
    return tuple(found)


def smallest_p(m: int, n: int) -> float:
    """The smallest two-sided p-value the exact test can give with m and n runs."""
    return min(1.0, 2 / math.comb(m + n, m))


def _exact(u: float, m: int, n: int) -> float:
    counts = _counts(m, n)
    total = math.comb(m + n, m)
    at_most = sum(counts[: int(u) + 1])
    at_least = sum(counts[int(u) :])
    return min(1.0, 2 * min(at_most, at_least) / total)


def _normal(u: float, a: Sequence[float], b: Sequence[float]) -> float:
    m, n = len(a), len(b)
    pooled = Counter([*a, *b])
    size = m + n
    ties = sum(t**3 - t for t in pooled.values())
    variance = m * n / 12 * ((size + 1) - ties / (size * (size - 1)))
    if variance <= 0:
        return 1.0  # every run the same figure: nothing to tell apart
    z = max(0.0, abs(u - m * n / 2) - 0.5) / math.sqrt(variance)
    return min(1.0, 2 * (1 - NormalDist().cdf(z)))


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> Test:
    """The two-sided test of two cells' run figures (checked by the caller: finite, positive)."""
    u = u_statistic(a, b)
    tied = bool(set(a) & set(b))
    if not tied and len(a) <= EXACT_UP_TO and len(b) <= EXACT_UP_TO:
        return Test(u, _exact(u, len(a), len(b)), "Mann-Whitney U, exact")
    return Test(u, _normal(u, a, b), "Mann-Whitney U, normal approximation with tie correction")


def rejections(m: int, n: int, alpha: float) -> tuple[bool, ...]:
    """For each U = 0 … m·n, whether the exact two-sided test rejects "no difference" at `alpha`
    (the test's critical region, for computing its power)."""
    counts = _counts(m, n)
    total = math.comb(m + n, m)
    below = 0
    above = total
    found = []
    for ways in counts:
        below += ways  # P(U ≤ u) · total
        found.append(2 * min(below, above) / total <= alpha)
        above -= ways  # P(U ≥ u + 1) · total, for the next u
    return tuple(found)

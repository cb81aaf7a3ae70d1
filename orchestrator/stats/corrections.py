"""Corrections for multiple comparisons: a table of comparisons tests many pairs at once, and at 5 %
each, one in twenty identical pairs would be called different by chance.

Both return adjusted p-values in the order given; a comparison is called different where its
adjusted p-value is below the level (5 %), and the output names the correction used.

- **Holm** (step-down Bonferroni) bounds the chance of calling *any* identical pair different
  (family-wise error) at the level, whatever the dependence between the tests: the safe choice for a
  short table of verdicts a reader will act on one by one.
- **Benjamini–Hochberg** bounds the expected *share* of false calls among those called different
  (false discovery rate), for independent or positively dependent tests: more power over a long
  table (a whole zoo) where a few false calls among many true ones are acceptable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from orchestrator.errors import StatsError


def _checked(p_values: Sequence[float]) -> list[float]:
    found = []
    for i, p in enumerate(p_values):
        if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p) or not 0 <= p <= 1:
            raise StatsError(f"p-value {i + 1}: {p!r} is not a probability")
        found.append(float(p))
    return found


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values: the i-th smallest times (m − i + 1), made non-decreasing, at most 1."""
    p = _checked(p_values)
    m = len(p)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: p[k])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg's adjusted p-values: the i-th smallest times m / i, made non-decreasing
    from the largest down, at most 1."""
    p = _checked(p_values)
    m = len(p)
    adjusted = [0.0] * m
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(range(m), key=lambda k: p[k])))):
        running = min(running, m / (rank + 1) * p[i])
        adjusted[i] = running
    return adjusted


# The name each correction is printed under, and the function.
CORRECTIONS: dict[str, tuple[str, Callable[[Sequence[float]], list[float]]]] = {
    "holm": ("Holm", holm),
    "bh": ("Benjamini-Hochberg", benjamini_hochberg),
}


def correct(p_values: Sequence[float], method: str) -> tuple[str, list[float]]:
    """The correction's printed name and the adjusted p-values; `method` is "holm" or "bh"."""
    if method not in CORRECTIONS:
        raise StatsError(f"no correction {method!r}: choose {' or '.join(CORRECTIONS)}")
    name, adjust = CORRECTIONS[method]
    return name, adjust(p_values)

"""The claim kinds that judge a shape or a band rather than an order: `similar` (two items about the
same, within a stated factor), `spread` (every item within a stated factor of the fastest) and
`rises_beyond` (the metric has a minimum inside the axis's range and rises after it).

claims.py owns the kinds that rank (fastest, order, ratio, rises_with, resource) and the rules every
verdict shares; these reuse them (its pairs test, its bootstrap draws, its verdict words), so a
band is never easier to claim than an order:

- An equivalence ("about the same", "within 1.9×") cannot rest on a test that failed to tell two
  cells apart: a failed test says the runs were too few as readily as that the cells agree. So
  `similar` and `spread` decide by the 95 % bootstrap interval alone, against the band the claim
  states: the whole interval inside the band holds, the whole interval outside refutes, an interval
  across the band's edge is not shown at this n. A cell of one run has no interval, so it never holds.
- `rises_beyond` picks its minimum from the same runs it then tests, which would make a rise after
  the minimum look real more often than it is. Its comparisons are therefore every ordered pair of
  levels in the series, Holm-corrected together: whatever pair the data pick, the chance that any
  pair passes by noise stays at 5 %.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from orchestrator.stats import bootstrap, sample
from orchestrator.studies import claims, measured
from orchestrator.studies.claims import AGAINST, HOLDS, NOISE, UNCHECKABLE, Runs, Verdict
from orchestrator.studies.spec import RATE_METRICS, TIME_METRICS, Claim

LEVEL = 0.95


def _band(threshold: float) -> tuple[float, float]:
    return 1 / threshold, threshold


def _in_band(low: float | None, high: float | None, band: tuple[float, float]) -> str:
    """The interval [low, high] against the band: wholly inside holds, wholly outside refutes."""
    if low is None or high is None:
        return NOISE  # one run a side: no spread between processes to judge by
    if band[0] <= low and high <= band[1]:
        return HOLDS
    if high < band[0] or low > band[1]:
        return AGAINST
    return NOISE


def _few(n: int) -> str:
    """The caveat every interval-only verdict carries below full coverage (bootstrap.py)."""
    if n == 1:
        return "a cell of one run has no interval, so no band can be shown: more runs are needed"
    if n < bootstrap.FULL_COVERAGE_RUNS:
        return (
            f"over {n} runs the 95 % interval holds the truth less often than it says "
            f"(from {bootstrap.FULL_COVERAGE_RUNS} runs on it does: docs/reports.md)"
        )
    return ""


def similar(claim: Claim, runs: Runs) -> Verdict:
    """A's figure over B's, per column, inside [1/within, within]: the interval of the ratio decides."""
    a, b = claim.subjects
    within = claim.threshold or 1.0
    band = _band(within)
    verdicts: list[str] = []
    lines: list[str] = []
    fewest = 0
    for column, items in claims._by_column(runs):
        if a not in items or b not in items:
            continue
        ratio = bootstrap.ratio(items[b], items[a])  # B/A of (b, a): a over b
        name = f"{column}: {a}/{b}" if column != measured.ALL else f"{a}/{b}"
        verdicts.append(_in_band(ratio.low, ratio.high, band))
        lines.append(claims._ratio_text(name, ratio, f"; the band {band[0]:.3g}–{band[1]:.3g}"))
        fewest = min(fewest or len(items[a]), len(items[a]), len(items[b]))
    if not verdicts:
        return Verdict(claim, UNCHECKABLE, note=f"no column holds both {a} and {b}")
    return Verdict(claim, claims.combine(verdicts), tuple(lines), _few(fewest))


def spread(claim: Claim, runs: Runs) -> Verdict:
    """Per column, the slowest item's figure over the fastest's, its interval drawn draw by draw
    (each cell resampled on its own, the maximum and minimum taken in each draw), below `within`."""
    within = claim.threshold or 1.0
    # The largest figure over the smallest: for a time the slowest over the fastest, for a rate the
    # reverse; the same ratio either way.
    what = "fastest/slowest" if claim.higher_is_better else "slowest/fastest"
    if claim.metric not in TIME_METRICS + RATE_METRICS:
        what = "largest/smallest"
    verdicts: list[str] = []
    lines: list[str] = []
    fewest = 0
    for column, items in claims._by_column(runs):
        if len(items) < 2:
            continue
        cells = {item: sample.cell(figures, f"{item} {column}") for item, figures in sorted(items.items())}
        centres = {item: sample.cell_figure(cell) for item, cell in cells.items()}
        low_item, high_item = min(centres, key=centres.__getitem__), max(centres, key=centres.__getitem__)
        centre = centres[high_item] / centres[low_item]
        n = min(len(cell) for cell in cells.values())
        low: float | None = None
        high: float | None = None
        if n > 1:
            stack = np.stack([claims._draws(cell) for cell in cells.values()])
            ratios = stack.max(axis=0) / stack.min(axis=0)
            low, high = (float(x) for x in np.quantile(ratios, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2]))
        verdicts.append(_in_band(low, high, (0.0, within)))
        where = f"{column}: " if column != measured.ALL else ""
        interval = f" [{low:.3g}–{high:.3g}]" if low is not None and high is not None else ""
        lines.append(
            f"{where}{what} ({high_item}/{low_item}) over {', '.join(cells)} {centre:.3g}{interval}, "
            f"n={n} (the fewest runs of a cell); the band up to {within:g}"
        )
        fewest = min(fewest or n, n)
    if not verdicts:
        return Verdict(claim, UNCHECKABLE, note=f"no column holds two {claim.items}s with runs")
    return Verdict(claim, claims.combine(verdicts), tuple(lines), _few(fewest))


def rises_beyond(claim: Claim, runs: Runs) -> Verdict:
    """Per series (item and column): the level with the lowest figure, and whether a later level
    is told apart above it (holds), or the largest level is told apart below an earlier one with no
    rise anywhere (the metric still falls at the top of the range: does not hold)."""
    series: dict[tuple[str, str], dict[str, list[float]]] = {}
    for (column, item, level), figures in runs.items():
        series.setdefault((column, item), {})[level] = figures
    pairs: list[claims.Pair] = []
    # Each series: its name, its levels' runs, the levels in order, the index of its first pair.
    spans: list[tuple[str, dict[str, list[float]], list[str], int]] = []
    for (column, item), levels in sorted(series.items()):
        ordered = sorted(levels, key=claims.level_key)
        if len(ordered) < 2:
            continue
        name = f"{item} {column}" if column != measured.ALL else item
        spans.append((name, levels, ordered, len(pairs)))
        for low, high in combinations(ordered, 2):
            pairs.append((f"{name}: {claim.axis} {high}/{low}", levels[low], levels[high], True))
    if not pairs:
        return Verdict(claim, UNCHECKABLE, note=f"no series with two values of {claim.axis}")
    verdicts, lines, note = claims._pairs(pairs)
    found: list[str] = []
    for name, levels, ordered, start in spans:
        centres = {lv: sample.cell_figure(sample.cell(levels[lv], name)) for lv in ordered}
        lowest = min(ordered, key=lambda lv: (centres[lv], claims.level_key(lv)))
        at = {pair: start + i for i, pair in enumerate(combinations(ordered, 2))}
        after = [verdicts[at[(lowest, later)]] for later in ordered[ordered.index(lowest) + 1 :]]
        into_last = [verdicts[at[(earlier, ordered[-1])]] for earlier in ordered[:-1]]
        if HOLDS in after:
            found.append(HOLDS)
        elif lowest == ordered[-1] and AGAINST in into_last:
            found.append(AGAINST)
        else:
            found.append(NOISE)
        lines.append(f"{name}: the lowest figure at {claim.axis} {lowest} (of {', '.join(ordered)})")
    return Verdict(claim, claims.combine(found), tuple(lines), note)


KINDS: dict[str, claims.Judge] = {
    "similar": similar,
    "spread": spread,
    "rises_beyond": rises_beyond,
}
# Every kind a study may use: claims.py's and these. The report judges through here, so claims.py
# never imports this module (it imports claims.py: one direction, no cycle).
ALL: dict[str, claims.Judge] = {**claims.KINDS, **KINDS}


def judge(claim: Claim, cells: Sequence[measured.Cell]) -> Verdict:
    """Any claim's verdict, whichever module holds its kind."""
    return claims.judge(claim, cells, ALL)

"""A cell's figure with its interval, and the ratio of two cells with its interval.

The interval is a 95 % percentile bootstrap that resamples at both levels the figure is made of
(hierarchical): runs with replacement, and within each drawn run its epochs with replacement, that
run's figure the median of the drawn epochs, the cell's the median of its drawn runs' figures. The
runs level carries what matters, the speed each worker process lands on; resampling the epochs too
adds each run's own noise once more, which makes the interval a little wider than the truth, never
narrower (the conservative side for a claim that one framework is faster).

Percentile, not BCa: BCa's acceleration comes from a jackknife, which over 3 to 10 runs (what a
study can afford) is itself too noisy to correct anything, and the percentile interval of a ratio
is the inverse of the interval of the inverse ratio, so "B/A" and "A/B" never disagree. Its known
limit is stated in docs/reports.md: over n runs the median takes few distinct values, so at small n
the ends are order statistics of the runs' figures.

One run gives its figure and no interval: the epochs of one process cannot see how far another
process lands. Resampling is deterministic given `seed`, and the stream depends on the cells'
contents only (sample.content_seed), never on their place in a table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.errors import StatsError
from orchestrator.stats import sample

RESAMPLES = 2000
LEVEL = 0.95
# Below this many runs the 95 % interval holds the true figure less often than it says (simulated,
# docs/reports.md: 56 % of the time at 2 runs, 79 % at 3, 90 % at 4, 94 % from 5 on): the median of
# few runs takes few values. The interval is still given, for the reader to see the spread; a
# report says it is narrow.
FULL_COVERAGE_RUNS = 5


@dataclass(frozen=True)
class Estimate:
    """A figure, its interval (None, None where there is none), and the runs it rests on."""

    centre: float
    low: float | None
    high: float | None
    n: int

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def undercovers(self) -> bool:
        """An interval over too few runs to hold its stated level (FULL_COVERAGE_RUNS)."""
        return self.has_interval and self.n < FULL_COVERAGE_RUNS

    def contains(self, value: float) -> bool:
        """Whether the interval holds `value`; without an interval, nothing is excluded."""
        if self.low is None or self.high is None:
            return True
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Ratio:
    """B's figure over A's (below 1: B takes less time, B is faster), its interval, both n."""

    centre: float
    low: float | None
    high: float | None
    n_a: int
    n_b: int

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def excludes_one(self) -> bool:
        """Whether the interval tells the two cells apart; without one, they cannot be."""
        if self.low is None or self.high is None:
            return False
        return self.high < 1 or self.low > 1


def distribution(runs: sample.Cell, rng: np.random.Generator, resamples: int = RESAMPLES) -> np.ndarray:
    """`resamples` bootstrap copies of the cell's figure (runs, then epochs within each run)."""
    runs = tuple(sorted(runs))  # the draw follows the runs' contents, not the order they came in
    n = len(runs)
    picks = rng.integers(0, n, size=(resamples, n))
    drawn = np.empty((resamples, n))
    for i, one in enumerate(runs):
        where = picks == i
        count = int(where.sum())
        if count == 0:
            continue
        if len(one) == 1:
            drawn[where] = one[0]
            continue
        # Only the draws that picked this run resample its epochs: the work is resamples × n × epochs.
        epochs = np.asarray(one)
        idx = rng.integers(0, len(one), size=(count, len(one)))
        drawn[where] = np.median(epochs[idx], axis=1)
    return np.median(drawn, axis=1)


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def _check(resamples: int, level: float) -> None:
    if resamples < 100:
        raise StatsError(f"{resamples} resamples: at least 100 are needed for a percentile interval")
    if not 0 < level < 1:
        raise StatsError(f"interval level {level!r}: it must lie between 0 and 1")


def cell_estimate(
    runs: Sequence[sample.RunLike],
    seed: int = 0,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    positive: bool = True,
) -> Estimate:
    """The cell's figure (median over runs of each run's figure) and its bootstrap interval.
    `positive=False` for figures that are not times (an accuracy may be 0)."""
    _check(resamples, level)
    checked = sample.cell(runs, positive=positive)
    centre = sample.cell_figure(checked)
    if len(checked) == 1:
        return Estimate(centre, None, None, 1)
    rng = np.random.default_rng(sample.content_seed(seed, checked))
    low, high = _percentiles(distribution(checked, rng, resamples), level)
    return Estimate(centre, low, high, len(checked))


def _ratio(a: sample.Cell, b: sample.Cell, seed: int, resamples: int, level: float) -> Ratio:
    centre = sample.cell_figure(b) / sample.cell_figure(a)
    if len(a) == 1 or len(b) == 1:
        # A single run's figure has no spread to resample: an interval would pretend it is exact.
        return Ratio(centre, None, None, len(a), len(b))
    # One stream for the pair, drawn in the cells' content order: (A, B) and (B, A) resample alike,
    # and two cells of equal contents still get independent draws.
    first, second = sorted((a, b))
    rng = np.random.default_rng(sample.content_seed(seed, first, second))
    draws = {0: distribution(first, rng, resamples), 1: distribution(second, rng, resamples)}
    on_a, on_b = (draws[0], draws[1]) if first is a else (draws[1], draws[0])
    low, high = _percentiles(on_b / on_a, level)
    return Ratio(centre, low, high, len(a), len(b))


def ratio(
    a: Sequence[sample.RunLike],
    b: Sequence[sample.RunLike],
    seed: int = 0,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> Ratio:
    """B/A, the two cells' figures' ratio, with its bootstrap interval (each cell resampled on its
    own, since their runs are independent processes)."""
    _check(resamples, level)
    return _ratio(sample.cell(a, "cell A"), sample.cell(b, "cell B"), seed, resamples, level)


def fastest(cells: Mapping[str, sample.Cell]) -> str:
    """The key of the cell with the lowest figure (ties: the lesser contents, then the key)."""
    return min(cells, key=lambda k: (sample.cell_figure(cells[k]), cells[k], k))


def checked_cells(cells: Mapping[str, Sequence[sample.RunLike]]) -> dict[str, sample.Cell]:
    if not cells:
        raise StatsError("no cells to compare")
    return {key: sample.cell(runs, f"cell {key}") for key, runs in cells.items()}


def times_fastest(
    cells: Mapping[str, Sequence[sample.RunLike]],
    seed: int = 0,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> dict[str, Ratio]:
    """Each cell's "× the fastest": its figure over the fastest cell's, with its interval. The
    fastest cell's own is 1 with no interval (a cell is not uncertain relative to itself)."""
    _check(resamples, level)
    checked = checked_cells(cells)
    best = fastest(checked)
    found = {}
    for key, runs in checked.items():
        if key == best:
            found[key] = Ratio(1.0, None, None, len(runs), len(runs))
        else:
            found[key] = _ratio(checked[best], runs, seed, resamples, level)
    return found

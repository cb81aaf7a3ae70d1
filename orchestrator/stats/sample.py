"""A cell's runs as the statistics read them, refused in one line where they are unfit.

A run is one worker process; its figures are its timed epochs' times per unit of work (seconds
per image: lower is faster), or its one figure where the epochs are not at hand. A cell is the runs
of one configuration. Every value comes from a database that may be shared, or edited, so each is
checked here before any arithmetic: a NaN would sort anywhere and poison a median, an infinite or
non-positive time would make every ratio meaningless.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from numbers import Real

from orchestrator.errors import StatsError

Run = tuple[float, ...]  # one process's epoch figures (at least one)
Cell = tuple[Run, ...]  # one configuration's runs (at least one)
RunLike = float | Sequence[float]


def _figure(value: object, where: str, positive: bool = True) -> float:
    # bool is a Real too, and a True stored where a time belongs is a damaged row, not a 1.
    if isinstance(value, bool) or not isinstance(value, Real):
        raise StatsError(f"{where}: {value!r} is not a number")
    number = float(value)
    if math.isnan(number):
        raise StatsError(f"{where}: NaN is not a figure")
    if math.isinf(number):
        raise StatsError(f"{where}: {number} is not a finite figure")
    if positive and number <= 0:
        raise StatsError(f"{where}: {number!r} is not a positive time")
    return number


def run(values: RunLike, where: str = "run", positive: bool = True) -> Run:
    """One run's figures, checked: a single number is a run whose epochs are not known.
    `positive=False` for a figure that may be 0 or below (an accuracy, a loss), never for a time."""
    if isinstance(values, str | bytes):
        raise StatsError(f"{where}: {values!r} is not a number")
    if not isinstance(values, Sequence):
        return (_figure(values, where, positive),)
    if not values:
        raise StatsError(f"{where}: a run with no figures")
    return tuple(_figure(v, f"{where}, figure {i + 1}", positive) for i, v in enumerate(values))


def cell(runs: Sequence[RunLike], where: str = "cell", positive: bool = True) -> Cell:
    """One configuration's runs, checked; refuses an empty cell."""
    if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
        raise StatsError(f"{where}: {runs!r} is not a list of runs")
    if not runs:
        raise StatsError(f"{where}: no runs")
    return tuple(run(r, f"{where}, run {i + 1}", positive) for i, r in enumerate(runs))


def run_figure(one: Run) -> float:
    """A run's figure: the median of its epochs, as bench has always reported a run."""
    return float(statistics.median(one))


def figures(runs: Cell) -> list[float]:
    """Each run's figure, in the cell's order."""
    return [run_figure(r) for r in runs]


def cell_figure(runs: Cell) -> float:
    """The cell's figure: the median over its runs of each run's figure. The median, not the mean,
    because one run that landed on a slow process (or met other load) must not move the centre."""
    return float(statistics.median(figures(runs)))


def content_seed(seed: int, *cells: Cell) -> int:
    """A seed for resampling these cells that depends on their contents and `seed` only, never on
    where they stand in a list: the same cells give the same interval in any order of the table.
    The runs are sorted first, so the order the database returned them in does not count either."""
    digest = hashlib.sha256(repr(seed).encode())
    for one in cells:
        digest.update(repr(sorted(one)).encode())
        digest.update(b"|")
    return int.from_bytes(digest.digest()[:8], "big")

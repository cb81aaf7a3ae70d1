"""The study's published table at older releases beside today's: the figures of its "The releases"
section (releases_report.py writes them), from the one sweep of the study's releases matrix, so
every era ran on the same machine in the same hour, interleaved.

Three readings, each on orchestrator/stats's rules:

- **steps**: per framework that ran at several releases, per column (model), each release against
  the one before (newer over older). Two cells are told apart as everywhere in a study (the
  Mann–Whitney test, Holm-corrected over the framework's steps, and the ratio's 95 % bootstrap
  interval excluding 1): faster, slower, or no change shown at this n.
- **eras**: per column, × the fastest at each framework's oldest release run and at its newest
  (today's), over the frameworks the poster and both eras share; a framework with one release
  stands in both eras with the same runs.
- **shares**: where today's × the fastest differs from the poster's (its interval excludes the
  published figure, read as exact), the share of the log distance between them that the oldest
  releases close: log(old / today) / log(poster / today), 1 all of it, 0 none, below 0 away from the
  poster. A ratio of ratios no single test covers, so the bootstrap decides alone, each cell
  resampled on its own and the share taken draw by draw (as claims.py's averages are): shown where
  the interval of old / today excludes 1, "not shown at this n" otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from orchestrator.config import pins
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import StatsError
from orchestrator.stats import bootstrap, comparison, mannwhitney, planning, ranking, sample
from orchestrator.studies import measured
from orchestrator.studies.published import Published
from orchestrator.studies.spec import Releases
from workers import releases as served

PINNED = "pinned"
FASTER, SLOWER, NOISE = "faster", "slower", "no change shown at this n"
TOWARD, AWAY, UNSHOWN = "toward the poster", "away from the poster", "not shown at this n"
UNMOVED = "not moved (the fastest in both eras)"
PAST = "toward the poster and past it"  # a share above 100 %: the old release overshoots


def release_of(framework: str, version: str | None) -> str:
    """The release a configuration asks for: its version, or the one envs/<framework>.txt pins."""
    return version or pins.pinned_release(framework) or PINNED


def release_key(version: str) -> tuple[int, tuple[object, ...], str]:
    """Releases oldest first, as workers/releases.py orders them; a shape it cannot read last."""
    try:
        return (0, served.key(version), version)
    except ValueError:
        return (1, (), version)


def planned(configs: Iterable[RunConfig]) -> dict[str, list[str]]:
    """Per framework, the releases the configurations run, oldest first."""
    found: dict[str, set[str]] = {}
    for c in configs:
        found.setdefault(c.framework, set()).add(release_of(c.framework, c.version))
    return {f: sorted(v, key=release_key) for f, v in sorted(found.items())}


@dataclass(frozen=True)
class Figure:
    """A cell's figure with its interval (None, None: one run, or the era's fastest itself)."""

    centre: float
    low: float | None
    high: float | None
    n: int

    def excludes(self, value: float) -> bool:
        """Whether the interval leaves `value` out; without an interval nothing is told apart."""
        if self.low is None or self.high is None:
            return False
        return value < self.low or value > self.high


# An era in one column: its fastest framework, and each framework's × the fastest with its draws.
Era = tuple[str, dict[str, tuple[float, np.ndarray]]]


@dataclass(frozen=True)
class Step:
    framework: str
    column: str
    older: str
    newer: str
    ratio: bootstrap.Ratio  # newer over older
    verdict: str
    p: float
    detectable: str


@dataclass(frozen=True)
class Share:
    """One framework in one column: the poster's × the fastest, each era's, and what the oldest
    releases do to today's distance from the poster."""

    framework: str
    column: str
    poster: float
    old: Figure
    today: Figure
    differs: bool
    share: Figure | None  # the share of the log distance closed, where it differs
    verdict: str = ""


@dataclass
class Found:
    """Everything the section prints, and what it could not compare (with why)."""

    ran: dict[str, list[str]]  # per framework, the releases run (with ok runs or not), oldest first
    eras: dict[str, dict[str, str]] = field(default_factory=dict)  # "old" / "today": framework → release
    cells: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)  # (column, fw, release)
    empty: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    step_note: str = ""
    shares: list[Share] = field(default_factory=list)
    groups: dict[tuple[str, str], list[list[str]]] = field(default_factory=dict)  # (era, column)
    fewest: int = 0
    total: Figure | None = None  # the summed log distance closed, over the cells that differ
    problem: str = ""


def read(spec: Releases, cells: Sequence[measured.Cell], pub: Published) -> Found:
    table = spec.table
    g = measured.grid(cells, table.measured, "framework", table.columns, "version")
    found = Found(planned(c for c in spec.matrix.matrix.configs))
    if g.problem:
        found.problem = g.problem
        return found
    for (column, framework, version), cell in sorted(g.cells.items()):
        release = release_of(framework, None if version == "None" else version)
        figures = cell.figures("seconds_per_image")
        if figures:
            found.cells[(column, framework, release)] = figures
        else:
            found.empty.append(f"{framework} {release} {column}: {cell.why_empty('seconds_per_image')}")
    ran = {f: sorted({k[2] for k in found.cells if k[1] == f}, key=release_key) for f in found.ran}
    found.eras = {
        "old": {f: r[0] for f, r in ran.items() if r},
        "today": {f: r[-1] for f, r in ran.items() if r},
    }
    try:
        _steps(found, ran)
        _shares(found, pub)
    except StatsError as exc:  # a stored figure unfit for statistics (a shared database's row)
        found.problem = str(exc)
    return found


def _steps(found: Found, ran: dict[str, list[str]]) -> None:
    """Each framework's releases, each against the one before, Holm over the framework's steps."""
    floors: list[str] = []
    for framework, releases in ran.items():
        pairs: list[tuple[str, str, str]] = []
        for column in sorted({k[0] for k in found.cells if k[1] == framework}):
            have = [r for r in releases if (column, framework, r) in found.cells]
            pairs += [(column, a, b) for a, b in zip(have, have[1:], strict=False)]
        if not pairs:
            continue
        runs = [(found.cells[(c, framework, a)], found.cells[(c, framework, b)]) for c, a, b in pairs]
        for (column, older, newer), c in zip(pairs, comparison.compare_table(runs), strict=True):
            apart = c.adjusted_p < c.alpha and c.ratio.excludes_one()
            verdict = (FASTER if c.ratio.centre < 1 else SLOWER) if apart else NOISE
            detect = "" if apart else c.detectable_text()
            found.steps.append(Step(framework, column, older, newer, c.ratio, verdict, c.adjusted_p, detect))
        # Holm's first step multiplies the smallest p by the number of comparisons: nothing can pass
        # only where even the best-placed pair's smallest attainable p, so multiplied, reaches ALPHA
        m, n = max(((len(a), len(b)) for a, b in runs), key=lambda mn: -mannwhitney.smallest_p(*mn))
        floor = mannwhitney.smallest_p(m, n) * len(pairs)
        if floor >= planning.ALPHA:
            floors.append(f"{framework} at n={m}/{n} over {len(pairs)} comparisons ({min(floor, 1.0):.2g})")
    if floors:
        found.step_note = (
            "no change can pass the test where its smallest p, Holm-corrected, is 5 % or more: "
            + "; ".join(floors)
            + ": more runs are needed for a verdict, and the intervals show the size meanwhile"
        )


def _draws(runs: Sequence[float]) -> np.ndarray:
    cell = sample.cell(runs)
    return bootstrap.distribution(cell, np.random.default_rng(sample.content_seed(0, cell)))


def _figure(centre: float, draws: np.ndarray | None, n: int) -> Figure:
    if draws is None or n < 2:
        return Figure(centre, None, None, n)
    low, high = (float(x) for x in np.quantile(draws, [0.025, 0.975]))
    return Figure(centre, low, high, n)


def _shares(found: Found, pub: Published) -> None:
    """Per column, × the fastest in each era over the frameworks the poster and both eras share,
    and where today's differs from the poster's, the share of the distance the old releases close."""
    moved: list[np.ndarray] = []
    gaps: list[np.ndarray] = []
    for column in sorted({k[0] for k in found.cells}):
        ranked = pub.ranked(column)
        common = [
            f
            for f in sorted(found.ran)
            if f in ranked and all((column, f, found.eras[e].get(f, "")) in found.cells for e in found.eras)
        ]
        if len(common) < 2:
            continue
        eras: dict[str, Era] = {}
        for era, chosen in found.eras.items():
            runs = {f: found.cells[(column, f, chosen[f])] for f in common}
            centres = {f: sample.cell_figure(sample.cell(r)) for f, r in runs.items()}
            best = min(common, key=lambda f: (centres[f], f))
            draws = {f: _draws(r) for f, r in runs.items()}
            eras[era] = (best, {f: (centres[f] / centres[best], draws[f] / draws[best]) for f in common})
            found.groups[(era, column)] = ranking.tie_groups(runs)
        low = min(ranked[f] for f in common)
        for f in common:
            share = _share(found, column, f, ranked[f] / low, eras)
            found.shares.append(share)
            if share.differs and share.share is not None:
                today, old = eras["today"][1][f][1], eras["old"][1][f][1]
                sign = 1.0 if share.poster > share.today.centre else -1.0
                moved.append(np.log(old / today) * sign)
                gaps.append(np.abs(np.log(share.poster / today)))
    found.fewest = min((len(v) for v in found.cells.values()), default=0)
    if gaps:
        draws = np.sum(moved, axis=0) / np.sum(gaps, axis=0)
        # The same sum on the cells' own figures: each cell's move toward the poster (negative
        # away), over the distances to close.
        kept = [(s.poster, s.today.centre, s.old.centre) for s in found.shares if s.share is not None]
        moves = sum(math.log(o / t) * (1.0 if p > t else -1.0) for p, t, o in kept)
        centre = moves / sum(abs(math.log(p / t)) for p, t, _ in kept)
        found.total = _figure(centre, draws, found.fewest)


def _share(found: Found, column: str, framework: str, poster: float, eras: dict[str, Era]) -> Share:
    (best_t, today_d), (best_o, old_d) = eras["today"], eras["old"]
    # A × the fastest rests on two cells: its runs are the fewer of the two.
    n = {
        e: min(len(found.cells[(column, f, found.eras[e][f])]) for f in (framework, eras[e][0]))
        for e in found.eras
    }
    (t_centre, t_draws), (o_centre, o_draws) = today_d[framework], old_d[framework]
    # The era's fastest is 1 in every draw: no interval, as times_fastest gives it none.
    today = _figure(t_centre, None if framework == best_t else t_draws, n["today"])
    old = _figure(o_centre, None if framework == best_o else o_draws, n["old"])
    if framework == best_t:
        differs = n["today"] > 1 and not math.isclose(poster, 1.0)
    else:
        differs = today.excludes(poster)
    if not differs:
        return Share(framework, column, poster, old, today, False, None)
    if framework == best_t == best_o:
        return Share(
            framework, column, poster, old, today, True, Figure(0.0, None, None, n["today"]), UNMOVED
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.log(o_draws / t_draws) / np.log(poster / t_draws)
    shares = shares[np.isfinite(shares)]
    centre = math.log(o_centre / t_centre) / math.log(poster / t_centre)
    fewest = min(n.values())
    figure = _figure(centre, shares if len(shares) else None, fewest)
    moved = _figure(o_centre / t_centre, o_draws / t_draws, fewest)
    way = PAST if centre > 1 else TOWARD if centre > 0 else AWAY
    verdict = way if moved.excludes(1.0) else UNSHOWN
    return Share(framework, column, poster, old, today, True, figure, verdict)


def served_range(framework: str) -> tuple[str, str] | None:
    """The oldest release bench's adapter serves and why older ones are not (workers/releases.py)."""
    support = served.SUPPORT.get(framework)
    return None if support is None else (support.oldest, support.older)

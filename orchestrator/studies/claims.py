"""A study's claims judged on the runs bench measured: each ends in one verdict with the figures,
intervals and run counts it rests on.

Verdicts (spec.VERDICTS): "holds", "does not hold", "mixed" (holds in some columns, is refuted in
others), "not shown at this n" (the runs cannot tell the difference from the noise: never "holds"),
"not checkable here" (the claim needs what this database lacks, or was written so).

Every decision is orchestrator/stats's, over runs (one process, one figure): two cells are told
apart where the Mann–Whitney test on their runs gives p < 5 % after Holm's correction over the
claim's comparisons, and the 95 % bootstrap interval of their ratio excludes 1, the rule tie groups
use (stats/ranking.py); a `fastest ... every` claim reads the tie groups themselves. An "on average"
or "in the worst case" claim compares aggregates over columns (geometric mean, maximum), which no
single test covers: there the bootstrap decides alone, its draws of each cell aggregated draw by
draw, and a cell with one run (no spread between processes) is never told apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orchestrator.errors import StatsError
from orchestrator.stats import bootstrap, comparison, mannwhitney, planning, ranking, sample
from orchestrator.studies import accuracy, measured
from orchestrator.studies.spec import ACCURACY_METRICS, Claim

HOLDS, AGAINST, MIXED, NOISE, UNCHECKABLE = (
    "holds", "does not hold", "mixed", "not shown at this n", "not checkable here",
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    figures: tuple[str, ...] = ()
    note: str = ""


def combine(parts: Sequence[str]) -> str:
    """One verdict from several (columns, pairs, series): a refutation beside a confirmation is
    mixed; a refutation beside noise refutes; only confirmations everywhere hold."""
    if not parts:
        return NOISE
    if all(p == HOLDS for p in parts):
        return HOLDS
    if AGAINST in parts or MIXED in parts:
        return MIXED if HOLDS in parts or MIXED in parts else AGAINST
    return NOISE


def judge(claim: Claim, cells: Sequence[measured.Cell], table: Mapping[str, Judge] | None = None) -> Verdict:
    """The claim's verdict on the cells, its kind judged by `table` (default this module's kinds;
    kinds.judge passes every kind, its own too)."""
    if claim.kind == "not_checkable":
        return Verdict(claim, UNCHECKABLE, note=claim.reason)
    invert = claim.higher_is_better and claim.kind == "fastest"
    medians: tuple[str, ...] = ()  # an accuracy claim's own figures, shown before its ratios
    if claim.metric in ACCURACY_METRICS:  # read from the runs' learning curves
        runs, empty, problem = accuracy.figures(claim, cells, invert)
        if problem:
            return Verdict(claim, UNCHECKABLE, note=problem)
        medians = accuracy.medians(claim, runs, invert)
    else:
        g = measured.grid(cells, claim.where, claim.items, claim.columns, claim.axis)
        if g.problem:
            return Verdict(claim, UNCHECKABLE, note=g.problem)
        if claim.kind in ("order", "ratio", "resource", "similar"):  # only its items and their empty cells
            g = measured.Grid({k: c for k, c in g.cells.items() if k[1] in claim.subjects})
        runs, empty = _figures(g, claim.metric, invert)
    if not runs:
        why = "; ".join(empty) or "the study's sweeps hold no runs of it"
        return Verdict(claim, UNCHECKABLE, note=f"nothing measured: {why}")
    try:
        verdict = (table or KINDS)[claim.kind](claim, runs)
    except StatsError as exc:  # a stored figure unfit for statistics: the claim cannot be judged
        return Verdict(claim, UNCHECKABLE, note=str(exc))
    left = "left out, nothing measured: " + "; ".join(empty) if empty else ""
    note = "; ".join(x for x in (verdict.note, left) if x)
    return Verdict(claim, verdict.verdict, medians + verdict.figures, note)


Runs = dict[tuple[str, str, str], list[float]]
Judge = Callable[[Claim, Runs], Verdict]


def _figures(g: measured.Grid, metric: str, invert: bool) -> tuple[Runs, list[str]]:
    """Each cell's run figures (a rate turned into a time where the claim ranks speed), and why
    each empty cell is empty."""
    runs: Runs = {}
    empty: list[str] = []
    for key, cell in sorted(g.cells.items()):
        figures = cell.figures(metric)
        if figures:
            runs[key] = [1 / f if invert and f > 0 else f for f in figures]
        else:
            empty.append(f"{_label(key)}: {cell.why_empty(metric)}")
    return runs, empty


def _label(key: tuple[str, str, str]) -> str:
    """A cell as a reader names it: "pytorch alexnet", "tensorflow 250" (an axis level last)."""
    column, item, level = key
    return " ".join(k for k in (item, column if column != measured.ALL else "", level) if k)


def _ratio_text(name: str, ratio: bootstrap.Ratio, extra: str = "") -> str:
    interval = (
        f" [{ratio.low:.3g}–{ratio.high:.3g}]" if ratio.low is not None and ratio.high is not None else ""
    )
    return f"{name} {ratio.centre:.3g}{interval}, n={ratio.n_a}/{ratio.n_b}{extra}"


def _by_column(runs: Runs) -> list[tuple[str, dict[str, list[float]]]]:
    """The columns in their order: batch 8 before 32."""
    return sorted(_columns(runs).items(), key=lambda kv: level_key(kv[0]))


def _columns(runs: Runs) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = {}
    for (column, item, _), figures in runs.items():
        found.setdefault(column, {})[item] = figures
    return found


# --- pairs: B against A, Holm over the claim's comparisons ---------------------------------------

Pair = tuple[str, list[float], list[float], bool]  # label, A's runs, B's runs, B/A above 1 confirms


def _pairs(
    pairs: list[Pair], shown: Sequence[bootstrap.Ratio] | None = None
) -> tuple[list[str], list[str], str]:
    """Each (label, A's runs, B's runs, whether B/A above 1 confirms): a verdict and a figure line
    (showing `shown`'s ratio in place of B/A where given); and a note where the runs are too few for
    any difference to pass the corrected test."""
    found = comparison.compare_table([(a, b) for _, a, b, _ in pairs])
    fewest = min(pairs, key=lambda p: (len(p[1]) + len(p[2]), min(len(p[1]), len(p[2]))))
    floor = mannwhitney.smallest_p(len(fewest[1]), len(fewest[2])) * len(pairs)
    note = ""
    if floor >= planning.ALPHA:
        note = (
            f"at n={len(fewest[1])}/{len(fewest[2])} over {len(pairs)} comparisons no difference can pass "
            f"the test (its smallest p, Holm-corrected, is {min(floor, 1.0):.2g}): more runs are needed"
        )
    verdicts: list[str] = []
    lines: list[str] = []
    for i, ((label, _, _, up), c) in enumerate(zip(pairs, found, strict=True)):
        apart = c.adjusted_p < c.alpha and c.ratio.excludes_one()
        if not apart:
            verdicts.append(NOISE)
        else:
            verdicts.append(HOLDS if (c.ratio.centre > 1) == up else AGAINST)
        p = f", p={c.adjusted_p:.2g} ({c.method})"
        ratio = shown[i] if shown is not None else c.ratio
        lines.append(_ratio_text(label, ratio, p) + ("" if apart else f"; {c.detectable_text()}"))
    return verdicts, lines, note


def _order(claim: Claim, runs: Runs) -> Verdict:
    """Each neighbour in the claimed order (best first) against the next, in every column."""
    best_low = not claim.higher_is_better
    if claim.kind == "resource":
        best_low = claim.direction == "less"
    pairs: list[Pair] = []
    for column, items in _by_column(runs):
        for first, second in zip(claim.subjects, claim.subjects[1:], strict=False):
            if first in items and second in items:
                label = f"{column}: {second}/{first}" if column != measured.ALL else f"{second}/{first}"
                pairs.append((label, items[first], items[second], best_low))
    if not pairs:
        return Verdict(claim, UNCHECKABLE, note="no column holds two of the claim's items")
    verdicts, lines, note = _pairs(pairs)
    return Verdict(claim, combine(verdicts), tuple(lines), note)


def _ratio(claim: Claim, runs: Runs) -> Verdict:
    """A's figure over B's against the threshold X, per column: A's runs against X times B's, told
    apart as any two cells are (the test and the interval), so that a ratio is no easier to claim
    than an order."""
    a, b = claim.subjects
    threshold = claim.threshold or 1.0
    pairs: list[Pair] = []
    shown: list[bootstrap.Ratio] = []
    for column, items in _by_column(runs):
        if a in items and b in items:
            name = f"{column}: {a}/{b}" if column != measured.ALL else f"{a}/{b}"
            scaled = [x * threshold for x in items[b]]
            pairs.append(
                (f"{name} ({claim.direction} {threshold:g})", scaled, items[a], claim.direction == "above")
            )
            shown.append(bootstrap.ratio(items[b], items[a]))  # B/A of (b, a): a over b
    if not pairs:
        return Verdict(claim, UNCHECKABLE, note=f"no column holds both {a} and {b}")
    verdicts, lines, note = _pairs(pairs, shown)
    return Verdict(claim, combine(verdicts), tuple(lines), note)


def _rises(claim: Claim, runs: Runs) -> Verdict:
    """Per series (item and column), the metric at each axis level against the next and the first
    level against the last: a significant overall rise with no significant fall holds."""
    series: dict[tuple[str, str], dict[str, list[float]]] = {}
    for (column, item, level), figures in runs.items():
        series.setdefault((column, item), {})[level] = figures
    pairs: list[Pair] = []
    spans: list[tuple[int, int]] = []
    for (column, item), levels in sorted(series.items()):
        ordered = sorted(levels, key=level_key)
        if len(ordered) < 2:
            continue
        name = f"{item} {column}" if column != measured.ALL else item
        steps = list(zip(ordered, ordered[1:], strict=False))
        first = len(pairs)
        for low, high in [(ordered[0], ordered[-1]), *steps] if len(ordered) > 2 else steps:
            pairs.append((f"{name}: {claim.axis} {high}/{low}", levels[low], levels[high], True))
        spans.append((first, len(pairs)))
    if not pairs:
        return Verdict(claim, UNCHECKABLE, note=f"no series with two values of {claim.axis}")
    verdicts, lines, note = _pairs(pairs)
    found: list[str] = []
    for start, end in spans:
        overall, between = verdicts[start], verdicts[start + 1 : end] if end - start > 1 else []
        if overall == HOLDS:
            found.append(MIXED if AGAINST in between else HOLDS)
        else:
            found.append(overall)
    return Verdict(claim, combine(found), tuple(lines), note)


def level_key(level: str) -> tuple[int, float | str, float]:
    """Levels of a setting in their order: numbers by value (batch 8 before 32), then names, a name
    ending in a number by that number (an accuracy claim's "epoch 2" before "epoch 10")."""
    try:
        return (0, float(level), 0.0)
    except ValueError:
        head, _, tail = level.rpartition(" ")
        try:
            return (1, head, float(tail))
        except ValueError:
            return (1, level, 0.0)


def _fastest(claim: Claim, runs: Runs) -> Verdict:
    who = claim.subjects[0]
    columns = _columns(runs)
    # A rate was turned into a time (_figures), so a speed claim's aggregates are seconds per image.
    metric = (
        "seconds per image" if claim.metric in ("seconds_per_image", "images_per_second") else claim.metric
    )
    parts: list[str] = []
    lines: list[str] = []
    for how in claim.aggregates:
        verdict, found = _every(who, columns) if how == "every" else _aggregate(who, columns, how, metric)
        if verdict is not None:
            parts.append(verdict)
        lines += [f"{how}: {line}" for line in found]
    if not parts:
        note = f"no column holds runs of {who} and of another {claim.items}"
        return Verdict(claim, UNCHECKABLE, tuple(lines), note)
    return Verdict(claim, combine(parts), tuple(lines))


def _items(columns: dict[str, dict[str, list[float]]]) -> set[str]:
    return {item for items in columns.values() for item in items}


def _every(who: str, columns: dict[str, dict[str, list[float]]]) -> tuple[str | None, list[str]]:
    """Per column, bench's tie groups: alone in the first holds, behind another group refutes."""
    verdicts: list[str] = []
    lines: list[str] = []
    for column, items in sorted(columns.items(), key=lambda kv: level_key(kv[0])):
        if who not in items or len(items) < 2:
            continue
        groups = ranking.tie_groups(items)
        times = bootstrap.times_fastest(items)
        shown = " → ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in groups)
        lines.append(f"{column}: {shown}; " + _ratio_text(f"{who} × the fastest", times[who]))
        if groups[0] == [who]:
            verdicts.append(HOLDS)
        else:
            verdicts.append(NOISE if who in groups[0] else AGAINST)
    return (combine(verdicts) if verdicts else None), lines


AGGREGATE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "average": lambda stack: np.exp(np.mean(np.log(stack), axis=0)),
    "worst": lambda stack: np.max(stack, axis=0),
}


def _aggregate(
    who: str, columns: dict[str, dict[str, list[float]]], how: str, metric: str
) -> tuple[str | None, list[str]]:
    """Each item's aggregate over the columns every item has, drawn with the bootstrap; `who`
    against each other item by the interval of their ratio."""
    items = sorted(_items(columns))
    shared = sorted(c for c, cells in columns.items() if all(i in cells for i in items))
    if who not in items or len(items) < 2 or not shared:
        return None, ["no column where every item has runs"]
    draws: dict[str, np.ndarray] = {}
    centres: dict[str, float] = {}
    for item in items:
        cells = [sample.cell(columns[c][item], f"{item} {c}") for c in shared]
        stack = np.stack([_draws(cell) for cell in cells])
        draws[item] = AGGREGATE[how](stack)
        centres[item] = float(AGGREGATE[how](np.array([[sample.cell_figure(cell)] for cell in cells]))[0])
    verdicts: list[str] = []
    what = "geometric mean" if how == "average" else "slowest"
    lines = [
        f"{what} of {metric} over {', '.join(shared)}: " + ", ".join(f"{i} {centres[i]:.3g}" for i in items)
    ]
    for other in items:
        if other == who:
            continue
        n_other = min(len(columns[c][other]) for c in shared)
        n_who = min(len(columns[c][who]) for c in shared)
        ratio = draws[other] / draws[who]
        low, high = (float(x) for x in np.quantile(ratio, [0.025, 0.975]))
        r = bootstrap.Ratio(centres[other] / centres[who], low, high, n_who, n_other)
        if min(n_other, n_who) < 2:
            verdicts.append(NOISE)  # one process: no spread between processes to judge by
        else:
            verdicts.append(HOLDS if low > 1 else AGAINST if high < 1 else NOISE)
        lines.append(_ratio_text(f"{other}/{who}", r))
    fewest = min(len(columns[c][i]) for c in shared for i in items)
    if 1 < fewest < bootstrap.FULL_COVERAGE_RUNS:
        lines.append(
            f"the bootstrap alone decides here, and over {fewest} runs its 95 % interval holds the truth "
            f"less often than it says (from {bootstrap.FULL_COVERAGE_RUNS} runs on it does: docs/reports.md)"
        )
    return (AGAINST if AGAINST in verdicts else combine(verdicts)), lines


def _draws(cell: sample.Cell) -> np.ndarray:
    rng = np.random.default_rng(sample.content_seed(0, cell))
    return bootstrap.distribution(cell, rng)


KINDS: dict[str, Callable[[Claim, Runs], Verdict]] = {
    "fastest": _fastest,
    "order": _order,
    "ratio": _ratio,
    "rises_with": _rises,
    "resource": _order,
}

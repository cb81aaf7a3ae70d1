"""A study's scaling ratios (791 → 6003 photos, batch 250 → 5000) set beside bench's, as rows.

Per row of the published table's other dimensions (model × framework for umons, the framework for
msu), the study's figure at the axis's second level over its first, beside either bench's own ratio
(its figure at the largest value of the setting it varies over its smallest, with the 95 %
bootstrap interval over runs) or the reference the published ratio is read against where bench's
figure cannot change with that axis (linear scaling: to / from). Each row says what the two say
together in words; where bench's side has no runs (a GPU column on a CPU machine) the row says so.

The published figures carry no interval, so a published ratio is read as exact; bench's is told
apart from 1 (and from the study's, where the spans are the same) only by its interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import StatsError
from orchestrator.stats import bootstrap
from orchestrator.studies import loader_ratios, measured, published
from orchestrator.studies.spec import RATE_UNITS, ScalingRatio

DASH = "—"
LINEAR_BAND = 0.05  # a published ratio within 5 % of the reference reads as "about linear"
KEYS = ("row", "study", "bench", "says")


@dataclass
class RatioTable:
    ratio: ScalingRatio
    intro: str
    rows: list[dict[str, str]]
    bench_header: str  # "bench" (measured) or "reference"


def tables(ratios: Sequence[ScalingRatio], found: measured.Measured) -> list[RatioTable]:
    return [_table(r, found) for r in ratios]


def _rate(ratio: ScalingRatio) -> bool:
    return ratio.table.unit in RATE_UNITS


def _quantity(ratio: ScalingRatio) -> str:
    return "throughput" if _rate(ratio) else "time"


def _key(ratio: ScalingRatio, column: str, item: str, varied: str) -> str:
    """A row's name: the table's dimensions other than the one the ratio varies."""
    t = ratio.table
    if varied == t.items:
        return column
    if varied == t.columns:
        return item
    return f"{column} {item}"


def _published(ratio: ScalingRatio) -> dict[str, tuple[published.Cell | None, published.Cell | None]]:
    low, high = loader_ratios.levels(ratio)
    found: dict[str, list[published.Cell | None]] = {}
    for index, pub in enumerate((low, high)):
        for column, cells in pub.cells.items():
            for item, cell in cells.items():
                found.setdefault(_key(ratio, column, item, ratio.axis), [None, None])[index] = cell
    return {k: (v[0], v[1]) for k, v in found.items()}


Levels = dict[str, measured.Cell]  # bench's cells of one row, by the varied setting's value


def _measured(ratio: ScalingRatio, found: measured.Measured) -> tuple[dict[str, Levels], str | None]:
    """Per row, bench's cells by the varied setting's value; or why none could be picked."""
    if ratio.measured is None:
        return {}, None
    t = ratio.table
    g = measured.grid(found.cells, (*t.measured, *ratio.where), t.items, t.columns, ratio.measured)
    if g.problem:
        return {}, g.problem
    rows: dict[str, Levels] = {}
    for (column, item, level), cell in g.cells.items():
        rows.setdefault(_key(ratio, column, item, ratio.measured), {})[level] = cell
    return rows, None


def _table(ratio: ScalingRatio, found: measured.Measured) -> RatioTable:
    pub = _published(ratio)
    bench, problem = _measured(ratio, found)
    rows = []
    for key in sorted(set(pub) | set(bench)):
        low, high = pub.get(key, (None, None))
        study, r = _study_text(ratio, low, high)
        if ratio.reference is not None:
            reference = float(ratio.high) / float(ratio.low)
            side, says = f"linear: {reference:.3g}×", _against_reference(ratio, r, reference)
        else:
            side, says = _against_bench(ratio, r, bench.get(key), found, problem)
        rows.append({"row": key, "study": study, "bench": side, "says": says})
    return RatioTable(ratio, _intro(ratio, found), rows, "reference" if ratio.reference else "bench")


def _intro(ratio: ScalingRatio, found: measured.Measured) -> str:
    t = ratio.table
    text = (
        f"{ratio.name}: the study's {_quantity(ratio)} at {ratio.axis} {ratio.high} over {ratio.axis} "
        f"{ratio.low} (table {t.name}, {t.unit}), per row of {dimensions(ratio)}; beside it "
    )
    if ratio.reference is not None:
        reference = float(ratio.high) / float(ratio.low)
        text += (
            f"the reference it is read against: linear scaling, {ratio.high} / {ratio.low} = {reference:.3g}."
        )
    else:
        scale = f" at scale {found.scale}" if found.scale else ""
        text += (
            f"bench's {_metric(ratio).replace('_', ' ')} at its largest {ratio.measured} over its smallest"
            f"{scale}, with its 95 % interval over runs."
        )
    return text + (f" {ratio.why}" if ratio.why else "")


def dimensions(ratio: ScalingRatio) -> str:
    t = ratio.table
    if ratio.axis == t.items:
        return t.columns
    if ratio.axis == t.columns:
        return t.items
    return f"{t.columns} × {t.items}"


def _metric(ratio: ScalingRatio) -> str:
    return "images_per_second" if _rate(ratio) else "seconds_per_image"


def _study_text(
    ratio: ScalingRatio, low: published.Cell | None, high: published.Cell | None
) -> tuple[str, float | None]:
    if low is None and high is None:  # a row only bench measured (msu's PyTorch)
        return f"{DASH} (not in the published table)", None
    if low is None or high is None:
        missing = ratio.low if low is None else ratio.high
        return f"{DASH} (no published figure at {ratio.axis} {missing})", None
    if low.value is None or high.value is None:
        note = low.note if low.value is None else high.note
        return f"{DASH} ({note})", None
    r = high.value / low.value
    return f"{low.value:g} → {high.value:g} {ratio.table.unit}: {r:.3g}×", r


def _grew(r: float) -> str:
    return f"grew {r:.3g}×" if r >= 1 else f"fell to {r:.3g}×"


def _against_reference(ratio: ScalingRatio, r: float | None, reference: float) -> str:
    if r is None:
        return "no published ratio to read"
    against = r / reference
    if against > 1 + LINEAR_BAND:
        how = "more than linear"
    elif against < 1 - LINEAR_BAND:
        how = "less than linear"
    else:
        how = "about linear (within 5 %)"
    return f"the study's {_quantity(ratio)} {_grew(r)} for {reference:.3g}× the {ratio.axis}: {how}"


def _against_bench(
    ratio: ScalingRatio,
    r: float | None,
    cells: Levels | None,
    found: measured.Measured,
    problem: str | None,
) -> tuple[str, str]:
    if problem:
        return f"not compared: {problem}", "bench's side cannot be read"
    if not cells:
        why = _absent(ratio, found)
        return why, "bench's side is missing: " + why.removeprefix("not run here: ")
    levels = sorted(cells, key=_level_key)
    small, large = levels[0], levels[-1]
    if small == large:
        return f"not run here: one {ratio.measured} measured ({small})", "bench's side needs two values"
    metric = _metric(ratio)
    for level in (small, large):
        if not cells[level].figures(metric):
            why = f"{ratio.measured} {level}: {cells[level].why_empty(metric)}"
            return f"not run here: {why}", "bench's side is missing"
    try:
        b = bootstrap.ratio(cells[small].figures(metric), cells[large].figures(metric))
    except StatsError as exc:  # a stored figure unfit for statistics
        return f"not compared: {exc}", "bench's side cannot be read"
    interval = f" [{b.low:.3g}–{b.high:.3g}]" if b.low is not None and b.high is not None else ""
    side = f"{small} → {large}: {b.centre:.3g}×{interval}, n={b.n_a}/{b.n_b}"
    return side, _says(ratio, r, b, (small, large))


def _says(ratio: ScalingRatio, r: float | None, b: bootstrap.Ratio, span: tuple[str, str]) -> str:
    q = _quantity(ratio)
    if b.low is None or b.high is None:
        bench = f"bench's {q}: one run a cell, no interval, its direction not judged"
    elif not b.excludes_one():
        bench = f"bench's change lies inside its noise (not shown at n={b.n_a}/{b.n_b})"
    else:
        bench = f"bench's {q} {'rises' if b.low > 1 else 'falls'}"
    if r is None:
        return f"no published ratio; {bench}"
    study = f"the study's {q} {'rises' if r > 1 else 'falls' if r < 1 else 'stays'}"
    if b.low is None or b.high is None or not b.excludes_one():
        return f"{study}; {bench}"
    agree = "the same direction" if (r > 1) == (b.low > 1) else "opposite directions"
    if span != (ratio.low, ratio.high):
        spans = f"{ratio.low} → {ratio.high} against {span[0]} → {span[1]}"
        return f"{study}, {bench}: {agree} (the spans differ, {spans}: only the direction is compared)"
    if b.low <= r <= b.high:
        return f"{study}, {bench}: bench's interval holds the study's ratio"
    return f"{study}, {bench}: {agree}, bench's ratio {'above' if b.low > r else 'below'} the study's"


def _level_key(level: str) -> tuple[int, float | str]:
    try:
        return (0, float(level))
    except ValueError:
        return (1, level)


def _absent(ratio: ScalingRatio, found: measured.Measured) -> str:
    pins = (*ratio.table.measured, *ratio.where)
    device = next((str(v) for k, v in pins if k == "device"), "cpu")
    if device != "cpu" and not any(c.settings.get("device") == device for c in found.cells):
        return f"not run here: needs a GPU (device {device}); no sweep read here ran on one"
    if not found.sweeps:
        return "not run here: no runs in the database yet"
    return "not run here: no runs of it in the study's sweeps"

"""The report's "The releases" section: the study's published table at the releases nearest it
beside today's (releases.py's figures), written through report.py's writer so text, markdown and
the html page say the same, and what the closing section repeats of it.

What the releases cannot reach is read from workers/releases.py (each adapter's oldest served
release and why older ones are not) and from the releases matrix itself (which releases it runs),
never typed here: a framework with one release in the sweep, or none, says so in its own line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchestrator.stats import bootstrap, ranking
from orchestrator.studies import measured, published, releases, since
from orchestrator.studies.releases import Figure, Found, Share
from orchestrator.studies.spec import Study
from orchestrator.text.formats import number

HEADING = "The releases"
DASH = "—"
STEP_KEYS = ("framework", "model", "release", "ms/image", "n", "newer/older", "verdict")
ERA_KEYS = ("framework", "poster × fastest", "oldest run", "× fastest there", "today's", "× fastest today")
ORDER_KEYS = (
    "model", "poster's order", "tie groups, oldest releases", "τ-b, oldest", "tie groups, today's",
    "τ-b, today's",
)  # fmt: skip


class Writer(Protocol):
    """report.py's Writer, the part this section uses (report.py imports this module)."""

    def heading(self, level: int, text: str) -> None: ...
    def para(self, text: str) -> None: ...
    def items(self, items: Sequence[str], made_safe: bool = False) -> None: ...
    def table(
        self, rows: list[dict[str, str]], keys: Sequence[str], headers: dict[str, str] | None = None
    ) -> None: ...


def section(out: Writer, study: Study, found: measured.Measured, cells: Sequence[measured.Cell]) -> list[str]:
    """The section; returns the closing section's lines (one per difference the releases address)."""
    spec = study.releases
    if spec is None:
        return []
    out.heading(2, HEADING)
    pub = published.read_table(spec.table)
    got = releases.read(spec, cells, pub)
    name = spec.matrix.sweep_name(study.name)
    sweep = next((s for s in found.sweeps if s["name"] == name), None)
    settings = ", ".join(f"{k} {v}" for k, v in spec.table.measured)
    runs = "; ".join(f"{f} {' and '.join(r)}" for f, r in got.ran.items())
    out.para(
        f"The published table {spec.table.name} at older releases beside today's: {spec.matrix.path.name} "
        f"runs {runs}, at the settings the table is measured at ({settings}), every release interleaved "
        "in one sweep, so the eras share the machine and the hour. Times are ms per image (median over "
        "runs) with their 95 % interval; the newest release each framework ran is today's."
        + (f" {spec.note}" if spec.note else "")
    )
    if sweep is None:
        out.para(f"Not run yet: bench study run {study.name} runs it (scale {spec.matrix.scale}).")
    elif got.problem:
        out.para(f"Not compared: {got.problem}.")
    elif not got.cells:
        why = f" ({'; '.join(got.empty)})" if got.empty else ""
        out.para(f"Not compared: no ok run in its sweep{why}.")
    else:
        _steps(out, got, spec.table.columns)
        _eras(out, got, pub, spec.table.columns)
        closing = _explain(out, got, spec.table.columns)
        _reach(out, got, pub)
        return closing
    _reach(out, got, pub)
    return []


def _steps(out: Writer, got: Found, columns: str) -> None:
    out.heading(3, "Each framework's releases")
    out.para(
        "Per framework that ran at more than one release, each release's time per image and its ratio "
        "to the release before (newer over older: below 1 the newer is faster), told apart as a study's "
        "cells are: the Mann–Whitney test, Holm-corrected over the framework's comparisons, below 5 % "
        "and the ratio's 95 % bootstrap interval excluding 1."
    )
    by = {(s.framework, s.column, s.newer): s for s in got.steps}
    rows: list[dict[str, str]] = []
    for framework, ran in got.ran.items():
        if len(ran) < 2:
            continue
        for column in sorted({k[0] for k in got.cells if k[1] == framework}):
            for release in ran:
                figures = got.cells.get((column, framework, release))
                row = {"framework": framework, "model": column, "release": release}
                if figures is None:
                    rows.append({**row, "ms/image": "no ok run", "n": "0"})
                    continue
                e = bootstrap.cell_estimate(figures)
                step = by.get((framework, column, release))
                rows.append(
                    {
                        **row,
                        "ms/image": _fig(Figure(e.centre * 1000, _ms(e.low), _ms(e.high), e.n)),
                        "n": str(e.n),
                        "newer/older": DASH if step is None else _ratio(step.ratio),
                        "verdict": DASH if step is None else step.verdict,
                    }
                )
    out.table(rows, STEP_KEYS, {"model": columns})
    notes = [f"{s.framework} {s.column} {s.newer}: {s.detectable}" for s in got.steps if s.detectable]
    if got.step_note:
        notes.insert(0, got.step_note)
    out.items(notes + [f"no figure: {e}" for e in got.empty])


def _eras(out: Writer, got: Found, pub: published.Published, columns: str) -> None:
    out.heading(3, "The ranking per era")
    out.para(
        "Per model, × the fastest (each framework over the model's fastest, among the frameworks the "
        "poster and both eras share) at each framework's oldest release run and at today's, beside "
        "the poster's; then the tie groups of each era and Kendall's τ-b of the poster's order "
        "against each. A framework with one release stands in both eras with the same runs."
    )
    orders: list[dict[str, str]] = []
    for column in sorted({s.column for s in got.shares}, key=_level):
        shares = [s for s in got.shares if s.column == column]
        out.heading(4, f"{columns} {column}")
        out.table(
            [
                {
                    "framework": s.framework,
                    "poster × fastest": f"{s.poster:.2f}",
                    "oldest run": got.eras["old"][s.framework],
                    "× fastest there": _fig(s.old),
                    "today's": got.eras["today"][s.framework],
                    "× fastest today": _fig(s.today),
                }
                for s in shares
            ],
            ERA_KEYS,
        )
        ranked = {k: v for k, v in pub.ranked(column).items() if k in {s.framework for s in shares}}
        row = {"model": column, "poster's order": ", ".join(sorted(ranked, key=ranked.__getitem__))}
        for era, keys in (("old", ORDER_KEYS[2:4]), ("today", ORDER_KEYS[4:6])):
            groups = got.groups[(era, column)]
            row[keys[0]] = " → ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in groups)
            row[keys[1]] = since.tau_b(ranking.ranks(groups), ranked)[0]
        orders.append(row)
    out.table(orders, ORDER_KEYS, {"model": columns})


def _explain(out: Writer, got: Found, columns: str) -> list[str]:
    out.heading(3, "How much the releases explain")
    out.para(
        "Where today's × the fastest differs from the poster's (its 95 % interval excludes the "
        "published figure), the share of the distance between them (in logs) that the oldest "
        "releases close: 100 % all of it, 0 none, below 0 a move away from the poster. The bootstrap "
        "decides alone (a ratio of ratios no single test covers): shown where the interval of the old "
        "over today's × the fastest excludes 1."
    )
    differ = [s for s in got.shares if s.differs]
    lines = [_share_line(got, s) for s in differ]
    same = len(got.shares) - len(differ)
    out.items(lines)
    summary = _summary(got, differ, same)
    out.para(summary)
    if 1 < got.fewest < bootstrap.FULL_COVERAGE_RUNS:
        out.para(
            f"The bootstrap alone decides here, and over {got.fewest} runs its 95 % interval holds the "
            f"truth less often than it says (from {bootstrap.FULL_COVERAGE_RUNS} runs on it does: "
            "docs/reports.md)."
        )
    return [f"{line} ({HEADING}, above)" for line in lines] + ([summary] if differ else [])


def _share_line(got: Found, s: Share) -> str:
    old = got.eras["old"][s.framework]
    head = (
        f"{s.framework} {s.column}: × the fastest {_fig(s.today)} today against the poster's "
        f"{s.poster:.2f}; at {s.framework} {old} {_fig(s.old)}"
    )
    if s.share is None:
        return head
    if s.verdict == releases.UNMOVED:
        return f"{head}: {s.verdict}: the releases close none of the distance"
    return f"{head}: closes {_pct(s.share)} of the distance ({s.verdict})"


def _summary(got: Found, differ: Sequence[Share], same: int) -> str:
    if not got.shares:
        return "No model has two frameworks in both eras and the poster: nothing to compare."
    kept = f"; {same} hold the poster's × the fastest within their interval" if same else ""
    if not differ:
        return f"No framework's × the fastest today differs from the poster's{kept}."
    counts = {v: sum(s.verdict == v for s in differ) for v in dict.fromkeys(s.verdict for s in differ)}
    each = ", ".join(f"{n} {v}" for v, n in counts.items())
    total = f": together they close {_pct(got.total)} of the summed distance" if got.total else ""
    return (
        f"Of the {len(got.shares)} framework × model cells, {len(differ)} differ from the poster's × "
        f"the fastest today{kept}. The oldest releases run move them {each}{total}."
    )


def _reach(out: Writer, got: Found, pub: published.Published) -> None:
    """Per framework of the published table, which releases ran and what bench's adapters cannot
    serve (workers/releases.py), in its own words."""
    out.heading(3, "What the releases cannot reach")
    lines = []
    for framework in sorted({f for cells in pub.cells.values() for f in cells} | set(pub.lacking)):
        ran = got.ran.get(framework, [])
        served = releases.served_range(framework)
        if framework in pub.lacking:
            lines.append(f"{framework}: bench has no such framework ({pub.lacking[framework]})")
            continue
        if not ran:
            head = f"{framework}: not in this sweep"
        elif len(ran) == 1:
            head = (
                f"{framework}: one release in this sweep ({ran[0]}): its own figure is today's in both "
                "eras, and only the others' releases move its × the fastest"
            )
        else:
            head = f"{framework}: the sweep runs {' and '.join(ran)}"
        if served is not None:
            head += f"; bench's adapter serves {served[0]} and later: {served[1]}"
        lines.append(head)
    out.items(lines)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000


def _fig(f: Figure) -> str:
    text = number(f.centre) if f.centre >= 10 else f"{f.centre:.2f}"
    if f.low is not None and f.high is not None:
        low, high = (number(x) if f.centre >= 10 else f"{x:.2f}" for x in (f.low, f.high))
        text += f" [{low}–{high}]"
    return text


def _ratio(r: bootstrap.Ratio) -> str:
    interval = f" [{r.low:.2f}–{r.high:.2f}]" if r.low is not None and r.high is not None else ""
    return f"{r.centre:.2f}{interval}, n={r.n_a}/{r.n_b}"


def _pct(f: Figure | None) -> str:
    if f is None:
        return DASH
    text = f"{f.centre * 100:.0f} %"
    if f.low is not None and f.high is not None:
        text += f" [{f.low * 100:.0f} to {f.high * 100:.0f} %]"
    return text


def _level(column: str) -> tuple[int, float | str]:
    try:
        return (0, float(column))
    except ValueError:
        return (1, column)

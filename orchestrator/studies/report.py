"""`bench study report`: a study's published figures beside bench's, and its claims judged.

Absolute times cannot match (other hardware, other versions, another scale), so each published
table is set beside the measurement as comparable quantities: per column, each cell as a multiple
of the fastest (with bench's interval), bench's tie groups and the published order, Kendall's τ-b
between them. A framework the study has and bench did not run is a row that says why ("not run
here: ..."), never a row left out. Then each claim with its verdict and the figures it rests on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.errors import StatsError
from orchestrator.report.query import select
from orchestrator.stats import bootstrap, ranking
from orchestrator.studies import claims, kinds, measured, published
from orchestrator.studies.spec import Study, Table
from orchestrator.text.formats import Column, number, render
from orchestrator.text.terminal import markdown_cell

FORMATS = ("text", "markdown")
DASH = "—"


def report(study: Study, found: measured.Measured, fmt: str = "text") -> str:
    out = Lines(fmt)
    out.heading(1, f"{study.title} (study {study.name})")
    out.para(study.citation)
    out.para(_scales(study, found))
    if study.notes:
        out.para(study.notes)
    for table in study.tables:
        _table(out, study, table, found)
    out.heading(2, "Claims")
    verdicts = [kinds.judge(c, found.cells) for c in study.claims]
    if not verdicts:
        out.para("The study file states no claim.")
    rows = [
        {"claim": v.claim.id, "kind": v.claim.kind, "verdict": v.verdict, "says": v.claim.text}
        for v in verdicts
    ]
    out.table(rows, ("claim", "kind", "verdict", "says"))
    for v in verdicts:
        out.para(f"{v.claim.id} ({v.claim.source}): {v.verdict}" + (f"; {v.note}" if v.note else ""))
        out.items(v.figures)
    return out.text()


def _scales(study: Study, found: measured.Measured) -> str:
    machines = select.machine_labels(found.sweeps)
    read = [
        f"{s['name']} (sweep {s['id']}, started {s['started_at']}, on {machines[s['machine']]})"
        for s in found.sweeps
    ]
    scale = f"at scale {found.scale}" if found.scale else "at every scale"
    parts = [f"Measured {scale}: " + ("; ".join(read) if read else "nothing yet")]
    if found.missing:
        parts.append(f"not run yet: {', '.join(found.missing)} (bench study run {study.name})")
    if found.changed:
        parts.append(f"note: edited since its sweep ran: {', '.join(found.changed)}")
    if len(found.machines) > 1:
        parts.append(f"note: the sweeps ran on {len(found.machines)} machines, never pooled in one cell")
    return ". ".join(parts) + "."


def _table(out: Lines, study: Study, table: Table, found: measured.Measured) -> None:
    if table.published_only:
        _published_only(out, table)
        return
    pub = published.read_table(table)
    out.heading(2, f"Published beside measured: {table.name}")
    rows_kept = ", ".join(f"{k} {v}" for k, v in table.where)
    out.para(
        f"Published: {table.row}; unit {table.unit}{'; ' + rows_kept if rows_kept else ''}. "
        f"Measured: seconds per image, {_settings(table.measured) or 'every configuration'}; "
        "× the fastest is each cell over its column's fastest, bench's with its 95 % interval over runs."
        + (f" {table.notes}" if table.notes else "")
    )
    g = measured.grid(found.cells, table.measured, table.items, table.columns)
    if g.problem:
        out.para(f"Not compared: {g.problem}.")
        return
    summary: list[dict[str, str]] = []
    # Every published column, and every column bench measured that the study did not (shown, with
    # no published figure beside it, rather than left out).
    for column in sorted(set(pub.cells) | {k[0] for k in g.cells}, key=claims.level_key):
        where = Where(study, table, column, found)
        out.heading(3, f"{table.columns} {column}")
        try:
            rows, entry = _column(pub, column, g, where)
        except StatsError as exc:  # a stored figure unfit for statistics (a shared database's row)
            out.para(f"Not compared: {exc}")
            continue
        out.table(
            rows,
            (
                table.items,
                "published",
                "published × fastest",
                "bench ms/image",
                "n",
                "bench × fastest",
                "bench rank",
            ),
        )
        summary.append({table.columns: entry.pop("column"), **entry})
    if pub.lacking:
        out.items([f"not run here: {k} ({why})" for k, why in sorted(pub.lacking.items())])
    out.table(
        summary, (table.columns, "bench's tie groups, fastest first", "published order", "Kendall's τ-b")
    )


def _published_only(out: Lines, table: Table) -> None:
    """The table as the study printed it, with why bench has no figure beside it."""
    header, rows = published.read_rows(table)
    out.heading(2, f"Published only: {table.name}")
    rows_kept = ", ".join(f"{k} {v}" for k, v in table.where)
    out.para(
        f"Published: {table.row}; {table.value} in {table.unit}{'; ' + rows_kept if rows_kept else ''}. "
        f"Not measured here: {table.published_only}" + (f" {table.notes}" if table.notes else "")
    )
    shown = [k for k in header if k != published.NOTE or any(r[k] for r in rows)]
    out.table([{k: r[k] or DASH for k in shown} for r in rows], shown)


def _column(
    pub: published.Published, column: str, g: measured.Grid, where: Where
) -> tuple[list[dict[str, str]], dict[str, str]]:
    cells = pub.cells.get(column, {})
    ranked = pub.ranked(column)
    best = min(ranked.values()) if ranked else None
    runs = {k[1]: c.figures("seconds_per_image") for k, c in g.cells.items() if k[0] == column}
    runs = {k: v for k, v in runs.items() if v}
    groups = ranking.tie_groups(runs) if runs else []
    labels = ranking.rank_labels(groups)
    times = bootstrap.times_fastest(runs) if runs else {}
    rows: list[dict[str, str]] = []
    for item in sorted(set(cells) | set(runs), key=claims.level_key):
        cell = cells.get(item)
        row = {
            pub.table.items: item,
            "published": DASH
            if cell is None
            else (f"{cell.value:g}" if cell.value is not None else f"{DASH} ({cell.note})"),
            "published × fastest": f"{ranked[item] / best:.2f}" if item in ranked and best else DASH,
        }
        if item in runs:
            estimate = bootstrap.cell_estimate(runs[item])
            row.update(
                {
                    "bench ms/image": _interval(estimate.centre, estimate.low, estimate.high, 1000),
                    "n": str(estimate.n),
                    "bench × fastest": _interval(times[item].centre, times[item].low, times[item].high),
                    "bench rank": labels[item],
                }
            )
        elif cell is not None and cell.lacking:
            row.update({"bench ms/image": f"not run here: {cell.lacking}", "n": "0"})
        else:
            row.update({"bench ms/image": where.absent(item, g), "n": "0"})
        rows.append(row)
    entry = {
        "column": column,
        "bench's tie groups, fastest first": groups_text(groups) or DASH,
        "published order": ", ".join(sorted(ranked, key=ranked.__getitem__)),
        "Kendall's τ-b": _tau(ranking.ranks(groups), ranked),
    }
    return rows, entry


class Where:
    """Why a published cell has no measured one beside it, from the most basic cause on."""

    def __init__(self, study: Study, table: Table, column: str, found: measured.Measured) -> None:
        self.study, self.table, self.column, self.found = study, table, column, found

    def _runs(self, item: str, scales: Sequence[str] | None) -> bool:
        """Whether the study's matrices (of these scales) run `item` in this column, as the table
        measures it."""
        t = self.table
        return any(
            str(getattr(c, t.items)) == item
            and str(getattr(c, t.columns)) == self.column
            and all(measured.same(getattr(c, k), v) for k, v in t.measured)
            for m in self.study.matrices
            if scales is None or m.scale in scales
            for c in m.matrix.configs
        )

    def absent(self, item: str, g: measured.Grid) -> str:
        scale = self.found.scale
        if not self._runs(item, None):
            return "not run here: the study's matrices do not run it"
        if scale is not None and not self._runs(item, [scale]):
            others = [s for s in self.study.scales if self._runs(item, [s])]
            return f"not run here: not at scale {scale} (scale {', '.join(others)} runs it)"
        if not self.found.sweeps:
            return "not run here: no runs in the database yet"
        cell = next((c for k, c in g.cells.items() if k[0] == self.column and k[1] == item), None)
        if cell is None:
            return "not run here: no runs of it in the study's sweeps"
        return f"not run here: {cell.why_empty('seconds_per_image')}"


def _tau(bench: dict[str, int], ranked: dict[str, float]) -> str:
    common = sorted(set(bench) & set(ranked))
    if len(common) < 2:
        return DASH
    ordered = sorted(ranked[k] for k in common)
    theirs = {k: float(ordered.index(ranked[k]) + 1) for k in common}
    try:
        return f"{ranking.kendall_tau_b({k: float(bench[k]) for k in common}, theirs):.2f} over {len(common)}"
    except StatsError as exc:  # every bench cell tied: τ-b is undefined, and the report says why
        return f"{DASH} ({exc})"


def _interval(centre: float, low: float | None, high: float | None, scale: float = 1.0) -> str:
    text = number(centre * scale)
    if low is not None and high is not None:
        text += f" [{number(low * scale)}–{number(high * scale)}]"
    return text


def groups_text(groups: Sequence[Sequence[str]]) -> str:
    """Tie groups fastest first, a group in braces: "{pytorch, mxnet} → tensorflow"."""
    return " → ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in groups)


def _settings(pairs: Sequence[tuple[str, Any]]) -> str:
    return ", ".join(f"{k} {v}" for k, v in pairs)


class Lines:
    """The report's text, as plain text or markdown: headings, paragraphs, lists and tables."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.lines: list[str] = []

    def _safe(self, text: str) -> str:
        # A study's own words (its citation, notes, claims) are outside text: in markdown no link,
        # image or HTML of theirs may survive (text/terminal.py); in text the CLI makes it safe.
        return markdown_cell(text) if self.fmt == "markdown" else text

    def heading(self, level: int, text: str) -> None:
        text = self._safe(text)
        if self.fmt == "markdown":
            self.lines += ["#" * level + " " + text, ""]
        elif level < 3:
            self.lines += [text, ("=" if level == 1 else "-") * len(text), ""]
        else:
            self.lines += [text + ":", ""]

    def para(self, text: str) -> None:
        self.lines += [self._safe(text), ""]

    def items(self, items: Sequence[str]) -> None:
        if items:
            self.lines += [f"- {self._safe(i)}" for i in items] + [""]

    def table(self, rows: list[dict[str, str]], keys: Sequence[str]) -> None:
        if not rows:
            return
        columns = [Column(k, k, _text(k)) for k in keys]
        self.lines += [render(rows, columns, "markdown" if self.fmt == "markdown" else "table"), ""]

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def _text(key: str) -> Any:
    return lambda row: str(row.get(key, DASH))

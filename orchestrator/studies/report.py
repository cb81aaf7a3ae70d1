"""`bench study report`: a study's published figures beside bench's, and its claims judged.

Absolute times cannot match (other hardware, other versions, another scale), so each published
table is set beside the measurement as comparable quantities: per column, each cell as a multiple
of the fastest (with bench's interval), bench's tie groups and the published order, Kendall's τ-b
between them. A framework the study has and bench did not run is a row that says why ("not run
here: ..."), never a row left out. Then the scaling ratios (ratios.py), then each claim with its
verdict and the figures it rests on.

One report, three formats: it is written through a Writer (headings, paragraphs, lists, tables,
figures), Lines for text and markdown (which carry their figures in the tables and draw none),
page.Page for the self-contained HTML page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from orchestrator.errors import StatsError
from orchestrator.report.query import select
from orchestrator.stats import bootstrap, ranking
from orchestrator.studies import claims, kinds, measured, orders, published, ratios, releases_report, since
from orchestrator.studies.figures import Bar
from orchestrator.studies.spec import ACCURACY_UNITS, Study, Table
from orchestrator.text.formats import Column, number, render
from orchestrator.text.terminal import markdown_cell

FORMATS = ("text", "markdown", "html")
DASH = "—"


class Writer(Protocol):
    """What the report is written through: Lines (text, markdown) or page.Page (html)."""

    def heading(self, level: int, text: str) -> None: ...
    def para(self, text: str) -> None: ...
    def items(self, items: Sequence[str], made_safe: bool = False) -> None: ...
    def safe(self, text: str) -> str: ...
    def link(self, target: str) -> str: ...
    def table(
        self, rows: list[dict[str, str]], keys: Sequence[str], headers: dict[str, str] | None = None
    ) -> None: ...
    def figure(self, title: str, items_name: str, bars: Sequence[Bar]) -> None: ...
    def footer(self, text: str) -> None: ...
    def text(self) -> str: ...


def report(study: Study, found: measured.Measured, fmt: str = "text", footer: str = "") -> str:
    out: Writer = Lines(fmt)
    if fmt == "html":
        from orchestrator.studies import page  # matplotlib, loaded only for a page

        out = page.Page()
    out.heading(1, f"{study.title} (study {study.name})")
    out.para(study.citation)
    out.para(_scales(study, found))
    if study.notes:
        out.para(study.notes)
    # The releases matrix runs the table's configurations again at other releases: its cells are
    # its section's alone, never pooled with (or mistaken for) the study's other runs.
    found, by_release = _apart(study, found)
    agreements: list[since.Agreement] = []
    for table in study.tables:
        if table.unit in ACCURACY_UNITS:  # compared as orders only, never as levels
            agreements += orders.table(out, study, table, found)
        else:
            agreements += _table(out, study, table, found)
    _ratios(out, study, found)
    explained = releases_report.section(out, study, found, by_release)
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
    since.section(out, study.since, verdicts, agreements, explained)
    if footer:
        out.footer(footer)
    return out.text()


def _apart(study: Study, found: measured.Measured) -> tuple[measured.Measured, list[measured.Cell]]:
    """The study's cells less its releases matrix's, and those."""
    if study.releases is None:
        return found, []
    name = study.releases.matrix.sweep_name(study.name)
    ids = {s["id"] for s in found.sweeps if s["name"] == name}
    rest = [c for c in found.cells if c.sweep_id not in ids]
    return replace(found, cells=rest), [c for c in found.cells if c.sweep_id in ids]


def _ratios(out: Writer, study: Study, found: measured.Measured) -> None:
    if not study.ratios:
        return
    out.heading(2, "Scaling ratios")
    for t in ratios.tables(study.ratios, found):
        out.heading(3, f"{t.ratio.name}: {t.ratio.axis} {t.ratio.low} → {t.ratio.high}")
        out.para(t.intro)
        headers = {"row": ratios.dimensions(t.ratio), "bench": t.bench_header}
        out.table(t.rows, ratios.KEYS, headers)


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


def _table(out: Writer, study: Study, table: Table, found: measured.Measured) -> list[since.Agreement]:
    if table.published_only:
        _published_only(out, table)
        return []
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
        return []
    summary: list[dict[str, str]] = []
    agreements: list[since.Agreement] = []
    bars: list[Bar] = []
    # Every published column, and every column bench measured that the study did not (shown, with
    # no published figure beside it, rather than left out).
    for column in sorted(set(pub.cells) | {k[0] for k in g.cells}, key=claims.level_key):
        where = Where(study, table, column, found)
        out.heading(3, f"{table.columns} {column}")
        try:
            rows, entry, drawn = _column(pub, column, g, where)
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
        agreements.append(since.Agreement(table.name, table.items, table.columns, column, entry.pop("tau")))
        summary.append({table.columns: entry.pop("column"), **entry})
        bars += drawn
    out.figure(table.name, table.items, bars)
    if pub.lacking:
        out.items([f"not run here: {k} ({why})" for k, why in sorted(pub.lacking.items())])
    out.table(
        summary, (table.columns, "bench's tie groups, fastest first", "published order", "Kendall's τ-b")
    )
    return agreements


def _published_only(out: Writer, table: Table) -> None:
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
) -> tuple[list[dict[str, str]], dict[str, Any], list[Bar]]:
    cells = pub.cells.get(column, {})
    ranked = pub.ranked(column)
    best = min(ranked.values()) if ranked else None
    runs = {k[1]: c.figures("seconds_per_image") for k, c in g.cells.items() if k[0] == column}
    runs = {k: v for k, v in runs.items() if v}
    groups = ranking.tie_groups(runs) if runs else []
    labels = ranking.rank_labels(groups)
    times = bootstrap.times_fastest(runs) if runs else {}
    rows: list[dict[str, str]] = []
    bars: list[Bar] = []
    for item in sorted(set(cells) | set(runs), key=claims.level_key):
        cell = cells.get(item)
        shown = ranked[item] / best if item in ranked and best else None
        bars.append(Bar(column, item, shown, times.get(item)))
        row = {
            pub.table.items: item,
            "published": DASH
            if cell is None
            else (f"{cell.value:g}" if cell.value is not None else f"{DASH} ({cell.note})"),
            "published × fastest": DASH if shown is None else f"{shown:.2f}",
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
    tau_text, tau = since.tau_b(ranking.ranks(groups), ranked)
    entry: dict[str, Any] = {
        "column": column,
        "bench's tie groups, fastest first": groups_text(groups) or DASH,
        "published order": ", ".join(sorted(ranked, key=ranked.__getitem__)),
        "Kendall's τ-b": tau_text,
        "tau": tau,
    }
    return rows, entry, bars


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
        self.tail = ""

    def safe(self, text: str) -> str:
        # A study's own words (its citation, notes, claims) are outside text: in markdown no link,
        # image or HTML of theirs may survive (text/terminal.py); in text the CLI makes it safe.
        return markdown_cell(text) if self.fmt == "markdown" else text

    def heading(self, level: int, text: str) -> None:
        text = self.safe(text)
        if self.fmt == "markdown":
            self.lines += ["#" * level + " " + text, ""]
        elif level < 3:
            self.lines += [text, ("=" if level == 1 else "-") * len(text), ""]
        else:
            self.lines += [text + ":", ""]

    def para(self, text: str) -> None:
        self.lines += [self.safe(text), ""]

    def items(self, items: Sequence[str], made_safe: bool = False) -> None:
        """A list; `made_safe`: its items went through safe() already, with links of link()'s."""
        if items:
            self.lines += [f"- {i if made_safe else self.safe(i)}" for i in items] + [""]

    def table(
        self, rows: list[dict[str, str]], keys: Sequence[str], headers: dict[str, str] | None = None
    ) -> None:
        if not rows:
            return
        columns = [Column((headers or {}).get(k, k), k, _text(k)) for k in keys]
        self.lines += [render(rows, columns, "markdown" if self.fmt == "markdown" else "table"), ""]

    def link(self, target: str) -> str:
        """A link to a page of bench's docs (since.SEE: a path under docs/ and an anchor, nothing
        else): in markdown relative to docs/studies/, where the generated pages live."""
        if self.fmt != "markdown":
            return target
        shown = target.replace("_", "\\_")
        return f"[{shown}](../{target.removeprefix('docs/')})"

    def figure(self, title: str, items_name: str, bars: Sequence[Bar]) -> None:
        """Figures are the page's alone: text and markdown carry their figures in the tables."""

    def footer(self, text: str) -> None:
        self.tail = text

    def text(self) -> str:
        body = "\n".join(self.lines).rstrip() + "\n"
        return f"{body}\n\n{self.tail}" if self.tail else body


def _text(key: str) -> Any:
    return lambda row: str(row.get(key, DASH))

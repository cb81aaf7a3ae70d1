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
from orchestrator.stats import bootstrap, ranking
from orchestrator.studies import claims, measured, published
from orchestrator.studies.spec import Study, Table
from orchestrator.text.formats import Column, render

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
    verdicts = [claims.judge(c, found.cells) for c in study.claims]
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
    read = [f"{s['name']} (sweep {s['id']}, started {s['started_at']}, on {s['host']})" for s in found.sweeps]
    parts = ["Measured: " + ("; ".join(read) if read else "nothing yet")]
    if found.missing:
        parts.append(f"not run yet: {', '.join(found.missing)} (bench study run {study.name})")
    if len(found.machines) > 1:
        parts.append(f"note: the sweeps ran on {len(found.machines)} machines")
    return ". ".join(parts) + "."


def _table(out: Lines, study: Study, table: Table, found: measured.Measured) -> None:
    pub = published.read_table(table)
    out.heading(2, f"Published beside measured: {table.name}")
    where = ", ".join(f"{k} {v}" for k, v in table.where)
    out.para(
        f"Published: {table.row}; unit {table.unit}{'; ' + where if where else ''}. "
        f"Measured: seconds per image, {_settings(table.measured) or 'every configuration'}; "
        "× the fastest is each cell over its column's fastest, bench's with its 95 % interval over runs."
        + (f" {table.notes}" if table.notes else "")
    )
    g = measured.grid(found.cells, table.measured, table.items, table.columns)
    if g.problem:
        out.para(f"Not compared: {g.problem}.")
        return
    ran = {str(getattr(c, table.items)) for m in study.matrices for c in m.matrix.configs}
    summary = []
    for column in sorted(pub.cells, key=claims.level_key):
        rows, entry = _column(pub, column, g, ran, bool(found.sweeps))
        out.heading(3, f"{table.columns} {column}")
        out.table(
            rows,
            (
                "framework",
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
    out.table(summary, (table.columns, "bench's tie groups", "published order", "Kendall's τ-b"))


def _column(
    pub: published.Published, column: str, g: measured.Grid, ran: set[str], any_runs: bool
) -> tuple[list[dict[str, str]], dict[str, str]]:
    cells = pub.cells[column]
    ranked = pub.ranked(column)
    best = min(ranked.values()) if ranked else None
    runs = {k[1]: c.figures("seconds_per_image") for k, c in g.cells.items() if k[0] == column}
    runs = {k: v for k, v in runs.items() if v}
    groups = ranking.tie_groups(runs) if runs else []
    labels = ranking.rank_labels(groups)
    times = bootstrap.times_fastest(runs) if runs else {}
    rows = []
    for item in sorted(set(cells) | set(runs)):
        cell = cells.get(item)
        row = {
            "framework": item,
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
            row.update({"bench ms/image": _absent(item, column, g, ran, any_runs), "n": "0"})
        rows.append(row)
    entry = {
        "column": column,
        "bench's tie groups": " > ".join("{" + ", ".join(x) + "}" if len(x) > 1 else x[0] for x in groups)
        or DASH,
        "published order": ", ".join(sorted(ranked, key=ranked.__getitem__)),
        "Kendall's τ-b": _tau(ranking.ranks(groups), ranked),
    }
    return rows, entry


def _absent(item: str, column: str, g: measured.Grid, ran: set[str], any_runs: bool) -> str:
    if item not in ran:
        return "not run here: the study's matrices do not run it"
    if not any_runs:
        return "not run here: no runs in the database yet"
    cell = next((c for k, c in g.cells.items() if k[0] == column and k[1] == item), None)
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
    text = f"{centre * scale:.3g}"
    if low is not None and high is not None:
        text += f" [{low * scale:.3g}–{high * scale:.3g}]"
    return text


def _settings(pairs: Sequence[tuple[str, Any]]) -> str:
    return ", ".join(f"{k} {v}" for k, v in pairs)


class Lines:
    """The report's text, as plain text or markdown: headings, paragraphs, lists and tables."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.lines: list[str] = []

    def heading(self, level: int, text: str) -> None:
        if self.fmt == "markdown":
            self.lines += ["#" * level + " " + text, ""]
        elif level < 3:
            self.lines += [text, ("=" if level == 1 else "-") * len(text), ""]
        else:
            self.lines += [text + ":", ""]

    def para(self, text: str) -> None:
        self.lines += [text, ""]

    def items(self, items: Sequence[str]) -> None:
        if items:
            self.lines += [f"- {i}" for i in items] + [""]

    def table(self, rows: list[dict[str, str]], keys: Sequence[str]) -> None:
        if not rows:
            return
        columns = [Column(k, k, _text(k)) for k in keys]
        self.lines += [render(rows, columns, "markdown" if self.fmt == "markdown" else "table"), ""]

    def text(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def _text(key: str) -> Any:
    return lambda row: str(row.get(key, DASH))

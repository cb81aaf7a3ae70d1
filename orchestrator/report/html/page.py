"""`bench report --html DIR`: one self-contained page of a sweep's results.

DIR/index.html carries every plot as a data URI, so the one file opens from disk and can be mailed
as it is; the same PNGs are written to DIR/plots/ for papers. Every text that comes from the
database is escaped.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from orchestrator import __version__
from orchestrator.config import matrix, samples
from orchestrator.report.html import figures, figures_modes, figures_runs, figures_scaling, figures_versions
from orchestrator.report.html.figures import Row, Section
from orchestrator.report.html.figures_runs import Matcher
from orchestrator.report.notes import calibration
from orchestrator.report.postmortem import crashes
from orchestrator.report.query.select import Selection, latest_runs
from orchestrator.report.query.sweeps import pick_sweep
from orchestrator.report.tables import comparison, results
from orchestrator.storage.db import Database
from orchestrator.storage.setting_columns import run_columns
from orchestrator.text.formats import Column
from orchestrator.text.terminal import safe


def escape(text: object) -> str:
    """HTML-escaped, and controls and bidi overrides shown as escapes, as in the terminal: a page
    must not reorder or hide what a run said either."""
    return html.escape(safe(text))


STDERR_LINES = 40
MAX_ROWS = 500  # rows of a table on the page; the rest are a command away
BULKY = {"traceback", "stderr_tail", "last_event"}
COMPARISON = (
    "The research's comparison: median seconds per epoch, frameworks as rows, model and device as "
    "columns (`bench report --table comparison`); every configuration's row below it."
)
CRASHES = "Every configuration that did not end ok: where it died, why, and its evidence (open the details)."
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
.meta { color: #555; margin: 0.1em 0; } .empty { color: #8a5a00; background: #fff6e0; padding: 0.6em 1em;
       border-left: 4px solid #e0a800; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.92em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.disturbed td { background: #fdecea; }
pre { white-space: pre-wrap; font-size: 0.85em; background: #f6f6f6; padding: 0.5em; margin: 0.3em 0; }
details summary { cursor: pointer; color: #0a58ca; }
nav ul { columns: 2; } .scroll { overflow-x: auto; } .note { font-size: 0.9em; color: #555; }
@media print { .scroll { overflow: visible; } figure { break-inside: avoid; } nav { display: none; } }
"""


def html_table(rows: Sequence[Row], columns: Sequence[Column], markup: Sequence[str] = ()) -> str:
    """The rows as an HTML table, cells as the terminal table shows them (Column.fmt), escaped;
    the columns named in `markup` make their own HTML."""
    head = "".join(f"<th>{escape(c.header)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            numeric = isinstance(row.get(c.key), int | float) and not isinstance(row.get(c.key), bool)
            css = ' class="num"' if numeric else ""
            text = c.fmt(row) if c.key in markup else escape(c.fmt(row))
            cells.append(f"<td{css}>{text}</td>")
        # A disturbed run's timing is marked "!" in its cell (as in the terminal) and its row tinted.
        tr = (
            '<tr class="disturbed" title="disturbed: other load during its timed epochs">'
            if row.get("disturbed") and row.get("outcome", "ok") == "ok"  # a failed run has no timing
            else "<tr>"
        )
        body.append(tr + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def comparison_table(db: Database, sel: Selection, runs: Sequence[Row]) -> str:
    """The research's comparison table (tables/comparison.py), then every configuration's row."""
    table = comparison.comparison(db, sel)
    every = table.notes + calibration.notes(db, [s["id"] for s in sel.sweeps])
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in every)
    parts = [f"<p>{escape(table.title)}</p>", html_table(table.rows, table.columns), notes]
    rows = html_table(runs[:MAX_ROWS], results.RESULT_COLUMNS) + _more(len(runs), MAX_ROWS, "bench report")
    parts.append(
        f"<details><summary>every configuration ({len(runs)}): outcome, epoch seconds, images/s, "
        f"ms/image, validation accuracy, samples and spread</summary>{rows}</details>"
    )
    return "".join(parts)


def _pre(label: str, text: str | None, last: int | None = None) -> str:
    if not text:
        return ""
    lines = safe(text).rstrip().split("\n")  # escaped first: no other separator splits it
    if last is not None:
        lines = lines[-last:]
    return f"<details><summary>{escape(label)}</summary><pre>{escape(chr(10).join(lines))}</pre></details>"


def _evidence(run: Row) -> str:
    parts = []
    if run.get("exit_code") is not None:
        parts.append(f"exit code {run['exit_code']}")
    if run.get("signal_number") is not None:
        parts.append(f"signal {run['signal_number']} ({run.get('signal_name') or '?'})")
    summary = f"<div>{escape(', '.join(parts))}</div>" if parts else ""
    return (
        summary
        + _pre("traceback", run.get("traceback"))
        + _pre(f"stderr (last {STDERR_LINES} lines)", run.get("stderr_tail"), STDERR_LINES)
        + _pre("last event", run.get("last_event"))
        + _pre("logs and how to reproduce", f"{run['run_dir']}\nbench rerun {run['id']}")
    )


def crash_list(failed: Sequence[Row], total: int) -> str:
    """The failed runs (with their evidence columns), the first MAX_ROWS of `total` failures."""
    if not total:
        return '<p class="empty">Every configuration ended ok: nothing crashed.</p>'
    # The full reason here (the terminal table cuts it at 120 characters), and the evidence beside it.
    columns = [c for c in crashes.CRASH_COLUMNS if c.key != "reason"]
    columns += [Column("why", "reason", crashes.why), Column("evidence", "evidence", _evidence)]
    return html_table(failed, columns, markup=("evidence",)) + _more(
        total, len(failed), "bench report --crashes"
    )


def _more(total: int, shown: int, command: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="note">The first {shown} of {total}; all of them: <code>{escape(command)}</code>.</p>'


def evidence(db: Database, runs: Sequence[Row]) -> list[Row]:
    """The first MAX_ROWS failed runs with every column: stderr tails and tracebacks are read only
    for the runs the crash list shows (a long study's would weigh megabytes)."""
    ids = [r["id"] for r in runs if r["outcome"] != "ok"][:MAX_ROWS]
    return list(db.rows(sa.select(*run_columns(db.runs)).where(db.runs.c.id.in_(ids)).order_by(db.runs.c.id)))


def _img(plot: figures.Plot) -> str:
    data = base64.b64encode(plot.png).decode("ascii")
    # The lines the picture draws, as JSON (label, x, y values): readable by a program, and by a
    # test, which cannot read a PNG's lines.
    series = f' data-series="{escape(json.dumps(plot.series))}"' if plot.series else ""
    return (
        f'<figure><img id="plot-{escape(plot.id)}" data-plot="{escape(plot.id)}"{series} '
        f'alt="{escape(plot.title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape(plot.caption)} (plots/{escape(plot.id)}.png)</figcaption></figure>"
    )


def _section(section: Section, extra: str = "") -> str:
    body = [f'<section id="{section.id}"><h2>{escape(section.title)}</h2>']
    body.append(f'<p class="note">{escape(section.intro)}</p>')
    if section.empty:
        body.append(f'<p class="empty" data-empty="{section.id}">{escape(section.empty)}</p>')
    body += [_img(p) for p in section.plots]
    return "\n".join(body) + extra + "</section>"


def _sweep_line(sweep: Row) -> str:
    ended = f", ended {sweep['ended_at']}" if sweep.get("ended_at") else ""
    commit = f", git {sweep['git_commit'][:12]}" if sweep.get("git_commit") else ""
    return escape(
        f"Sweep {sweep['id']} '{sweep['name']}' ({sweep['status']}, started {sweep['started_at']}{ended}; "
        f"bench {sweep['bench_version']}{commit}): {sweep['command']}"
    )


def _header(sweeps: Sequence[Row], runs: Sequence[Row]) -> str:
    counts = Counter(r["outcome"] for r in runs)
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items())) or "no runs"
    machines = sorted({f"{s['machine']} (host {s['host']})" for s in sweeps})
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"<h1>bench report: {escape(_title(sweeps))}</h1>"]
    lines += [f'<p class="meta">{_sweep_line(s)}</p>' for s in sweeps]
    lines += [f'<p class="meta">Machine: {escape(m)}</p>' for m in machines]
    if len(machines) > 1:
        lines.append('<p class="note">Several machines: their runs are never pooled in one number.</p>')
    lines.append(
        f'<p class="meta">{len(runs)} configurations: {escape(summary)}. '
        f"Page made {now} by bench {escape(__version__)}.</p>"
    )
    return "\n".join(lines)


def _title(sweeps: Sequence[Row]) -> str:
    if len(sweeps) == 1:
        return f"sweep {sweeps[0]['id']} '{sweeps[0]['name']}'"
    return "sweeps " + ", ".join(str(s["id"]) for s in sweeps)


def timeline_matcher(text: str | None) -> tuple[Matcher | None, str]:
    """--timeline-config KEY=VALUE,...: which runs may give the timelines, and that in words."""
    if text is None:
        return (
            None,
            "per framework, the ok run with the most samples at the configuration most frameworks share",
        )
    wanted = matrix.parse_only(text, "--timeline-config")

    def accepts(run: Row) -> bool:
        config = figures.config_of(run)
        return all(config.get(key) in values for key, values in wanted.items())

    return accepts, f"{text} (per framework, the ok run with the most samples among those)"


def selected_runs(db: Database, sel: Selection) -> list[Row]:
    """The latest attempt of each configuration in each selected sweep, after --where; every column
    but the bulky evidence (see `evidence`)."""
    columns = [c.name for c in db.runs.c if c.name not in BULKY]
    return [samples.mark_run(r) for r in latest_runs(db, sel, columns)]  # the samples and spread columns


def _toc(sections: Sequence[Section]) -> str:
    items = "".join(f'<li><a href="#{s.id}">{escape(s.title)}</a></li>' for s in sections)
    return f"<nav><ul>{items}</ul></nav>"


def build(db: Database, sel: Selection, timeline_config: str | None) -> tuple[str, list[Section]]:
    """The page's HTML and its sections (whose plots are to be written beside it)."""
    wanted, how = timeline_matcher(timeline_config)
    sweeps = [pick_sweep(db, s["id"]) for s in sel.sweeps]
    runs = selected_runs(db, sel)
    figures.label_machines(runs, sweeps)
    comparison = Section("comparison", "Comparison table", COMPARISON, empty=None if runs else "No runs.")
    modes = figures_modes.modes_section(db, sel)  # only where more than one mode or precision ran
    scaled = figures_scaling.scaling_section(db, sel)  # only where more than one replica count ran
    releases = figures_versions.versions_section(db, sel)  # only where a framework ran two releases
    plotted = [
        figures.batch_section(runs),
        *([modes] if modes else []),
        *([scaled] if scaled else []),
        *([releases] if releases else []),
        figures.accuracy_section(db, runs),
        figures_runs.timeline_section(db, runs, wanted, how),
        figures_runs.crash_map_section(runs),
    ]
    crashes = Section("crashes", "Crash list", CRASHES)
    failures = sum(r["outcome"] != "ok" for r in runs)
    body = [
        _section(comparison, comparison_table(db, sel, runs) if runs else ""),
        *(_section(s) for s in plotted),
        _section(crashes, crash_list(evidence(db, runs), failures)),
    ]
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>bench report: {escape(_title(sweeps))}</title><style>{STYLE}</style></head><body>\n"
        + _header(sweeps, runs)
        + _toc([comparison, *plotted, crashes])
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    return page, plotted


def write(db: Database, sel: Selection, out_dir: Path, timeline_config: str | None) -> Path:
    """Write DIR/index.html and DIR/plots/*.png; returns the page's path."""
    page, sections = build(db, sel, timeline_config)
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    # The plots of an earlier page in this folder go, so plots/ matches the page; only files bench
    # listed as its own are removed, never anything else a user keeps there.
    manifest = plot_dir / ".bench-plots"
    if manifest.exists():
        for name in manifest.read_text().split():
            (plot_dir / Path(name).name).unlink(missing_ok=True)
    names = [f"{plot.id}.png" for section in sections for plot in section.plots]
    for section in sections:
        for plot in section.plots:
            (plot_dir / f"{plot.id}.png").write_bytes(plot.png)
    manifest.write_text("\n".join(names) + "\n")
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    return index

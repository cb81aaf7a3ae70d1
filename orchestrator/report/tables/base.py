"""What every table of `bench report --table NAME` shares: the Table, its rendering, the rows read
back with their labels, the columns of the settings that tell rows apart, and the cells.

Every builder returns a `Table`: display `rows` and `columns` (tables.Column, for the terminal,
markdown or HTML) and tidy `records` (one measurement per row, raw numbers, for CSV, JSON and
plots). Cells are medians with their min–max spread; units are in the headers. See docs/reports.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import FAULT_FIELDS
from orchestrator.config.values import cut
from orchestrator.report.notes.units import token_unit_notes
from orchestrator.report.query import execution
from orchestrator.report.query.select import (
    Selection,
    disturbed_mark,
    disturbed_note,
    machine_labels,
    machine_note,
    node_machine_label,
    summaries,
    varying,
)
from orchestrator.report.query.sweeps import sweep_heading
from orchestrator.stats import bootstrap
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number, render
from workers import models


@dataclass
class Table:
    """One report table: display rows and columns, and the same data as tidy raw records."""

    name: str
    title: str
    columns: list[Column] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    record_keys: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sweeps: Sequence[dict[str, Any]] = ()
    machines: dict[str, str] = field(default_factory=dict)  # label -> fingerprint


def render_table(table: Table, fmt: str) -> str:
    if fmt == "csv":
        return render(table.records, [Column(k, k) for k in table.record_keys], "csv")
    if fmt == "json":
        document = {
            "table": table.name,
            "title": table.title,
            "sweeps": list(table.sweeps),
            "machines": table.machines,
            "notes": table.notes,
            "rows": table.records,
        }
        return json.dumps(document, indent=2, default=str)
    parts = [*sweeps_heading(table.sweeps), table.title]
    parts.append(render(table.rows, table.columns, fmt) if table.rows else "no runs match")
    # Markdown needs blank lines to keep the heading, the table and the notes apart.
    return ("\n\n" if fmt == "markdown" else "\n").join(parts + table.notes)


def sweeps_heading(sweeps: Sequence[dict[str, Any]]) -> list[str]:
    if len(sweeps) <= 3:
        return [sweep_heading(s) for s in sweeps]
    return [f"{len(sweeps)} sweeps, {sweeps[0]['id']} to {sweeps[-1]['id']}"]


# --- shared pieces ------------------------------------------------------------------------------


def field_text(name: str, value: Any) -> str:
    if value is None:
        return {"cpus": "all", "task": "train", "features": "no"}.get(name, "—")
    if name == "threads":
        return str(value) if value else "default"
    if name == "features":
        return "yes" if value else "no"
    if name == "lr":
        return f"{value:g}"
    return number(value)


# Headers of the settings that have a unit; the others are counts or names.
HEADERS = {
    "dataset_size": "dataset (images)",
    "image_size": "image (px)",
    "timeout": "timeout (s)",
    "memory_budget": "memory budget (bytes)",
    "gpu_memory_budget": "GPU memory budget (bytes)",
    "sample_interval": "sample interval (s)",
    "mode_label": "mode",
    "precision_label": "precision",
}
# The configuration's mode and precision are shown as what ran (execution.mode_label), which also
# tells an unset mode from an explicit one: the label columns stand for these fields.
LABELS = {"mode": "mode_label", "precision": "precision_label"}


def key_column(key: str) -> Column:
    return Column(HEADERS.get(key, key), key, lambda r: field_text(key, r.get(key)))


def key_columns(keys: Sequence[str]) -> list[Column]:
    """A column per key, except the fault worker's settings, which share one column."""
    faults = [k for k in keys if k in FAULT_FIELDS]
    columns = [key_column(k) for k in keys if k not in FAULT_FIELDS]
    if faults:
        column = Column("fault", faults[0], lambda r: fault_text(r, faults))
        columns.insert(list(keys).index(faults[0]), column)
    return columns


def fault_text(row: dict[str, Any], keys: Sequence[str]) -> str:
    """`segfault after_steps=3`: what the fault worker was told to do; — for a real framework."""
    if row.get("framework") != "fault":
        return "—"
    settings = [f"{k}={field_text(k, row.get(k))}" for k in keys if k != "fault" and row.get(k) is not None]
    return " ".join([row.get("fault") or "ok", *settings])


def with_range(
    median: float | None,
    low: float | None,
    high: float | None,
    scale: float = 1.0,
    text: Callable[[float], str] = number,
) -> str:
    """`1.23 (1.20–1.31)`; the range is left out when there is one value."""
    if median is None:
        return "—"
    cell = text(median * scale)
    if low is not None and high is not None and low != high:
        cell += f" ({text(low * scale)}–{text(high * scale)})"
    return cell


def throughput(r: dict[str, Any]) -> None:
    """The images of an epoch, and the samples mark. Every unit's median and range were derived
    from one aggregate, the cell's seconds per image (select._pooled, orchestrator/config/samples.py),
    so images/s × ms/image = 1000 on every row and the range ends agree likewise."""
    steps = r.get("steps_per_epoch")
    r["images_per_epoch"] = steps * samples.global_batch(r) if steps and r.get("batch_size") else None
    r["samples_mark"] = samples.cell_marks(r) if r.get("ok_runs") else ""
    tokens = models.tokens_per_sample(r["model"], r.get("sequence_length")) if r.get("model") else None
    for which in ("median", "min", "max"):  # a token model's sequences/s in tokens
        value = r.get(f"images_per_second_{which}")
        r[f"tokens_per_second_{which}"] = value * tokens if tokens and value is not None else None


TOKEN_KEYS = ["tokens_per_second_median", "tokens_per_second_min", "tokens_per_second_max"]


def token_columns(rows: Sequence[dict[str, Any]]) -> list[Column]:
    """tokens/s, where a token model is among the rows (after throughput() filled them)."""
    if not any(r.get("tokens_per_second_median") is not None for r in rows):
        return []
    return [
        Column(
            "tokens/s (median, min–max)",
            "tokens_per_second_median",
            lambda r: with_range(
                r.get("tokens_per_second_median"),
                r.get("tokens_per_second_min"),
                r.get("tokens_per_second_max"),
                text=lambda v: number(v, 4),
            ),
        )
    ]


def load(
    sel: Selection, db: Database, task: str | None = "train"
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """The configurations' summaries with a machine label each, and the machine note if any;
    only those of `task` (train, inference; None: both)."""
    labels = machine_labels(sel.sweeps)
    rows = summaries(db, sel)
    for row in rows:  # a Ray sweep's nodes of another kind than the driver's machine
        labels.setdefault(row["machine"], node_machine_label(row["machine"]))
    order = {fp: i for i, fp in enumerate(labels)}  # machines in the order of their first sweep
    if task is not None:
        rows = [r for r in rows if (r.get("task") or "train") == task]
    for row in rows:
        row["fingerprint"] = row["machine"]
        row["machine"] = labels[row["machine"]]
        row["machine_order"] = order[row["fingerprint"]]
        label_execution(row)
    used = {fp: label for fp, label in labels.items() if any(r["fingerprint"] == fp for r in rows)}
    note = machine_note(used)
    notes = [note] if note else []
    notes += disturbed_note(rows)
    notes += token_unit_notes(rows)
    return rows, used, notes


def label_execution(row: dict[str, Any]) -> None:
    """The row's mode and precision as they ran, labelled (execution.mode_label)."""
    row["mode_label"] = execution.mode_label(row)
    row["precision_label"] = execution.precision_label(row)


def keys_of(rows: list[dict[str, Any]], always: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """What tells rows apart: the machine where there are several, the fields always shown, and
    every other field that varies in the selection, so no two configurations share a row. The mode
    and precision are their labels (what ran), shown wherever those vary: runs of different modes
    or precisions never share a row or a cell."""
    machine = ["machine"] if len({r["machine"] for r in rows}) > 1 else []
    extra = [f for f in varying(rows) if f not in LABELS and f not in always and f not in exclude]
    labels = [
        label
        for field, label in LABELS.items()
        if field not in exclude and label not in always and len({r[label] for r in rows}) > 1
    ]
    return machine + list(always) + labels + extra


def sample_columns() -> list[Column]:
    """A cell's timing samples and their spread (orchestrator/config/samples.py), marked where wide or few."""
    return [
        Column("samples", "timed_epochs", samples.count_text),
        Column("spread", "relative_spread", samples.spread_text),
    ]


def sorting(keys: Sequence[str]) -> list[str]:
    """Sort keys: machines in the order of their first sweep, not by name."""
    return ["machine_order" if k == "machine" else k for k in keys]


def new_table(name: str, title: str, sel: Selection, machines: dict[str, str], notes: list[str]) -> Table:
    labels = {label: fp for fp, label in machines.items()}
    return Table(name, title, notes=notes, sweeps=sel.sweeps, machines=labels)


def record_of(row: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: row.get(k) for k in keys}


# --- cells ---------------------------------------------------------------------------------------

REASON_LIMIT = 100  # characters of a failed cell's reason in the table; CSV and JSON keep it whole


def outcome_text(r: dict[str, Any]) -> str:
    """A cell's outcome: ok (and how many runs failed beside), else the outcome and its reason, cut."""
    if r.get("ok_runs"):
        failed = r.get("failed") or []
        return f"ok (+{len(failed)} {'/'.join(sorted(set(failed)))})" if failed else "ok"
    reason = r.get("reason")
    return f"{r['outcome']}: {cut(str(reason), REASON_LIMIT)}" if reason else str(r["outcome"])


def measured_cell(r: dict[str, Any], key: str) -> str:
    """`key`'s median (min–max) where a run ended ok, with the samples and disturbance marks; — else.
    `key` names the three: `step_ms` reads step_ms_median, step_ms_min and step_ms_max."""
    if not r.get("ok_runs"):
        return "—"
    text = with_range(r[f"{key}_median"], r[f"{key}_min"], r[f"{key}_max"])
    text += f" {r['samples_mark']}" if r.get("samples_mark") else ""
    return text + disturbed_mark(r)


def against_baseline(r: dict[str, Any], value: float | None, text: Callable[[float], str]) -> str:
    """A figure over the row's baseline (r["baseline"]): "baseline" on the baseline's own row. A
    disturbed side makes the ratio untrustworthy too: marked as the figures it comes from are."""
    if value is None:
        return "—"
    if r["baseline"] is r:
        return "baseline"
    return text(value) + (disturbed_mark(r) or disturbed_mark(r["baseline"]))


# A cell's runs (`runs: N`): how many ok, undisturbed runs it rests on and the 95 % bootstrap
# interval of their median seconds per image (query/select.py: interval).
INTERVAL_KEYS = ["n", "seconds_per_image_low", "seconds_per_image_high"]


def interval_cell(r: dict[str, Any]) -> str:
    """`24.1–26.9 (n=5)` ms per image; `n=1` for a single run, which has no interval; — else."""
    low, high, n = r.get("seconds_per_image_low"), r.get("seconds_per_image_high"), r.get("n") or 0
    if low is None or high is None:
        return f"n={n}" if n else "—"
    return f"{number(low * 1000)}–{number(high * 1000)} (n={n})"


def interval_columns(rows: Sequence[dict[str, Any]]) -> list[Column]:
    """The column of the interval over runs, where a cell of the table ran more than once."""
    if not any((r.get("n") or 0) > 1 for r in rows):
        return []
    return [Column("ms/image 95 % over runs", "seconds_per_image_low", interval_cell)]


def rate_interval_cell(r: dict[str, Any]) -> str:
    """images/s over runs: `37.2–41.0 (n=5)`, the interval of the median seconds per image turned
    over; `n=1` for a single run; — else."""
    low, high, n = r.get("seconds_per_image_low"), r.get("seconds_per_image_high"), r.get("n") or 0
    if not low or not high:
        return f"n={n}" if n else "—"
    return f"{number(1 / high)}–{number(1 / low)} (n={n})"


def rate_interval_columns(rows: Sequence[dict[str, Any]]) -> list[Column]:
    """images/s 95 % over runs, where a cell of the table ran more than once (tables that show
    throughput rather than time)."""
    if not any((r.get("n") or 0) > 1 for r in rows):
        return []
    return [Column("images/s 95 % over runs", "seconds_per_image_high", rate_interval_cell)]


def speedup_interval(r: dict[str, Any], base: dict[str, Any] | None, scale: float = 1.0) -> tuple[Any, Any]:
    """The 95 % interval of a speed-up, the base cell's seconds per image over this cell's (above 1:
    this cell is faster), times `scale`, from both cells' runs (stats/bootstrap.ratio: each cell
    resampled on its own); (None, None) where either cell rests on fewer than two runs, whose
    speed-up keeps its figure with no interval. The base's own row has none either."""
    if base is None or base is r or (r.get("n") or 0) < 2 or (base.get("n") or 0) < 2:
        return None, None
    found = bootstrap.ratio(r["run_figures"], base["run_figures"])  # base / this
    if found.low is None or found.high is None:
        return None, None
    return found.low * scale, found.high * scale


def set_speedup_interval(
    r: dict[str, Any], key: str, base: dict[str, Any] | None, scale: float = 1.0
) -> None:
    """r[key + "_low"] and r[key + "_high"]: speedup_interval, where r[key] has a figure."""
    low, high = speedup_interval(r, base, scale) if r.get(key) is not None else (None, None)
    r[f"{key}_low"], r[f"{key}_high"] = low, high


def with_interval(r: dict[str, Any], key: str, text: Callable[[float], str]) -> str:
    """A ratio's text and, where it has one, its interval: `×1.85 [1.70–1.98]`."""
    low, high = r.get(f"{key}_low"), r.get(f"{key}_high")
    value = text(r[key])
    if low is None or high is None:
        return value
    return f"{value} [{text(low).lstrip('×')}–{text(high).lstrip('×')}]"


def ips_cell(r: dict[str, Any]) -> str:
    """images/s, median (min–max), marked where disturbed (the batch and inference tables)."""
    ips = with_range(r["images_per_second_median"], r["images_per_second_min"], r["images_per_second_max"])
    return ips + disturbed_mark(r) if r["images_per_second_median"] is not None else ips

"""`bench report --table NAME`: the research's tables, each built as plain rows and columns.

Every builder returns a `Table`: display `rows` and `columns` (tables.Column, for the terminal,
markdown or HTML) and tidy `records` (one measurement per row, raw numbers, for CSV, JSON and
plots). Cells are medians with their min–max spread; units are in the headers. See docs/reports.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.run_config import FAULT_FIELDS
from orchestrator.report import execution, fairness, footnotes
from orchestrator.report.results import sweep_heading, token_unit_notes
from orchestrator.report.select import (
    DISTURBANCE_KEYS,
    GROUP_KEYS,
    Selection,
    disturbed_mark,
    disturbed_note,
    latest_ids,
    machine_labels,
    machine_note,
    node_machine_label,
    run_machine,
    sort_key,
    spread,
    summaries,
    varying,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number, render
from workers import models

DEVICE_NAMES = {"cpu": "CPU", "cuda": "GPU"}
ACCURACY_STEP = 5  # the research reads validation accuracy at epochs 5, 10, ...


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


def fraction(value: float) -> str:
    """Accuracy as the results table shows it: three decimals."""
    return f"{value:.3f}"


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


# --- the research's comparison: framework rows, model × device columns --------------------------


def _epoch_cell(s: dict[str, Any] | None) -> str:
    """Median epoch seconds (min–max); the outcome where no run ended ok; — where nothing ran."""
    if s is None:
        return "—"
    if not s["ok_runs"]:
        return s["outcome"]
    text = with_range(s["epoch_seconds_median"], s["epoch_seconds_min"], s["epoch_seconds_max"])
    text += f" {s['samples_mark']}" if s.get("samples_mark") else ""
    text += disturbed_mark(s)
    if s["failed"]:
        text += f" (+{len(s['failed'])} {'/'.join(sorted(set(s['failed'])))})"
    return text + s.get("footnotes", "")


def _device(device: str) -> str:
    return DEVICE_NAMES.get(device, device)


def comparison(db: Database, sel: Selection) -> Table:
    """Rows: framework × dataset size (and any other field that varies); columns: model × device."""
    rows, machines, notes = load(sel, db)
    title = (
        "median seconds per epoch (min–max over timed epochs) and milliseconds per image trained, both "
        "from the median time per image; — not run; else the outcome"
    )
    table = new_table("comparison", title, sel, machines, notes)
    keys = keys_of(rows, ("framework", "dataset_size"), ("model", "device"))
    rows.sort(key=lambda r: sort_key(r, sorting([*keys, "model", "device"])))
    pivot: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        throughput(r)
        line = pivot.setdefault(tuple(r[k] for k in keys), {**record_of(r, keys), "cells": {}})
        cell = f"{r['model']} {_device(r['device'])}"
        line["cells"][cell] = r
        line[cell] = r["epoch_seconds_median"] if r["ok_runs"] else r["outcome"]
        line["disturbed"] = line.get("disturbed") or r["disturbed"]  # the HTML marks the row
    table.rows = list(pivot.values())
    _footnote(db, rows, table)
    table.notes += execution.modes_note(rows)
    models_devices = sorted({(r["model"], r["device"]) for r in rows}, key=_model_device_order)
    table.columns = key_columns(keys) + [
        column(f"{m} {_device(d)}") for m, d in models_devices for column in (_epoch_column, _ms_column)
    ]
    table.record_keys = [*keys, "model", "device", *SUMMARY_KEYS, "fairness_notes"]
    table.records = [record_of(r, table.record_keys) for r in rows]
    table.notes += samples.mark_notes(rows)
    return table


def _footnote(db: Database, rows: list[dict[str, Any]], table: Table) -> None:
    """Mark each cell that a note explains, or that is far from the fastest with no note, and
    number the notes under the table, with the cells' figures (orchestrator.report.footnotes); records
    name theirs in fairness_notes."""
    facts = fairness.facts(db, (r["last_run"] for r in rows if r["ok_runs"]))
    table.notes.extend(footnotes.annotate(rows, facts, lambda r: f"{r['model']} {_device(r['device'])}"))


# The raw numbers of a configuration's summary, as named in CSV and JSON (units in the names).
SUMMARY_KEYS = [
    "ran_mode",
    "ran_precision",
    "outcome",
    "runs",
    "ok_runs",
    "epoch_seconds_median",
    "epoch_seconds_min",
    "epoch_seconds_max",
    "seconds_per_image_median",
    "seconds_per_image_min",
    "seconds_per_image_max",
    "images_per_second_median",
    "images_per_second_min",
    "images_per_second_max",
    *samples.SAMPLE_KEYS,
    *DISTURBANCE_KEYS,
    "config_hash",
]


def _model_device_order(cell: tuple[str, str]) -> tuple[Any, ...]:
    return sort_key({"model": cell[0], "device": cell[1]}, ("model", "device"))


def _ms_column(cell: str) -> Column:
    def text(row: dict[str, Any]) -> str:
        s = row["cells"].get(cell)
        spi = s and s["seconds_per_image_median"]
        return number(spi * 1000) if spi else "—"

    return Column(f"{cell} ms/image", f"{cell} ms/image", text)


def _epoch_column(cell: str) -> Column:
    return Column(f"{cell} epoch s", cell, lambda row: _epoch_cell(row["cells"].get(cell)))


# --- validation accuracy against optimizer and learning rate -----------------------------------


def accuracy_epochs(last: int, step: int = ACCURACY_STEP) -> list[int]:
    """Epochs 5, 10, … and the last one; every epoch when there are fewer than `step`."""
    step = step if last >= step else 1
    return [e for e in range(1, last + 1) if e % step == 0 or e == last]


def accuracy(db: Database, sel: Selection) -> Table:
    """One row per configuration; a column per epoch read, median over repeats and runs (min–max)."""
    rows, machines, notes = load(sel, db)
    title = "validation accuracy (fraction 0–1) after the epoch: median over repeats and runs (min–max)"
    table = new_table("accuracy", title, sel, machines, notes)
    keys = keys_of(rows, ("framework", "optimizer", "lr"), ())
    rows.sort(key=lambda r: sort_key(r, sorting(keys)))
    epochs = accuracy_epochs(max((r["epochs"] for r in rows), default=0))
    values = _accuracies(db, sel, epochs)
    for r in rows:
        found = values.get((r["fingerprint"], r["config_hash"], r["ran_mode"], r["ran_precision"]), {})
        r["accuracy"] = {e: (*spread(found.get(e, ())), len(found.get(e, ()))) for e in epochs}
        for e in epochs:
            r[f"val_accuracy_epoch_{e}"] = r["accuracy"][e][0]
    table.rows = rows
    table.columns = [*key_columns(keys), Column("outcome", "outcome", lambda r: r["outcome"])]
    table.columns += [_accuracy_column(e) for e in epochs]
    table.record_keys = [*keys, "epoch", "outcome", *ACCURACY_KEYS, "config_hash"]
    # One record per configuration and epoch it trained for (an epoch past its last is not a value).
    table.records = [
        {**record_of(r, keys), "epoch": e, "outcome": r["outcome"], "config_hash": r["config_hash"]}
        | dict(zip(ACCURACY_KEYS, r["accuracy"][e], strict=True))
        for r in rows
        for e in epochs
        if e <= r["epochs"]
    ]
    return table


ACCURACY_KEYS = ["val_accuracy_median", "val_accuracy_min", "val_accuracy_max", "values"]


def _accuracy_column(epoch: int) -> Column:
    def cell(r: dict[str, Any]) -> str:
        median, low, high, _ = r["accuracy"][epoch]
        return with_range(median, low, high, text=fraction)

    return Column(f"epoch {epoch} val acc", f"val_accuracy_epoch_{epoch}", cell)


def _accuracies(
    db: Database, sel: Selection, epochs: list[int]
) -> dict[tuple[str, str, str, str], dict[int, list[float]]]:
    """Validation accuracy of ok runs at the epochs asked for, every repeat, by machine, config and
    what ran (the summaries' groups: select.GROUP_KEYS)."""
    e, r, s = db.epochs, db.runs, db.sweeps
    ran = (execution.ran_mode(db).label("ran_mode"), execution.ran_precision(db).label("ran_precision"))
    query = (
        sa.select(run_machine(db).label("machine"), r.c.config_hash, *ran, e.c.epoch, e.c.val_accuracy)
        .join(r, r.c.id == e.c.run_id)
        .join(s, s.c.id == r.c.sweep_id)
        .where(r.c.id.in_(latest_ids(db, sel)), r.c.outcome == "ok", e.c.epoch.in_(epochs))
        .where(e.c.val_accuracy.is_not(None), sa.or_(e.c.extra.is_(None), e.c.extra == 0))
    )
    found: dict[tuple[str, str, str, str], dict[int, list[float]]] = {}
    for row in db.rows(query):
        found.setdefault(tuple(row[k] for k in GROUP_KEYS), {}).setdefault(row["epoch"], []).append(
            row["val_accuracy"]
        )
    return found

"""`bench report --table comparison`: the research's comparison, framework rows against model × device
columns, median seconds per epoch and ms per image, each cell footnoted where a fairness rule or
its distance from the fastest asks (notes/footnotes.py). See docs/reports.md.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import samples
from orchestrator.report.notes import fairness, footnotes, ranking
from orchestrator.report.query import execution
from orchestrator.report.query.select import DISTURBANCE_KEYS, Selection, disturbed_mark, sort_key
from orchestrator.report.tables.base import (
    Table,
    key_columns,
    keys_of,
    load,
    new_table,
    record_of,
    sorting,
    throughput,
    with_range,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number

DEVICE_NAMES = {"cpu": "CPU", "cuda": "GPU"}


DEVICE_NAMES = {"cpu": "CPU", "cuda": "GPU"}


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
    table.notes += ranking.rank(rows, lambda r: f"{r['model']} {_device(r['device'])}")
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
    number the notes under the table, with the cells' figures (orchestrator.report.notes.footnotes); records
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
    "n",
    "seconds_per_image_low",
    "seconds_per_image_high",
    "rank",
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
        if not spi:
            return "—"
        rank = f" {s['rank']}" if s.get("rank") else ""
        return number(spi * 1000) + ranking.interval_text(s) + f" n={s['n']}" + rank

    return Column(f"{cell} ms/image", f"{cell} ms/image", text)


def _epoch_column(cell: str) -> Column:
    return Column(f"{cell} epoch s", cell, lambda row: _epoch_cell(row["cells"].get(cell)))

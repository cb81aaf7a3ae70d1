"""`bench report --table inference`: the runs of `task: inference`, in seconds per 1,000 images (the
feature-extraction benchmark's unit; numerically ms/image) and images/s. See docs/reports.md.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import samples
from orchestrator.report.query.select import DISTURBANCE_KEYS, Selection, disturbed_mark, sort_key
from orchestrator.report.tables.base import (
    INTERVAL_KEYS,
    TOKEN_KEYS,
    Table,
    interval_columns,
    ips_cell,
    key_columns,
    keys_of,
    load,
    new_table,
    record_of,
    sample_columns,
    sorting,
    throughput,
    token_columns,
    with_range,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column


def inference(db: Database, sel: Selection) -> Table:
    """One row per inference configuration: s/1000 images and images/s, median (min–max)."""
    rows, machines, notes = load(sel, db, task="inference")
    title = (
        "inference (evaluation mode, no gradients): seconds per 1,000 images (= ms/image) and images/s, "
        "median over timed epochs (min–max); output: logits, or the pooled features (features: true)"
    )
    table = new_table("inference", title, sel, machines, notes)
    keys = keys_of(rows, ("framework", "model", "features", "device", "threads"), ("batch_size",))
    rows.sort(key=lambda r: sort_key(r, sorting([*keys, "batch_size"])))
    for r in rows:
        throughput(r)
        r["seconds_per_1000_images_median"] = _per_1000(r["seconds_per_image_median"])
        r["seconds_per_1000_images_min"] = _per_1000(r["seconds_per_image_min"])
        r["seconds_per_1000_images_max"] = _per_1000(r["seconds_per_image_max"])
    table.rows = rows
    table.columns = key_columns(keys) + [
        Column("batch", "batch_size"),
        Column("outcome", "outcome", lambda r: r["outcome"]),
        Column("s/1000 images (median, min–max)", "seconds_per_1000_images_median", _s1000_cell),
        Column("images/s (median, min–max)", "images_per_second_median", ips_cell),
        *token_columns(rows),
        *interval_columns(rows),
        Column("runs", "runs"),
        *sample_columns(),
    ]
    table.record_keys = [*keys, "batch_size", *INFERENCE_KEYS, *INTERVAL_KEYS, *TOKEN_KEYS]
    table.records = [record_of(r, table.record_keys) for r in rows]
    table.notes += samples.mark_notes(rows)
    return table


INFERENCE_KEYS = [
    "outcome",
    "runs",
    "ok_runs",
    "images_per_epoch",
    "seconds_per_1000_images_median",
    "seconds_per_1000_images_min",
    "seconds_per_1000_images_max",
    "images_per_second_median",
    "images_per_second_min",
    "images_per_second_max",
    *samples.SAMPLE_KEYS,
    *DISTURBANCE_KEYS,
    "config_hash",
]


def _per_1000(seconds_per_image: float | None) -> float | None:
    return None if seconds_per_image is None else 1000 * seconds_per_image


def _s1000_cell(r: dict[str, Any]) -> str:
    keys = ("seconds_per_1000_images_median", "seconds_per_1000_images_min", "seconds_per_1000_images_max")
    median, low, high = (r[k] for k in keys)
    return with_range(median, low, high) + (disturbed_mark(r) if median is not None else "")

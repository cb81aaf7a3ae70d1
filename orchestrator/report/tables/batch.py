"""`bench report --table batch`: images/s and ms/image against batch size, one row per
configuration, and where each group ran out of memory. See docs/reports.md.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    set_speedup_interval,
    sorting,
    throughput,
    token_columns,
    with_interval,
    with_range,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column


def batch(db: Database, sel: Selection) -> Table:
    """One row per configuration, grouped by everything but the batch size, ascending batch."""
    rows, machines, notes = load(sel, db, task=None)
    title = (
        "throughput by batch size: from the median time per image over timed epochs (min–max); "
        "×: images/s against the group's smallest batch that ran ok"
    )
    table = new_table("batch", title, sel, machines, notes)
    keys = keys_of(rows, ("framework", "model", "device", "threads"), ("batch_size",))
    rows.sort(key=lambda r: sort_key(r, sorting([*keys, "batch_size"])))
    for r in rows:
        throughput(r)
    _speedups(rows, keys)
    table.notes += _walls(rows, keys)
    table.rows = rows
    table.columns = key_columns(keys) + [
        Column("batch", "batch_size"),
        Column("outcome", "outcome", lambda r: r["outcome"]),
        Column("images/s (median, min–max)", "images_per_second_median", ips_cell),
        Column("ms/image (median, min–max)", "seconds_per_image_median", _ms_cell),
        *interval_columns(rows),
        Column("images/s vs smallest batch", "speedup_vs_smallest_batch", _speedup_cell),
        *token_columns(rows),
        Column("runs", "runs"),
        *sample_columns(),
    ]
    table.record_keys = [*keys, "batch_size", *BATCH_KEYS, *INTERVAL_KEYS, *TOKEN_KEYS]
    table.records = [record_of(r, table.record_keys) for r in rows]
    table.notes += samples.mark_notes(rows)
    return table


BATCH_KEYS = [
    "outcome",
    "runs",
    "ok_runs",
    "images_per_epoch",
    "images_per_second_median",
    "images_per_second_min",
    "images_per_second_max",
    "seconds_per_image_median",
    "seconds_per_image_min",
    "seconds_per_image_max",
    "speedup_vs_smallest_batch",
    "speedup_vs_smallest_batch_low",
    "speedup_vs_smallest_batch_high",
    "memory_wall_batch",
    *samples.SAMPLE_KEYS,
    *DISTURBANCE_KEYS,
    "config_hash",
]


def _walls(rows: list[dict[str, Any]], keys: Sequence[str]) -> list[str]:
    """Where each group first ran out of memory (its smallest batch with an oom): a note per group,
    and `memory_wall_batch` on each of its rows (None where it never did)."""
    walls: dict[tuple[Any, ...], int] = {}
    for r in rows:  # ascending batch size within each group
        group = tuple(r[k] for k in keys)
        if "oom" in r["outcome"].split("/") and group not in walls:
            walls[group] = r["batch_size"]
    for r in rows:
        r["memory_wall_batch"] = walls.get(tuple(r[k] for k in keys))
    return [
        f"memory wall: {', '.join(f'{k}={v}' for k, v in zip(keys, group, strict=True))} "
        f"ran out of memory at batch {batch}"
        for group, batch in walls.items()
    ]


def _speedups(rows: list[dict[str, Any]], keys: Sequence[str]) -> None:
    base: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:  # ascending batch size within each group
        group = tuple(r[k] for k in keys)
        ips = r["images_per_second_median"]
        if ips and group not in base:
            base[group] = r
        found = base.get(group)
        r["speedup_vs_smallest_batch"] = ips / found["images_per_second_median"] if ips and found else None
        set_speedup_interval(r, "speedup_vs_smallest_batch", found)


def _ms_cell(r: dict[str, Any]) -> str:
    spi = ("seconds_per_image_median", "seconds_per_image_min", "seconds_per_image_max")
    median, low, high = (r[k] for k in spi)
    return with_range(median, low, high, scale=1000) + (disturbed_mark(r) if median is not None else "")


def _speedup_cell(r: dict[str, Any]) -> str:
    if r["speedup_vs_smallest_batch"] is None:
        return "—"
    return with_interval(r, "speedup_vs_smallest_batch", lambda v: f"×{v:.2f}")

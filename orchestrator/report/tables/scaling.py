"""`bench report --table scaling`: data-parallel training against the number of replicas (issue 26).

One row per configuration (select.summaries: runs of different replica counts are different
configurations, never pooled). `batch_size` is per replica, so a row of N replicas trains a global
batch of N × batch_size a step. Its throughput is global: every replica's images over replica 0's
epoch seconds (the replicas step together). Scaling efficiency is throughput(N) / (N × throughput(1))
against the one-replica row of otherwise the same settings (the same per-replica batch) on the same
machine: 1.0 is perfect, the rest went to the gradient exchange and to sharing the machine. The
communication share is the part of a traced run's operator or kernel time its trace classed
`communication` (profiler/kernels.py), where one was taken (`trace: kernels`).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.query.select import DISTURBANCE_KEYS, Selection, sort_key
from orchestrator.report.tables.base import (
    INTERVAL_KEYS,
    Table,
    against_baseline,
    key_columns,
    keys_of,
    load,
    measured_cell,
    new_table,
    outcome_text,
    rate_interval_columns,
    record_of,
    sample_columns,
    set_speedup_interval,
    sorting,
    throughput,
    with_interval,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number
from profiler import kernels as kernel_classes

Row = dict[str, Any]
TITLE = (
    "data-parallel scaling: batch_size is per replica (global batch = replicas × batch_size); images/s "
    "counts every replica's images; efficiency = images/s ÷ (replicas × the one-replica images/s of "
    "otherwise the same configuration); comm share: of a traced run's kernel or operator time, the "
    "gradient exchange's"
)
NOT_SCALING = frozenset(("replicas", "fault_replica"))


def scaling(db: Database, sel: Selection) -> Table:
    rows, machines, notes = load(sel, db, task=None)
    table = new_table("scaling", TITLE, sel, machines, notes)
    keys = keys_of(rows, ("framework", "model", "replicas"), ())
    rows.sort(key=lambda r: sort_key(r, sorting(keys)))
    shares = _communication_shares(db, [r["last_run"] for r in rows])
    for r in rows:
        throughput(r)
        r["replica_count"] = r.get("replicas") or 1
        r["global_batch"] = samples.global_batch(r)
        r["communication_share"] = shares.get(r["last_run"])
        # Traced, several replicas, and no collective in the trace: the framework exchanged its
        # gradients where its profiler does not say (Paddle's all-reduce runs inside its gradient
        # accumulation hooks); not a share of 0.
        r["communication_unseen"] = r["replica_count"] > 1 and r["communication_share"] == 0.0
        if r["communication_unseen"]:
            r["communication_share"] = None
    _efficiencies(rows)
    table.rows = rows
    table.columns = key_columns(keys) + COLUMNS + rate_interval_columns(rows) + sample_columns()
    table.record_keys = [*keys, *(k for k in RECORD_KEYS if k not in keys)]
    table.records = [record_of(r, table.record_keys) for r in rows]
    table.notes += samples.mark_notes(rows)
    if any(r.get("communication_unseen") for r in rows):
        table.notes.append(
            "not in trace: a traced run of several replicas whose trace names no collective (the "
            "framework exchanges its gradients inside other operators, as Paddle's gradient "
            "accumulation hooks do); its share is unknown, not 0"
        )
    if any(r["replica_count"] > 1 and r.get("ok_runs") for r in rows):
        table.notes.append(
            "replicas on one machine share its CPUs (each replica its share, threads per replica): "
            "they check the data-parallel machinery; a cluster's scaling needs one replica a node "
            "(--executor ray; docs/distributed.md)"
        )
    return table


def _peer_key(r: Row) -> tuple[Any, ...]:
    return (r["fingerprint"], *(r.get(f) for f in FIELD_NAMES if f not in NOT_SCALING))


def _efficiencies(rows: list[Row]) -> None:
    """Each ok row's efficiency against its one-replica peer."""
    ones = {_peer_key(r): r for r in rows if r["replica_count"] == 1 and r.get("ok_runs")}
    for r in rows:
        one = ones.get(_peer_key(r))
        mine, theirs = r.get("images_per_second_median"), one.get("images_per_second_median") if one else None
        ok = r.get("ok_runs") and mine and theirs
        r["scaling_efficiency"] = mine / (r["replica_count"] * theirs) if ok and theirs else None
        r["speedup_vs_one_replica"] = mine / theirs if ok and theirs else None
        # Intervals from both cells' runs: the speed-up's, and the efficiency's (the same over N).
        set_speedup_interval(r, "speedup_vs_one_replica", one if ok else None)
        set_speedup_interval(r, "scaling_efficiency", one if ok else None, 1 / r["replica_count"])
        r["baseline"] = one if ok else None
        r["baseline_config_hash"] = one["config_hash"] if ok and one else None


def _communication_shares(db: Database, run_ids: list[int]) -> dict[int, float]:
    """Per traced run: the share of its classified time in the communication class. Read through
    db.rows, which checks each column's type (a shared database's rows are outside input)."""
    if not run_ids:
        return {}
    k = db.kernels
    query = sa.select(k.c.run_id, k.c["class"], k.c.share).where(k.c.run_id.in_(run_ids))
    found: dict[int, float] = {}
    for row in db.rows(query):
        share = row["share"] if row["class"] == kernel_classes.COMMUNICATION else 0.0
        found[row["run_id"]] = found.get(row["run_id"], 0.0) + (share or 0.0)  # traced: 0 without one
    return found


def _share_cell(r: Row) -> str:
    if r.get("communication_unseen"):
        return "not in trace"
    value = r.get("communication_share")
    return "—" if value is None else f"{100 * value:.1f}%"


COLUMNS = [
    Column("outcome", "outcome", outcome_text),
    Column("global batch", "global_batch", lambda r: str(r["global_batch"])),
    Column(
        "images/s (median, min–max)",
        "images_per_second_median",
        lambda r: measured_cell(r, "images_per_second"),
    ),
    Column("per replica", "images_per_second_median", lambda r: number(_per_replica(r))),
    Column(
        "efficiency",
        "scaling_efficiency",
        lambda r: against_baseline(
            r, r.get("scaling_efficiency"), lambda _: with_interval(r, "scaling_efficiency", _fraction)
        ),
    ),
    Column("comm share", "communication_share", _share_cell),
]
RECORD_KEYS = [
    "replica_count",
    "global_batch",
    "outcome",
    "reason",
    "runs",
    "ok_runs",
    "images_per_second_median",
    "images_per_second_min",
    "images_per_second_max",
    "speedup_vs_one_replica",
    "speedup_vs_one_replica_low",
    "speedup_vs_one_replica_high",
    "scaling_efficiency",
    "scaling_efficiency_low",
    "scaling_efficiency_high",
    *INTERVAL_KEYS,
    "baseline_config_hash",
    "communication_share",
    "communication_unseen",
    *samples.SAMPLE_KEYS,
    *DISTURBANCE_KEYS,
    "config_hash",
]


def _fraction(value: float) -> str:
    return f"{value:.2f}"


def _per_replica(r: Row) -> float | None:
    value = r.get("images_per_second_median")
    return value / r["replica_count"] if r.get("ok_runs") and value else None

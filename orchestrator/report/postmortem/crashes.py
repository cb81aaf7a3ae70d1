"""`bench report --crashes`: the configurations of a sweep that did not end ok, where and why."""

from __future__ import annotations

from typing import Any

from orchestrator.config import samples
from orchestrator.report.query.select import Selection, latest_runs
from orchestrator.report.query.sweeps import model_label, pick_sweep, sweep_heading
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, render


def where_died(row: dict[str, Any]) -> str:
    """The last place the run was seen: its phase, epoch and step (`eval epoch 2 after step 30`)."""
    phase = row.get("last_phase") or "before start"
    parts = [] if phase == "epoch" else [phase]
    if row.get("last_epoch") and phase in ("epoch", "eval", "reset"):
        parts.append(f"epoch {row['last_epoch']}")
    if row.get("last_step") is not None:
        parts.append(f"after step {row['last_step']}")
    return " ".join(parts)


def why(row: dict[str, Any]) -> str:
    """The exception the worker reported, else the reason bench recorded."""
    if row.get("exception_type"):
        return f"{row['exception_type']}: {row.get('exception_message') or ''}".strip()
    return row.get("reason") or ""


CRASH_COLUMNS = [
    Column("run", "id"),
    Column("framework", "framework", lambda r: r["framework"]),
    Column("model", "model", model_label),
    Column("device", "device", lambda r: r["device"]),
    Column("batch", "batch_size"),
    Column("outcome", "outcome", lambda r: r["outcome"]),
    Column("signal", "signal_name", lambda r: r.get("signal_name") or "—"),
    Column("where it died", "last_phase", where_died),
    Column("why", "reason", lambda r: why(r)[:120]),
]


CRASH_KEYS = {c.key for c in CRASH_COLUMNS} | {
    "fault",
    "last_epoch",
    "last_step",
    "exception_type",
    "exception_message",
}


def crashes(
    db: Database, sweep_id: int | None, fmt: str, where: dict[str, frozenset[Any]] | None = None
) -> str:
    """The crash list of one sweep (the latest where `sweep_id` is None)."""
    sweep = pick_sweep(db, sweep_id)
    # JSON carries every column; the other forms read only what their columns show.
    read = None if fmt == "json" else sorted(CRASH_KEYS)
    rows = [samples.mark_run(r) for r in latest_runs(db, Selection((sweep,), where or {}), read)]
    rows = [r for r in rows if r["outcome"] != "ok"]
    for r in rows:
        r["where_it_died"] = where_died(r)
    body = render(rows, CRASH_COLUMNS, fmt, document={"sweep": sweep, "runs": rows})
    if fmt != "table":
        return body
    if not rows:
        return f"{sweep_heading(sweep)}\nevery configuration ended ok"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"{sweep_heading(sweep)}\n{body}\n{len(rows)} configurations: {summary}"

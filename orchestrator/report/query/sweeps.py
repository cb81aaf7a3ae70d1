"""The sweep a one-sweep report reads, its heading, and how a run's model is named in every table
(the fault worker's "model" is what it was told to do)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orchestrator.errors import BenchError
from orchestrator.storage.db import Database
from orchestrator.text.terminal import safe_line


def pick_sweep(db: Database, sweep_id: int | None) -> dict[str, Any]:
    query = sa.select(db.sweeps)
    if sweep_id is None:
        query = query.order_by(db.sweeps.c.id.desc()).limit(1)
    else:
        query = query.where(db.sweeps.c.id == sweep_id)
    sweep = next(db.rows(query), None)
    if sweep is None:
        raise BenchError(f"no sweep {sweep_id}" if sweep_id else "the database has no sweeps yet")
    return sweep


def sweep_heading(sweep: dict[str, Any]) -> str:
    # One line, whatever the sweep's name holds: a newline in it must not fake a line of the report.
    return safe_line(
        f"sweep {sweep['id']} '{sweep['name']}' ({sweep['status']}, started {sweep['started_at']}) "
        f"on {sweep['machine']}"
    )


def model_label(row: dict[str, Any]) -> str:
    return f"fault:{row['fault']}" if row["framework"] == "fault" else row["model"]

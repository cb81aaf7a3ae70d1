"""How far apart earlier runs of a configuration landed, for the planner (`bench run --dry-run`):
the between-process coefficient of variation, from the database's cells of two runs or more.

A configuration's own earlier cells are the best guide; failing those, the cells of the same
framework, model and device (another batch size or thread count spreads alike more often than not);
failing those, every cell on record. Each figure is a stored value, checked by stats/ as outside
input. Disturbed runs are left out: the plan is for a quiet machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import StatsError
from orchestrator.stats import planning
from orchestrator.storage.db import Database

Cell = list[float]


@dataclass(frozen=True)
class Spread:
    cv: float
    cells: int
    source: str  # what the cells were: "this configuration", "pytorch resnet50 cpu", "every cell"


@dataclass
class Cells:
    """The earlier cells of two runs or more, by configuration and by framework, model and device."""

    by_hash: dict[str, list[Cell]]
    by_kind: dict[tuple[str, str, str], list[Cell]]
    every: list[Cell]

    def spread(self, config: RunConfig) -> Spread | None:
        kind = (config.framework, config.model, config.device)
        for cells, source in (
            (self.by_hash.get(config.config_hash, []), "this configuration"),
            (self.by_kind.get(kind, []), " ".join(kind)),
            (self.every, "every earlier cell"),
        ):
            cv = planning.between_run_cv(cells) if cells else None
            if cv is not None:
                return Spread(cv, len(cells), source)
        return None


def earlier_cells(db: Database) -> Cells:
    """Every sweep's ok, undisturbed runs with a figure, grouped by sweep and configuration."""
    runs = db.runs
    query = (
        sa.select(runs.c.sweep_id, runs.c.config_hash, runs.c.framework, runs.c.model, runs.c.device)
        .add_columns(runs.c.seconds_per_image)
        .where(
            runs.c.outcome == "ok",
            runs.c.seconds_per_image.is_not(None),
            sa.or_(runs.c.disturbed.is_(None), runs.c.disturbed != 1),
        )
        .order_by(runs.c.sweep_id, runs.c.config_hash)
    )
    groups: dict[tuple[Any, ...], list[float]] = {}
    kinds: dict[tuple[Any, ...], tuple[str, str, str]] = {}
    for row in db.rows(query):
        key = (row["sweep_id"], row["config_hash"])
        groups.setdefault(key, []).append(row["seconds_per_image"])
        kinds[key] = (str(row["framework"]), str(row["model"]), str(row["device"]))
    found = Cells({}, {}, [])
    for key, figures in groups.items():
        if len(figures) < 2:
            continue
        found.by_hash.setdefault(key[1], []).append(figures)
        found.by_kind.setdefault(kinds[key], []).append(figures)
        found.every.append(figures)
    return found


def plan_lines(configs: Sequence[RunConfig], cells: Cells, difference: float) -> tuple[list[int | None], str]:
    """Per configuration, the runs it needs to tell `difference` apart (None: no earlier spread),
    and the line that says from what."""
    needed: list[int | None] = []
    sources: dict[str, Spread] = {}
    for config in configs:
        spread = cells.spread(config)
        if spread is None:
            needed.append(None)
            continue
        sources.setdefault(spread.source, spread)
        try:
            needed.append(planning.runs_needed(spread.cv, difference))
        except StatsError:  # more runs than the planner will plan: said per configuration
            needed.append(planning.MOST_RUNS + 1)
    if not sources:
        return needed, (
            f"runs needed to tell {difference:.0%} apart: unknown, no earlier cell of two runs or more "
            "in the database (run with runs: 5 once to measure the spread)"
        )
    said = "; ".join(f"CV {s.cv:.1%} over {s.cells} cells of {src}" for src, s in sources.items())
    return needed, (
        f"runs needed to tell {difference:.0%} apart (5 % level, 80 % power, Mann-Whitney on runs), "
        f"from the spread between earlier runs: {said}"
    )

"""What bench measured for a study: its sweeps' runs read back as cells, one per configuration.

A study's sweeps are found by name (StudyMatrix.sweep_name: the study, the scale, the matrix), the
latest of each, and their runs counted as every report counts them (report/query/select.py's
latest_ids: the latest attempt of each run of each configuration). A cell's figures are its ok runs
that no disturbance flagged, one figure a run, as in every verdict bench gives; the failed runs'
outcomes and the disturbed count stay with it, so a report can say why a cell is empty. A cell also
keeps each ok run's learning curve (its epochs' validation accuracy), disturbed runs included as
the accuracy table includes them: other load slows a run, it does not change what it learns.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.query import select
from orchestrator.storage.db import Database
from orchestrator.storage.setting_columns import setting_column
from orchestrator.studies.spec import METRICS, Study

ALL = "all"  # the one column of a claim or table that names no column setting
CHUNK = 500  # run ids a query names: under SQLite's bound on a statement's parameters


@dataclass
class Cell:
    """One configuration's runs in the study's sweeps."""

    settings: dict[str, Any]
    ok: list[dict[str, Any]] = field(default_factory=list)  # ok and not flagged disturbed
    failed: list[str] = field(default_factory=list)  # outcomes of the runs that did not end ok
    disturbed: int = 0
    # Per ok run (disturbed or not), by run id: its seed and its validation accuracy after each
    # evaluated epoch (the median over its repeats), for the accuracy claims (accuracy.py).
    curves: dict[int, tuple[int, dict[int, float]]] = field(default_factory=dict)
    sweep_id: int = 0  # the sweep it was read from: a study's releases matrix is read apart

    def figures(self, metric: str) -> list[float]:
        return [r[metric] for r in self.ok if r.get(metric) is not None]

    def why_empty(self, metric: str) -> str:
        """Why the cell has no figure for `metric`: its failures, disturbance, or a missing column."""
        if self.failed and not self.ok:
            counts = {o: self.failed.count(o) for o in sorted(set(self.failed))}
            return "no ok run (" + ", ".join(f"{o} ×{n}" for o, n in counts.items()) + ")"
        if self.disturbed and not self.ok:
            return f"every ok run disturbed ({self.disturbed})"
        return f"no {metric} recorded"


@dataclass
class Measured:
    sweeps: list[dict[str, Any]]  # the sweeps read: id, name, machine, started_at, scale
    cells: list[Cell]
    missing: list[str]  # the study's matrices with no sweep in the database
    scale: str | None = None  # the scale read (None: every scale)
    changed: list[str] = field(default_factory=list)  # matrices edited since their sweep ran

    @property
    def machines(self) -> list[str]:
        return sorted({s["machine"] for s in self.sweeps})


def read(db: Database, study: Study, scale: str | None) -> Measured:
    """The latest sweep of each of the study's matrices at `scale` (every scale where None)."""
    sweeps: list[dict[str, Any]] = []
    missing: list[str] = []
    changed: list[str] = []
    s = db.sweeps
    for entry in study.at_scale(scale):
        name = entry.sweep_name(study.name)
        query = sa.select(*(s.c[k] for k in (*select.SWEEP_COLUMNS, "matrix_hash"))).where(s.c.name == name)
        found = list(db.rows(query.order_by(s.c.id.desc()).limit(1)))
        if not found:
            missing.append(f"{entry.path.name} (scale {entry.scale})")
            continue
        sweeps.append({**found[0], "scale": entry.scale})
        if found[0]["matrix_hash"] not in (None, entry.matrix.file_hash):
            # Its runs are still what that sweep measured; the reader should know the file moved on.
            changed.append(f"{entry.path.name} (sweep {found[0]['id']})")
    return Measured(sweeps, _cells(db, sweeps) if sweeps else [], missing, scale, changed)


def _cells(db: Database, sweeps: Sequence[dict[str, Any]]) -> list[Cell]:
    r = db.runs
    sel = select.Selection(tuple(sweeps), {})
    query = (
        sa.select(
            *(setting_column(r, name).label(name) for name in FIELD_NAMES),
            r.c.id.label("run_id"),
            r.c.config_hash,
            r.c.sweep_id,
            r.c.outcome,
            r.c.disturbed,
            *(r.c[m] for m in METRICS),
        )
        .where(r.c.id.in_(select.latest_ids(db, sel)))
        .order_by(r.c.id)
    )
    # A configuration two of the study's matrices share is two cells, one a sweep: sweeps may have
    # run on different machines or months apart, and a claim must not pool them unseen.
    cells: dict[tuple[int, str], Cell] = {}
    for row in db.rows(query):
        key = (row["sweep_id"], row["config_hash"])
        cell = cells.setdefault(key, Cell({k: row[k] for k in FIELD_NAMES}, sweep_id=row["sweep_id"]))
        if row["outcome"] != "ok":
            cell.failed.append(str(row["outcome"]))
        elif row["disturbed"] == 1:
            cell.disturbed += 1
        else:
            cell.ok.append(row)
        if row["outcome"] == "ok":
            cell.curves[row["run_id"]] = (row["seed"], {})
    _curves(db, list(cells.values()))
    return list(cells.values())


def _curves(db: Database, cells: list[Cell]) -> None:
    """Each ok run's validation accuracy per evaluated epoch (the extra epochs min_time adds are not
    evaluated), the median over the run's repeats, read in chunks of run ids."""
    owner = {run_id: cell for cell in cells for run_id in cell.curves}
    ids = sorted(owner)
    e = db.epochs
    by_run: dict[int, dict[int, list[float]]] = {}
    for start in range(0, len(ids), CHUNK):
        query = sa.select(e.c.run_id, e.c.epoch, e.c.val_accuracy).where(
            e.c.run_id.in_(ids[start : start + CHUNK]),
            e.c.val_accuracy.is_not(None),
            sa.or_(e.c.extra.is_(None), e.c.extra == 0),
        )
        for row in db.rows(query):
            by_run.setdefault(row["run_id"], {}).setdefault(row["epoch"], []).append(row["val_accuracy"])
    for run_id, epochs in by_run.items():
        owner[run_id].curves[run_id][1].update({k: statistics.median(v) for k, v in epochs.items()})


@dataclass
class Grid:
    """Cells picked for a comparison: per column, per item (and per axis value, for rises_with)."""

    cells: dict[tuple[str, str, str], Cell]
    problem: str | None = None


def grid(
    cells: Iterable[Cell],
    where: Iterable[tuple[str, Any]],
    items: str,
    columns: str | None,
    axis: str | None = None,
) -> Grid:
    """The cells `where` keeps, keyed by (column, item, axis value) as text; a key two cells share
    (a setting the claim does not pin varies among them) is a problem, not a silent pick."""
    wanted = list(where)
    picked = [c for c in cells if all(same(c.settings.get(k), v) for k, v in wanted)]
    found: dict[tuple[str, str, str], Cell] = {}
    for cell in picked:
        key = (
            ALL if columns is None else str(cell.settings[columns]),
            str(cell.settings[items]),
            "" if axis is None else str(cell.settings[axis]),
        )
        if key in found:
            other = found[key].settings
            varies = [k for k in FIELD_NAMES if other.get(k) != cell.settings.get(k)]
            which = " ".join(k for k in key if k)
            if not varies:
                return Grid({}, f"{which} ran in two of the study's sweeps: one cell cannot pool them")
            named = ", ".join(varies[:3])
            return Grid({}, f"several configurations for {which} ({named} varies: pin it in where)")
        found[key] = cell
    return Grid(found)


def same(stored: Any, wanted: Any) -> bool:
    """A stored setting against a study's value: equal, or equal as text (a batch of 8 read from a
    CSV as "8")."""
    return stored == wanted or str(stored) == str(wanted)

"""The calibrations of the sweeps a report reads (profiler/calibration.py: the same fixed work timed
at the start and end of each session of a sweep), as notes under the report: the figures' range
in each sweep, and whether the machine ran at another speed within a sweep or between two.

Rows are outside input (a team shares a database): a figure that is not a finite positive number
is no figure; a calibration that recorded an error is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import sqlalchemy as sa

from orchestrator.storage.db import Database
from profiler.calibration import figure
from profiler.disturbance import OTHER_LIMIT

# (column, unit) of the three figures, in the order notes name them.
FIGURES = (("python_mops", "Mops/s"), ("matmul_gflops", "GFLOP/s"), ("memory_gbps", "GB/s"))
SHORT = {"python_mops": "python", "matmul_gflops": "matmul", "memory_gbps": "memory"}
# The verdict reads one figure, the speed: the geometric mean of the three figures' ratios. Alone
# each figure is noisier than a verdict can stand on: on the quiet 2-vCPU machine 20 calibrations
# back to back lay up to 70 % apart in the Python loop (a process's memory layout: the same loop
# runs at 16 or 22 Mops/s from one process to the next), 7-14 % in matmul and 14-47 % in the copy,
# and their speeds up to 27 % apart (docs/performance.md, "Calibration"). A machine that runs
# slower as a whole moves all three: the 2-vCPU machine's ×2 between two days is far past this.
TOLERANCE = 0.35


def read(db: Database, sweep_ids: Sequence[int]) -> dict[int, list[dict[str, float]]]:
    """Each sweep's calibrations in the order taken: those with all three figures, and not taken
    beside other load past the limit that flags a run (they measured the machine's sharing)."""
    table = db.calibrations
    query = sa.select(table).where(table.c.sweep_id.in_(list(sweep_ids))).order_by(table.c.id)
    out: dict[int, list[dict[str, float]]] = {}
    for row in db.rows(query):
        figures = {key: figure(row.get(key)) for key, _ in FIGURES}
        other = row.get("other_cpu_percent")
        busy = isinstance(other, int | float) and not isinstance(other, bool) and other > OTHER_LIMIT
        if all(v is not None for v in figures.values()) and not busy:
            out.setdefault(row["sweep_id"], []).append(figures)  # type: ignore[arg-type]
    return out


def _apart(values: Sequence[float]) -> float:
    """How far apart the values are: the largest over the smallest, less one."""
    return max(values) / min(values) - 1


def _range(values: Sequence[float], unit: str) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f} {unit}" if high - low < 0.05 else f"{low:.1f}–{high:.1f} {unit}"


def _speed(taken: dict[str, float], base: dict[str, float]) -> float:
    """The geometric mean of the three figures' ratios to ``base``'s: above 1 is faster."""
    return math.prod(taken[k] / base[k] for k, _ in FIGURES) ** (1 / len(FIGURES))


def _within(sweep_id: int, taken: list[dict[str, float]]) -> str:
    ranges = ", ".join(f"{SHORT[k]} {_range([t[k] for t in taken], unit)}" for k, unit in FIGURES)
    line = f"calibration, sweep {sweep_id} ({len(taken)} taken, one thread): {ranges}"
    if len(taken) < 2:
        return line
    apart = _apart([_speed(t, taken[0]) for t in taken])
    if apart > TOLERANCE:
        return (
            f"{line}: ! the machine's speed changed within this sweep (speed {apart * 100:.0f} % apart): "
            "its runs of different times are not comparable"
        )
    return f"{line}: steady (speed within {TOLERANCE * 100:.0f} %)"


def medians(taken: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over calibrations."""
    return {k: statistics.median(t[k] for t in taken) for k, _ in FIGURES}


def against(what: str, taken: dict[str, float], base: dict[str, float]) -> str:
    """The verdict on figures ``taken`` against ``base``'s, one line: ``what`` says which against
    which ("sweep 2 against sweep 1"); it starts with "! " where the speed is another."""
    speed = _speed(taken, base)
    text = (
        f"speed ×{speed:.2f} (" + ", ".join(f"{SHORT[k]} ×{taken[k] / base[k]:.2f}" for k, _ in FIGURES) + ")"
    )
    if _apart([speed, 1.0]) > TOLERANCE:
        return (
            f"! {what}, calibration {text}: the machine ran at another speed; do not set their "
            "figures side by side (docs/profiler.md, Calibration)"
        )
    return f"{what}, calibration {text}: the same speed"


def notes(db: Database, sweep_ids: Sequence[int]) -> list[str]:
    """One line a calibrated sweep, and for several, whether they ran at the same speed."""
    ids = list(dict.fromkeys(sweep_ids))
    taken = read(db, ids)
    calibrated = [i for i in ids if i in taken]
    lines = [_within(i, taken[i]) for i in calibrated]
    if len(calibrated) < 2:
        return lines
    first = calibrated[0]
    base = medians(taken[first])
    for other in calibrated[1:]:
        lines.append(against(f"sweep {other} against sweep {first}", medians(taken[other]), base))
    return lines


def calibrated_sweeps(db: Database) -> list[int]:
    """The ids of the sweeps with at least one calibration row, in order."""
    table = db.calibrations
    query = sa.select(table.c.sweep_id).distinct().order_by(table.c.sweep_id)
    return [row["sweep_id"] for row in db.rows(query)]

"""The cells that the modes and scaling tables share (report/tables/base.py): a measured figure with
its range and marks, a figure against the row's baseline, and a cell's outcome."""

from __future__ import annotations

from orchestrator.report.query.select import disturbed_mark
from orchestrator.report.tables.base import REASON_LIMIT, against_baseline, measured_cell, outcome_text


def _row(**extra):
    return {"ok_runs": 2, "step_ms_median": 10.0, "step_ms_min": 9.0, "step_ms_max": 12.0, **extra}


def test_a_measured_cell_shows_the_median_range_and_marks():
    assert measured_cell(_row(), "step_ms") == "10 (9–12)"
    assert measured_cell(_row(samples_mark="?"), "step_ms") == "10 (9–12) ?"
    disturbed = _row(disturbed=1)
    assert measured_cell(disturbed, "step_ms").endswith(disturbed_mark(disturbed))
    assert disturbed_mark(disturbed)  # else the line above could not fail
    assert measured_cell(_row(ok_runs=0), "step_ms") == "—"


def test_a_figure_against_its_baseline():
    base = _row()
    base["baseline"] = base
    other = _row(baseline=base)
    shown = lambda v: f"×{v:.2f}"  # noqa: E731
    assert against_baseline(base, 1.0, shown) == "baseline"
    assert against_baseline(other, 1.5, shown) == "×1.50"
    assert against_baseline(other, None, shown) == "—"
    # either side disturbed marks the ratio
    base["disturbed"] = 1
    assert against_baseline(other, 1.5, shown) == "×1.50" + disturbed_mark(base)


def test_a_cells_outcome():
    assert outcome_text({"ok_runs": 1, "failed": []}) == "ok"
    assert outcome_text({"ok_runs": 1, "failed": ["oom", "crash", "oom"]}) == "ok (+3 crash/oom)"
    reason = "x" * (REASON_LIMIT + 50)
    text = outcome_text({"ok_runs": 0, "outcome": "error", "reason": reason})
    assert text.startswith("error: x") and len(text) < len(reason)
    assert outcome_text({"ok_runs": 0, "outcome": "timeout"}) == "timeout"

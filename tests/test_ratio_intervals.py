"""Intervals on every ratio and figure over runs (issue 41): the speed-ups of the batch, modes and
scaling tables, the scaling efficiency, the accuracy per epoch and the resources' images/s carry the
95 % bootstrap interval over runs where their cells ran more than once; a single run keeps its
figure alone."""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest

from orchestrator.errors import StatsError
from orchestrator.report.tables import accuracy, base, resources

FIVE = [0.010, 0.0102, 0.0099, 0.0101, 0.0098]


def cell(figures: list[float]) -> dict:
    return {"n": len(figures), "run_figures": figures}


def test_a_speedup_of_two_cells_of_five_runs_has_an_interval_around_it():
    slow, fast = cell(FIVE), cell([f / 2 for f in FIVE])
    low, high = base.speedup_interval(fast, slow)  # the slow cell's time over the fast one's
    assert low is not None and high is not None
    assert 1.9 < low <= 2.0 <= high < 2.1
    low, high = base.speedup_interval(fast, slow, scale=0.5)  # an efficiency over 2 replicas
    assert 0.95 < low <= 1.0 <= high < 1.05


def test_a_cell_of_one_run_or_the_baseline_itself_has_no_interval():
    one, five = cell([0.01]), cell(FIVE)
    assert base.speedup_interval(one, five) == (None, None)
    assert base.speedup_interval(five, one) == (None, None)
    assert base.speedup_interval(five, five) == (None, None)  # the baseline's own row
    assert base.speedup_interval(five, None) == (None, None)


def test_the_interval_is_printed_beside_the_ratio_only_where_there_is_one():
    row = {"x": 1.5, "x_low": 1.4, "x_high": 1.62}
    assert base.with_interval(row, "x", lambda v: f"×{v:.2f}") == "×1.50 [1.40–1.62]"
    assert base.with_interval({"x": 1.5}, "x", lambda v: f"×{v:.2f}") == "×1.50"


def test_a_hostile_run_figure_is_refused_in_one_line():
    with pytest.raises(StatsError, match="not a finite figure|NaN"):
        base.speedup_interval(cell([0.01, float("nan")]), cell(FIVE))


def test_accuracy_of_one_run_is_the_median_over_its_repeats_with_no_interval():
    assert accuracy._cell({7: [0.5, 0.7, 0.6]}) == (0.6, 0.5, 0.7, 3, 1, None, None)


def test_accuracy_over_runs_is_the_median_of_the_runs_medians_with_an_interval():
    # Four runs of two repeats: run medians 0.0 (an accuracy may be 0), 0.5, 0.6, 0.9.
    by_run = {1: [0.0, 0.0], 2: [0.4, 0.6], 3: [0.6, 0.6], 4: [0.8, 1.0]}
    median, low, high, values, n, interval_low, interval_high = accuracy._cell(by_run)
    assert median == pytest.approx(0.55) and (low, high) == (0.0, 1.0) and values == 8 and n == 4
    assert interval_low is not None and interval_high is not None
    assert 0.0 <= interval_low <= median <= interval_high <= 1.0


def test_resources_images_per_second_leaves_disturbed_runs_out():
    runs = [{"seconds_per_image": s, "disturbed": 0} for s in (0.01, 0.011, 0.0105)]
    runs.append({"seconds_per_image": 0.1, "disturbed": 1})
    found = resources._rate_interval(runs)
    assert found["n"] == 3
    assert 1 / 0.011 <= found["images_per_second_low"] <= found["images_per_second_high"] <= 1 / 0.01
    assert resources._rate_interval(runs[:1]) == {
        "n": 1,
        "images_per_second_low": None,
        "images_per_second_high": None,
    }


BATCHES = """
name: batches
settings: {dataset_size: 64, batch_size: 8, epochs: 1, warmup_steps: 0, runs: 3}
axes:
  framework: [fault]
  batch_size: [4, 8]
"""


def _set_figures(db, figures: dict[int, list[float]]) -> None:
    """Stored figures by batch size (the report decides from the rows as stored; the fault worker's
    own times are too close to tell apart)."""
    conn = sqlite3.connect(db)
    for batch, values in figures.items():
        ids = [i for (i,) in conn.execute("SELECT id FROM runs WHERE batch_size = ? ORDER BY id", (batch,))]
        for run_id, spi in zip(ids, values, strict=True):
            conn.execute(
                "UPDATE runs SET seconds_per_image = ?, "
                "median_epoch_seconds = ? * steps_per_epoch * batch_size, "
                "min_epoch_seconds = ? * steps_per_epoch * batch_size, "
                "max_epoch_seconds = ? * steps_per_epoch * batch_size WHERE id = ?",
                (spi, spi, spi, spi, run_id),
            )
    conn.commit()
    conn.close()


def test_the_batch_tables_speedup_carries_its_interval_over_runs(cli, write_matrix, workdir):
    write_matrix(BATCHES)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    _set_figures(workdir / "bench.db", {4: [0.02, 0.021, 0.019], 8: [0.01, 0.0105, 0.0095]})
    text = cli("report", "--table", "batch").output
    row = next(line for line in text.splitlines() if " 8 " in line and "ok" in line)
    assert "×2.00 [" in row, text
    records = json.loads(cli("report", "--table", "batch", "--format", "json").output)["rows"]
    big = next(r for r in records if r["batch_size"] == 8)
    assert big["speedup_vs_smallest_batch_low"] <= 2.0 <= big["speedup_vs_smallest_batch_high"]
    small = next(r for r in records if r["batch_size"] == 4)
    assert small["speedup_vs_smallest_batch_low"] is None  # the group's own base


REPLICAS = """
name: replicas
settings: {dataset_size: 40, batch_size: 4, epochs: 1, warmup_steps: 0, runs: 2, timeout: 60}
axes:
  framework: [fault]
  replicas: [1, 2]
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two replicas need two CPUs")
def test_the_scaling_tables_efficiency_carries_its_interval_over_runs(cli, write_matrix, workdir):
    write_matrix(REPLICAS)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    # One replica 0.02 s an image, two 0.0125 (global): efficiency 0.02 / (2 × 0.0125) = 0.8.
    conn = sqlite3.connect(workdir / "bench.db")
    for replicas, values in ((None, [0.02, 0.021]), (2, [0.0125, 0.013])):
        where = "replicas IS NULL" if replicas is None else "replicas = 2"
        ids = [i for (i,) in conn.execute(f"SELECT id FROM runs WHERE {where} ORDER BY id")]
        for run_id, spi in zip(ids, values, strict=True):
            conn.execute("UPDATE runs SET seconds_per_image = ? WHERE id = ?", (spi, run_id))
    conn.commit()
    conn.close()
    records = json.loads(cli("report", "--table", "scaling", "--format", "json").output)["rows"]
    two = next(r for r in records if r["replica_count"] == 2)
    assert two["n"] == 2
    assert two["scaling_efficiency_low"] <= two["scaling_efficiency_high"]
    assert 0.7 < two["scaling_efficiency_low"] and two["scaling_efficiency_high"] < 0.9
    assert two["speedup_vs_one_replica_low"] == pytest.approx(2 * two["scaling_efficiency_low"])
    text = cli("report", "--table", "scaling").output
    assert "images/s 95 % over runs" in text and "(n=2)" in text, text
    assert re.search(r"0\.\d\d \[0\.\d\d–0\.\d\d\]", text), text


def test_the_modes_figures_whisker_is_the_interval_over_runs_where_there_is_one():
    from orchestrator.report.html import figures_modes

    cell = {
        "framework": "pytorch",
        "mode_label": "eager",
        "precision_label": "fp32",
        "step_ms_median": 80.0,
        "step_ms_min": 60.0,
        "step_ms_max": 120.0,
        "seconds_per_image_median": 0.010,
        "seconds_per_image_low": 0.009,
        "seconds_per_image_high": 0.0115,
        "n": 5,
    }
    bar = figures_modes._bar(cell)
    assert bar["over_runs"] and bar["n"] == 5 and bar["label"].endswith("n=5")
    assert (bar["low"], bar["high"]) == pytest.approx((72.0, 92.0))
    one = figures_modes._bar({**cell, "n": 1, "seconds_per_image_low": None, "seconds_per_image_high": None})
    assert not one["over_runs"] and (one["low"], one["high"]) == (60.0, 120.0) and "n=" not in one["label"]


def test_the_accuracy_curves_error_bars_are_the_interval_over_runs():
    from orchestrator.report.html import figures

    runs = [{"id": 1}, {"id": 2}, {"id": 3}]
    curves = {1: [(1, 0.0), (2, 0.5)], 2: [(1, 0.2), (2, 0.6)], 3: [(1, 0.4)]}
    lows, highs = figures._curve_interval(runs, curves)
    assert lows[0] is not None and highs[0] is not None and 0.0 <= lows[0] <= 0.2 <= highs[0] <= 0.4
    assert lows[1] is not None and 0.5 <= lows[1] <= highs[1] <= 0.6  # two runs at epoch 2
    assert figures._curve_interval(runs[:1], curves) == ([None, None], [None, None])

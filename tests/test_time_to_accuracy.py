"""Time to accuracy and the warm-up's figures with a real framework (PyTorch, its default eager
mode), through one `bench run`: a target the run reaches within a few epochs stops it there, and one
it cannot reach (a learning rate so small that the weights barely move, so the accuracy stays near
chance, 1/3) runs every epoch and is marked not reached. Both store compile seconds and how the run
knew it was steady."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.slow, pytest.mark.framework]

MATRIX = """
name: time-to-accuracy
settings: {framework: pytorch, model: small_cnn, image_size: 16, dataset_size: 160, val_fraction: 0.2,
           batch_size: 16, classes: 3, warmup_steps: 1, threads: 1, min_time: 0, min_steps: 1,
           timeout: 300, sample_interval: 0, target_accuracy: 0.85}
include:
  - {stop_at_target: true, epochs: 6}
  - {lr: 0.000001, epochs: 2}
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, pytorch_python):
    from orchestrator.cli.main import cli

    path = tmp_path_factory.mktemp("tta")
    (path / "m.yaml").write_text(MATRIX)
    cwd = os.getcwd()
    os.chdir(path)
    try:
        result = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(path / "bench.db")
    conn.row_factory = sqlite3.Row
    runs = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    epochs = [dict(r) for r in conn.execute("SELECT * FROM epochs ORDER BY run_id, repeat, epoch")]
    conn.close()
    return runs, epochs


def test_a_reached_target_stops_the_run_at_that_epoch(sweep):
    runs, epochs = sweep
    run = runs[0]
    assert run["outcome"] == "ok" and run["target_reached"] == 1
    mine = [e for e in epochs if e["run_id"] == run["id"]]
    first = next(e for e in mine if e["val_accuracy"] >= 0.85)
    assert run["target_epoch"] == first["epoch"] < 6  # it stopped before its last epoch
    assert mine[-1]["epoch"] == first["epoch"]  # and no epoch ran after it
    assert run["target_seconds"] == pytest.approx(first["wall_seconds"])
    # Wall time counts training and evaluation: more than the timed seconds so far.
    assert first["wall_seconds"] > sum(e["seconds"] for e in mine)


def test_an_unreachable_target_is_not_reached_and_every_epoch_runs(sweep):
    runs, epochs = sweep
    run = runs[1]
    assert run["outcome"] == "ok" and run["target_reached"] == 0
    assert (run["target_seconds"], run["target_epoch"]) == (None, None)
    mine = [e for e in epochs if e["run_id"] == run["id"]]
    assert [e["epoch"] for e in mine] == [1, 2] and all(e["val_accuracy"] < 0.85 for e in mine)


def test_the_warmup_figures_and_the_mode_are_stored(sweep):
    runs, _ = sweep
    for run in runs:
        assert run["compile_seconds"] is not None and run["compile_seconds"] >= 0
        assert run["first_step_seconds"] > 0 and run["warmup_steps_run"] >= 3  # a window of 3 at least
        assert run["steady_by"].startswith("3 consecutive steps") or run["steady_by"].startswith("not steady")
        assert 0.5 < run["first_step_loss"] < 2.5  # about ln 3 = 1.1 from the initial weights
        assert (run["resolved_mode"], run["resolved_precision"]) == ("eager", "fp32")
        assert json.loads(run["execution"])["mode_default"] is True

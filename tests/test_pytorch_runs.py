"""Real PyTorch runs through the whole harness: every model, at a small image size, in its own
process and environment; faults in between; CUDA honestly unavailable on a machine without it."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from tests import import_record
from workers import models

pytestmark = [pytest.mark.slow, pytest.mark.framework]
# The matrix's model axis: every image model but vit_b16 (86 M parameters; test_across_frameworks
# builds it in every framework, and training it here would cost minutes).
RUN_MODELS = [m for m in models.MODELS if m != "vit_b16"]

MATRIX = """
name: pytorch-models
settings:
  min_time: 0  # timing is not the point here: no extra epochs
  min_steps: 1
  dataset_size: 20
  val_fraction: 0.2
  batch_size: 4
  epochs: 1
  warmup_steps: 1
  image_size: 64
  classes: 3
  timeout: 300
axes:
  framework: [pytorch]
  model: [small_cnn, alexnet, mobilenet_v2, resnet50, vgg16, googlenet, vit_tiny]
include:
  - {framework: fault, fault: segfault, after_steps: 2}
  - {framework: pytorch, model: small_cnn, image_size: 32, threads: 1, optimizer: adam, lr: 0.001}
  - {framework: pytorch, model: small_cnn, device: cuda}
  - {framework: pytorch, model: small_cnn, image_size: 32, optimizer: rmsprop, lr: 0.001, repeats: 2,
     epochs: 2}
  - {framework: pytorch, model: gru, classes: 2, optimizer: adam, lr: 0.001}
  - {framework: pytorch, model: gpt_tiny, sequence_length: 16}
"""
REPORT: dict[str, str] = {}  # bench report's output on the sweep, filled by the fixture


@pytest.fixture(scope="module")
def ran(tmp_path_factory, pytorch_python):
    """`bench run` on the matrix in a process of its own, its imports recorded (tests/import_record.py)."""
    return import_record.sweep(tmp_path_factory.mktemp("pytorch"), MATRIX)


@pytest.fixture(scope="module")
def sweep(ran):
    from orchestrator.cli.main import cli

    path = ran[0]
    cwd = os.getcwd()
    os.chdir(path)
    try:
        report = CliRunner().invoke(cli, ["report", "--table", "comparison"], catch_exceptions=False)
        results = CliRunner().invoke(cli, ["report"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert report.exit_code == 0, report.output
    conn = sqlite3.connect(path / "bench.db")
    conn.row_factory = sqlite3.Row
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT r.*, e.framework_version, e.python_version, e.threads_applied, e.thread_env "
            "FROM runs r JOIN environments e ON e.run_id = r.id ORDER BY r.id"
        )
    ]
    epochs = [dict(r) for r in conn.execute("SELECT * FROM epochs ORDER BY run_id, repeat, epoch")]
    conn.close()
    REPORT["comparison"] = report.output
    REPORT["results"] = results.output
    return rows, epochs


def test_the_orchestrator_never_imported_torch(ran):
    import_record.assert_no_framework(ran[1], "profiler.sampler")


@pytest.mark.parametrize("name", RUN_MODELS)
def test_every_model_runs_with_the_reference_architecture(sweep, name):
    rows, epochs = sweep
    row = next(
        r
        for r in rows
        if r["model"] == name
        and r["framework"] == "pytorch"
        and r["image_size"] == 64
        and r["device"] == "cpu"
    )
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == models.infer(models.build_arch(name, 3, 64))["parameters"]
    assert row["steps_per_epoch"] == 16 // 4
    assert row["median_epoch_seconds"] > 0 and row["images_per_second"] > 0
    assert 0.0 <= row["final_val_accuracy"] <= 1.0
    assert row["framework_version"].startswith("2.13.0")
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


def test_faults_between_real_runs(sweep):
    rows, _ = sweep
    outcomes = [r["outcome"] for r in rows]
    fault = next(i for i, r in enumerate(rows) if r["framework"] == "fault")
    assert fault == len(RUN_MODELS)  # after every model's real run, before the next real one
    assert outcomes[fault] == "crash" and outcomes[fault + 1] == "ok"


def test_threads_are_applied_and_recorded(sweep):
    rows, _ = sweep
    row = next(r for r in rows if r["threads"] == 1)
    assert row["outcome"] == "ok" and row["optimizer"] == "adam"
    assert json.loads(row["thread_env"])["OMP_NUM_THREADS"] == "1"
    assert json.loads(row["threads_applied"])["intra_op"] == 1
    # The OS threads the worker had after each epoch are recorded too (the settings are not the threads).
    _, epochs = sweep
    mine = [e["os_threads"] for e in epochs if e["run_id"] == row["id"]]
    assert len(mine) == 1 and mine[0] >= 1, mine  # its one epoch


def test_cuda_without_a_gpu_is_unavailable_with_the_reason(sweep):
    rows, _ = sweep
    row = next(r for r in rows if r["device"] == "cuda")
    assert row["outcome"] == "unavailable"
    assert "CPU-only build" in row["reason"] or "no CUDA device" in row["reason"]


def test_repeats_start_from_the_same_state(sweep):
    rows, epochs = sweep
    row = next(r for r in rows if r["repeats"] == 2)
    assert row["outcome"] == "ok"
    mine = [e for e in epochs if e["run_id"] == row["id"]]
    assert [(e["repeat"], e["epoch"]) for e in mine] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    # Reset restores weights, optimizer and data order: the repeats train identically.
    assert mine[0]["train_loss"] == pytest.approx(mine[2]["train_loss"], rel=1e-4)
    assert row["min_epoch_seconds"] <= row["median_epoch_seconds"] <= row["max_epoch_seconds"]


def test_small_cnn_learns_the_synthetic_data(write_matrix, cli, workdir, pytorch_python):
    write_matrix("""
        settings: {min_time: 0, min_steps: 1,
                   dataset_size: 400, image_size: 32, classes: 4, batch_size: 16, epochs: 4,
                   warmup_steps: 0, lr: 0.01}
        axes: {framework: [pytorch], model: [small_cnn]}
    """)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    outcome, accuracy = conn.execute("SELECT outcome, final_val_accuracy FROM runs").fetchone()
    assert outcome == "ok"
    assert accuracy > 0.6  # chance is 0.25


def test_the_gru_runs_in_the_harness_and_its_unit_is_said(sweep):
    rows, epochs = sweep
    row = next(r for r in rows if r["model"] == "gru")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == models.infer(models.build_arch("gru", 2, 64))["parameters"] == 3_818_302
    assert row["images_per_second"] > 0 and 0.0 <= row["final_val_accuracy"] <= 1.0
    assert 'gru: one "image" is one sequence of 150 tokens' in REPORT["comparison"]


def test_a_language_model_runs_and_counts_its_tokens(sweep):
    rows, _ = sweep
    row = next(r for r in rows if r["model"] == "gpt_tiny")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["sequence_length"] == 16
    assert row["parameter_count"] == models.infer(models.build_arch("gpt_tiny", 3, 64))["parameters"]
    assert row["tokens_per_second"] == pytest.approx(row["images_per_second"] * 16)
    gru = next(r for r in rows if r["model"] == "gru")
    assert gru["tokens_per_second"] == pytest.approx(gru["images_per_second"] * 150)
    images = [r for r in rows if r["model"] in models.MODELS]  # every image model, and the fault's row
    assert len(images) >= len(RUN_MODELS) and all(r["tokens_per_second"] is None for r in images)
    for report in ("comparison", "results"):  # the plain results table names the unit too
        assert (
            'gpt_tiny: one "image" is one sequence of 16 tokens, each position predicting the next'
            in REPORT[report]
        )
    header = next(line for line in REPORT["results"].splitlines() if line.startswith("run "))
    assert "images/s  tokens/s" in header
    line = next(line for line in REPORT["results"].splitlines() if "gpt_tiny" in line)
    at = header.index("tokens/s")  # an aligned table: the cell starts under its header
    assert line[at : at + 8].strip()[:1].isdigit(), line

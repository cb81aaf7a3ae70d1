"""`bench train`: one configuration from options, validated like a matrix, run and recorded."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests import dbs


def test_train_runs_and_records_one_configuration(cli, workdir, db_url):
    result = cli(
        "train",
        "--framework",
        "fault",
        "--fault",
        "raise",
        "--after-steps",
        "2",
        "--dataset-size",
        "64",
        "--db",
        db_url,
    )
    assert result.exit_code == 0, result.output
    assert "run 1: error: RuntimeError: fault worker: raised on purpose after 2 steps" in result.output
    rows = dbs.query(
        db_url,
        "SELECT s.kind, r.framework, r.fault, r.dataset_size, r.outcome"
        " FROM runs r JOIN sweeps s ON s.id = r.sweep_id",
    )
    rows = [{**r, "fault": json.loads(r["fault"])["kind"]} for r in rows]  # runs.fault: one JSON value
    assert [tuple(r.values()) for r in rows] == [("train", "fault", "raise", 64, "error")]


@pytest.mark.parametrize(
    "args,message",
    [
        (("--batch-size", "-4"), "--batch-size: expected a positive integer, got -4"),
        (("--model", "resnet51"), "--model: unknown model 'resnet51'"),
        (
            ("--image-size", "32", "--model", "alexnet"),
            "--image-size: image_size 32 is too small for alexnet",
        ),
        (
            ("--dataset-size", "20", "--batch-size", "32"),
            "--batch-size: 32 is larger than the training split of 16",
        ),
        (("--dataset", "cifar10"), "--data-dir: dataset cifar10 needs the folder"),
        (("--fault", "segfault"), "--fault: only applies to framework fault"),
        (("--features", "true"), "--features: features applies to task: inference"),
        (("--task", "predict"), "--task: unknown task 'predict' (known: train, inference)"),
        (("--cpus", "1-"), "--cpus: expected CPU numbers such as [0, 1]"),
        (("--memory-budget", "lots"), "--memory-budget: expected a size such as 512MiB"),
        (
            ("--memory-budget", "1GiB", "--sample-interval", "0"),
            "--sample-interval: memory_budget needs the sampler",
        ),
        (("--mode", "turbo"), "--mode: unknown mode 'turbo' (known: eager, graph, compiled)"),
        (("--precision", "fp8"), "--precision: unknown precision 'fp8'"),
        (("--target-accuracy", "2"), "--target-accuracy: expected an accuracy above 0 and at most 1"),
        (("--stop-at-target", "true"), "--stop-at-target: needs target_accuracy"),
        (("--compile-mode", "default"), "--compile-mode: torch.compile's mode: only applies to"),
        (
            ("--task", "inference", "--target-accuracy", "0.5"),
            "--target-accuracy: time to accuracy applies to training",
        ),
    ],
)
def test_train_rejects_bad_options_before_anything_runs(cli, workdir, args, message):
    result = cli("train", "--framework", "pytorch", *args)
    assert result.exit_code == 1
    assert result.output.startswith("error: " + message), result.output
    assert not (workdir / "bench.db").exists()


def test_train_takes_resource_limits_and_prints_what_the_sampler_saw(cli, workdir):
    result = cli(
        "train", "--framework", "fault", "--fault", "hold", "--hold-threads", "2", "--hold-seconds", "0.5",
        "--cpus", "0,1", "--memory-budget", "2GiB", "--dataset-size", "64",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "resources: CPU" in result.output and "threads 3 steady (3 max)" in result.output
    row = sqlite3.connect(workdir / "bench.db").execute("SELECT cpus, memory_budget FROM runs").fetchone()
    assert row == ("0-1", 2 << 30)

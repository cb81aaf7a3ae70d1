"""Each framework's data-parallel runs (issue 26), through its own machinery: PyTorch's
DistributedDataParallel and Paddle's DataParallel, both over gloo; two real replica processes on
the loopback interface, launched and recorded by bench.

The loss match: vit_tiny has neither dropout nor batch norm, so two replicas of batch 4 whose
gradients DDP averages take the very steps one replica of batch 8 takes; their validation losses
after each epoch agree to float32 rounding (the all-reduce sums in another order)."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from click.testing import CliRunner

from tests.drivers import framework_python

pytestmark = [
    pytest.mark.slow,
    pytest.mark.framework,
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two replicas need two CPUs"),
]
# Relative difference allowed between the validation losses of one replica of batch 8 and two of
# batch 4: the same steps, summed in another order (float32 rounding over a few steps).
LOSS_TOLERANCE = 1e-4

# Each framework and what its run records of its machinery.
MACHINERY = {
    "pytorch": "torch.nn.parallel.DistributedDataParallel (gloo over 2",
    "paddle": "paddle.DataParallel (gloo over 2",
    "jax": "jax.distributed over 2 processes (gloo CPU collectives)",
    "tensorflow": "tf.distribute.MultiWorkerMirroredStrategy (2 workers from TF_CONFIG",
    "mxnet": "mxnet.kvstore dist_sync (2 workers, one server and a scheduler",
}
MATRIX = """
name: replicas
settings:
  framework: {framework}
  min_time: 0
  min_steps: 1
  dataset_size: 40
  val_fraction: 0.2
  epochs: 3
  warmup_steps: 1
  image_size: 32
  classes: 4
  optimizer: adam
  lr: 0.001
  timeout: 300
include:
  - {model: vit_tiny, batch_size: 8}
  - {model: vit_tiny, batch_size: 4, replicas: 2}
  - {model: small_cnn, batch_size: 4, replicas: 2, epochs: 6, optimizer: sgd, lr: 0.01}
"""


@pytest.fixture(scope="module", params=sorted(MACHINERY))
def sweep(request, tmp_path_factory):
    from orchestrator.cli.main import cli

    framework = request.param
    framework_python(framework)
    path = tmp_path_factory.mktemp(f"{framework}-replicas")
    (path / "m.yaml").write_text(MATRIX.replace("{framework}", framework))
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
    reps = [dict(r) for r in conn.execute("SELECT * FROM replicas ORDER BY run_id, replica")]
    conn.close()
    return runs, epochs, reps, framework


def test_every_run_is_ok(sweep):
    runs, _, _, _ = sweep
    for run in runs:
        assert run["outcome"] == "ok", (run["reason"], run["stderr_tail"])


def test_two_replicas_take_the_steps_one_replica_of_the_global_batch_takes(sweep):
    runs, epochs, _, _ = sweep
    one, two = runs[0], runs[1]
    assert (one["replicas"], one["global_batch"]) == (None, 8)
    assert (two["replicas"], two["global_batch"]) == (2, 8)
    assert one["steps_per_epoch"] == two["steps_per_epoch"] == 4  # 32 samples, 8 a step
    losses = [[e["val_loss"] for e in epochs if e["run_id"] == run["id"]] for run in (one, two)]
    assert len(losses[0]) == 3
    for a, b in zip(*losses, strict=True):
        assert b == pytest.approx(a, rel=LOSS_TOLERANCE)
    # and the steps did something: the loss moved by far more than the tolerance
    assert abs(losses[0][-1] - losses[0][0]) > 100 * LOSS_TOLERANCE * losses[0][0]


def test_the_run_says_how_its_replicas_were_joined(sweep):
    runs, _, reps, framework = sweep
    two = runs[1]
    execution = json.loads(two["execution"])
    assert execution["data_parallel"].startswith(MACHINERY[framework])
    mine = [r for r in reps if r["run_id"] == two["id"]]
    assert [(r["replica"], r["outcome"]) for r in mine] == [(0, "ok"), (1, "ok")]
    assert mine[0]["cpus"] != mine[1]["cpus"] and all(r["threads"] == 1 for r in mine)
    assert all(r["images_per_second"] > 0 for r in mine)


def test_a_data_parallel_run_learns_the_synthetic_data(sweep):
    runs, epochs, _, _ = sweep
    cnn = runs[2]
    mine = [e for e in epochs if e["run_id"] == cnn["id"] and not e["extra"]]
    assert len(mine) == 6
    assert mine[-1]["train_loss"] < 0.8 * mine[0]["train_loss"]
    assert mine[-1]["val_accuracy"] > 0.25 + 0.2  # four classes: well above chance


@pytest.mark.parametrize(
    "framework, why",
    [
        ("singa", "Singa's data-parallel training (singa.opt.DistOpt) all-reduces the gradients with NCCL"),
    ],
)
def test_a_framework_without_it_says_why(tmp_path, monkeypatch, framework, why):
    """Every replica ends unsupported with the framework's reason; the run says so, naming one."""
    from orchestrator.cli.main import cli

    framework_python(framework)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(
        f"settings: {{framework: {framework}, model: small_cnn, replicas: 2, batch_size: 4, dataset_size: 40,"
        " image_size: 32, epochs: 1, timeout: 300}\n"
    )
    result = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(tmp_path / "bench.db")
    outcome, reason = conn.execute("SELECT outcome, reason FROM runs").fetchone()
    replicas = conn.execute("SELECT outcome FROM replicas ORDER BY replica").fetchall()
    conn.close()
    assert outcome == "unsupported" and why in reason
    assert reason.startswith(("replica 0 of 2: ", "replica 1 of 2: "))
    assert len(replicas) == 2 and "unsupported" in {r[0] for r in replicas}

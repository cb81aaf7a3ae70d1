"""task: inference: the model in evaluation mode without gradients, timed by the shared runner,
in every framework; features: true stops at the pooled features."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.drivers import checked, framework_python, run_driver
from workers import models

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax")


@pytest.mark.parametrize(
    "name,size,output,parameters",
    [
        # ResNet50 without its classifier: 25,557,032 - (2048 * 1000 + 1000)
        ("resnet50", 64, [2048], 23_508_032),
        ("mobilenet_v2", 64, [1280], 3_504_872 - (1280 * 1000 + 1000)),
        ("alexnet", 64, [256 * 6 * 6], 2_469_696),  # the convolutions only
        ("vgg16", 64, [512 * 7 * 7], 14_714_688),
        ("googlenet", 64, [1024], 6_624_904 - (1024 * 1000 + 1000)),
        ("small_cnn", 32, [100 * 8 * 8], 159_150),
    ],
)
def test_features_stop_at_the_pooled_features(name, size, output, parameters):
    arch = models.build_arch(name, 1000, size, features=True)
    assert arch["output"] == output and arch["features"]
    assert models.infer(arch) == {"output_shape": output, "parameters": parameters}
    assert not [n for n in arch["layers"] if n["op"] == "dense"]
    assert models.build_arch(name, 1000, size)["output"] == [1000]


def test_features_need_task_inference(write_matrix, cli):
    write_matrix("settings: {features: true}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: m.yaml:1: features: features applies to task: inference (the pooled features, no training)"
    )
    write_matrix("settings: {task: predict}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "unknown task 'predict' (known: train, inference)" in result.output


def test_train_configurations_keep_their_hash():
    """task and features were added in schema 5: a training configuration's identity is unchanged."""
    from orchestrator.config.run_config import RunConfig

    assert RunConfig(task=None, features=None).config_hash == RunConfig().config_hash
    assert RunConfig(task="inference").config_hash != RunConfig().config_hash


# One real tiny inference run per framework, through bench itself; and features in each.
SWEEP = """
name: inference-tiny
settings: {min_time: 0, min_steps: 1,
           model: small_cnn, image_size: 32, dataset_size: 40, val_fraction: 0.2, batch_size: 8,
           epochs: 2, warmup_steps: 1, threads: 1, task: inference}
axes:
  framework: [pytorch, tensorflow, mxnet, paddle, singa, jax]
  features: [false, true]
"""


@pytest.mark.slow
@pytest.mark.framework
def test_a_real_inference_run_in_every_framework(write_matrix, cli, workdir):
    write_matrix(SWEEP)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(workdir / "bench.db")
    conn.row_factory = sqlite3.Row
    runs = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    assert [(r["framework"], r["outcome"]) for r in runs] == [(f, "ok") for f in FRAMEWORKS for _ in (0, 1)]
    for run in runs:
        arch = models.build_arch("small_cnn", 10, 32, features=bool(run["features"]))
        assert run["task"] == "inference"
        assert run["parameter_count"] == models.infer(arch)["parameters"], run["framework"]
        assert run["steps_per_epoch"] == 4 and run["final_train_loss"] is None
        assert run["final_val_accuracy"] is None
        epochs = conn.execute("SELECT * FROM epochs WHERE run_id = ?", (run["id"],)).fetchall()
        assert len(epochs) == 2 and all(e["images"] == 32 and e["images_per_second"] > 0 for e in epochs)
        result = json.loads((Path(run["run_dir"]) / "result.json").read_text())
        assert len(result["epochs"]) == 2 and all(e["seconds_per_1000_images"] > 0 for e in result["epochs"])
        events = (Path(run["run_dir"]) / "events.jsonl").read_text()
        assert '"phase": "eval"' not in events and '"phase":"eval"' not in events  # nothing evaluated
    conn.close()
    table = cli("report", "--table", "inference").output
    assert "s/1000 images (median, min–max)" in table
    assert all(f in table for f in FRAMEWORKS)
    results = cli("report").output
    assert "inference (evaluation mode, no gradients):" in results and "s/1000 images (= ms/image)" in results


# Evaluation mode, checked inside each framework: small_cnn has dropout, so two forward passes of
# one batch agree only when dropout is off; and the output records no gradient.
DRIVER = """
import sys
from tests.driver_checks import configurer, run_checks

FRAMEWORK = sys.argv[3]


def as_array(x):
    if type(x).__module__.startswith("singa"):
        from workers.adapters.singa.binding import HostIO
        return HostIO.get(x)
    if hasattr(x, "block_until_ready"):  # a JAX array
        import numpy
        return numpy.asarray(x)
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return x.numpy()


def forward_twice(features):
    config, adapter = configurer(FRAMEWORK, task="inference", features=features)
    a, _ = adapter()
    a.build_model()
    a.load_data()
    a.prepare_epoch(list(range(320)))
    outputs = []
    for _ in range(2):
        a.infer_step(0)
        a.synchronize()
        outputs.append(as_array(a._output).copy())
    grad = getattr(a._output, "requires_grad", None)
    if grad is None and hasattr(a._output, "stop_gradient"):
        grad = not a._output.stop_gradient
    if FRAMEWORK == "singa":
        # Singa's autograd links every output to its operator whatever the mode (requires_grad
        # follows the parameters); its "no gradients" is autograd.training off: the operators
        # keep nothing for backward, and nothing calls backward.
        from singa import autograd
        grad = autograd.training
    return {"shape": list(outputs[0].shape), "same": bool((outputs[0] == outputs[1]).all()),
            "requires_grad": grad}


def check_logits():
    return forward_twice(False)


def check_features():
    return forward_twice(True)


run_checks(globals(), sys.argv[1:3])
"""


@pytest.mark.slow
@pytest.mark.framework
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_inference_runs_in_evaluation_mode_without_gradients(framework, tmp_path):
    python = framework_python(framework)
    path, out = tmp_path / "driver.py", tmp_path / "out.json"
    path.write_text(DRIVER)
    run_driver(python, path, str(out), json.dumps([["logits", []], ["features", []]]), framework)
    result = checked(json.loads(out.read_text()))
    # driver_checks' BASE_CONFIG: small_cnn, 4 classes, 32 px, batch 16
    for name, shape in (("logits", [16, 4]), ("features", [16, 6400])):
        assert result(name)["shape"] == shape, result(name)
        assert result(name)["same"], f"{framework} {name}: two passes differ: dropout is on"
        assert result(name)["requires_grad"] in (None, False), result(name)

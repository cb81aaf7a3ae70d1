"""The TensorFlow adapter against the real framework, in the TensorFlow environment's interpreter.

TensorFlow never enters this pytest process: one driver script runs the adapter checks in a
subprocess (paying TensorFlow's import once) and writes plain JSON; a second script in the PyTorch
environment dumps reference weights and outputs, so the Keras translation is checked to compute
the same function as the PyTorch one (the GRU too, from a third script); and the real harness
runs every model once.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests import import_record, torch_gru
from tests.drivers import checked, drive, framework_python, run_driver
from workers import models

# Every model but vit_b16, whose 86 M parameters are built in every framework once, by
# tests/test_across_frameworks.py (bench models): here that would cost minutes per framework.
ADAPTER_MODELS = [m for m in models.MODELS if m != "vit_b16"]

pytestmark = [pytest.mark.slow, pytest.mark.framework]

REPO = Path(__file__).resolve().parent.parent

# (model, image size) pairs whose Keras outputs are compared with PyTorch's: stride-2 and max-pool
# padding, residual adds, depthwise convolutions, adaptive pooling from 1x1 to 6x6.
CROSS = [["small_cnn", 32], ["alexnet", 64], ["mobilenet_v2", 32], ["resnet50", 32], ["googlenet", 32]]

TORCH_SIDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from workers import models
    from workers.adapters import pytorch

    folder, cases = sys.argv[1], json.loads(sys.argv[2])
    for name, size in cases:
        a = pytorch.Adapter(dict(framework="pytorch", device="cpu", optimizer="sgd", lr=0.01,
                                 momentum=0.9, threads=0, seed=0))
        a.setup()
        a.build(models.build_arch(name, 10, size))
        arrays = []
        with torch.no_grad():
            for m in a.model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):  # non-trivial statistics and affine terms
                    m.running_mean.normal_(0, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0, 0.1)
                elif isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                    m.bias.normal_(0, 0.1)
                if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d)):
                    arrays += [v.numpy().copy() for k, v in m.state_dict().items()
                               if k != "num_batches_tracked"]
            x = np.random.RandomState(1).standard_normal((2, 3, size, size)).astype(np.float32)
            a.model.eval()
            out = a.model(torch.from_numpy(x)).numpy()
        np.savez("{}/{}.npz".format(folder, name), x=x, out=out,
                 **{"p{:04d}".format(i): v for i, v in enumerate(arrays)})
    """
)

DRIVER = textwrap.dedent(
    """
    import numpy as np
    from tests.driver_checks import configurer, run_checks
    from workers import models, runner
    from workers.adapters import base

    config, adapter = configurer("tensorflow")

    def check_models():
        a, _ = adapter(batch_size=2, image_size=64)
        out = {}
        for name in [m for m in models.MODELS if m != "vit_b16"]:
            arch = models.build_arch(name, 1000, 64)
            count = a.build(arch)  # releases the previous model first
            shape = list(a.forward_shape(2))
            out[name] = {"keras": count, "infer": models.infer(arch)["parameters"], "shape": shape}
        out["small_cnn_32"] = a.build(models.build_arch("small_cnn", 10, 32))
        arch = models.build_arch("gru", 2, 64)
        out["gru"] = {"keras": a.build(arch), "infer": models.infer(arch)["parameters"],
                      "shape": list(a.forward_shape(2))}
        return out

    def values(variables):
        return [v.numpy().copy() for v in variables]

    def same(one, two):
        return len(one) == len(two) and all(np.array_equal(x, y) for x, y in zip(one, two))

    def train_epoch(a, epoch, train_size):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        return a.epoch_loss()

    def check_train():  # the runner's order of calls
        a, info = adapter()
        a.build_model()
        initial = values(a.model.variables)
        train_size, val_size = a.load_data()
        a.reset()
        epochs = []
        for epoch in range(1, a.config["epochs"] + 1):
            epochs.append([train_epoch(a, epoch, train_size)] + list(a.evaluate()))
        trained_differs = not same(initial, values(a.model.variables))
        a.reset()
        restored = same(initial, values(a.model.variables))
        optimizer_zero = all(not v.numpy().any() for v in a.optimizer.variables
                             if "learning_rate" not in v.path)
        return {"info": info, "sizes": [train_size, val_size], "epochs": epochs,
                "trained_differs": trained_differs, "reset_restores": restored,
                "optimizer_fresh": optimizer_zero,
                "traces": a._train_fn.experimental_get_tracing_count(),
                "train_outputs": len(a._train_fn.get_concrete_function().outputs),
                "repeat_first_loss": train_epoch(a, 1, train_size)}

    def check_optimizers():
        out = {}
        for name in ("adam", "rmsprop"):
            a, _ = adapter(optimizer=name, lr=0.001, image_size=16, dataset_size=40)
            a.build_model()
            keys = ("epsilon", "beta_1", "beta_2", "rho", "momentum", "centered")
            out[name] = {k: float(getattr(a.optimizer, k)) for k in keys if hasattr(a.optimizer, k)}
            out[name]["loss"] = train_epoch(a, 1, a.load_data()[0])
        return out

    def check_cross(folder, cases):
        a, _ = adapter(batch_size=2, classes=10)
        out = {}
        for name, size in cases:
            arch = models.build_arch(name, 10, size)
            a.build(arch)
            f = np.load("{}/{}.npz".format(folder, name))
            params = [f["p{:04d}".format(i)] for i in range(sum(k[0] == "p" for k in f.files))]
            load_torch_weights(a.model, arch, params)
            got = a.model(f["x"].transpose(0, 2, 3, 1), training=False).numpy()
            out[name] = [float(np.abs(got - f["out"]).max()), float(np.abs(f["out"]).max())]
        return out

    def param_nodes(layers, shape, found):
        for node in layers:
            if node["op"] in ("conv", "dense", "bn"):
                found.append((node, shape))
            if node["op"] == "residual":
                param_nodes(node["body"], shape, found)
                param_nodes(node["shortcut"], shape, found)
            if node["op"] == "concat":
                for branch in node["branches"]:
                    param_nodes(branch, shape, found)
            if node["op"] == "flatten":
                found.append((node, shape))
            shape = models.out_shape(node, shape)
        return found

    def by_class(model):
        # Keras names layers <class>, <class>_1, <class>_2, ... in the order they were made.
        made = {}
        for layer in model.layers:
            if layer.weights:
                made.setdefault(type(layer).__name__, []).append(layer)
        return {k: iter(sorted(v, key=made_number)) for k, v in made.items()}

    def made_number(layer):
        return int(layer.name.rsplit("_", 1)[1]) if layer.name[-1].isdigit() else 0

    def load_torch_weights(model, arch, params):
        made, flat, i = by_class(model), None, 0
        for node, shape in param_nodes(arch["layers"], tuple(arch["input"]), []):
            op = node["op"]
            if op == "flatten":
                flat = shape
                continue
            if op == "bn":
                next(made["BatchNormalization"]).set_weights(params[i:i + 4])
                i += 4
                continue
            w, bias = params[i], params[i + 1:i + 1 + int(node["bias"])]
            i += 1 + len(bias)
            if op == "dense":
                if flat is not None:  # PyTorch flattens C, H, W; Keras H, W, C
                    w = w.reshape((node["out"],) + flat).transpose(0, 2, 3, 1).reshape(node["out"], -1)
                    flat = None
                layer, w = next(made["Dense"]), w.T
            elif node["groups"] > 1 and node["groups"] == shape[0]:
                layer = next(made["DepthwiseConv2D"])
                w = w.reshape(shape[0], -1, node["kernel"], node["kernel"]).transpose(2, 3, 0, 1)
            else:
                layer, w = next(made["Conv2D"]), w.transpose(2, 3, 1, 0)
            layer.set_weights([w] + bias)
        assert i == len(params), (i, len(params))

    def check_gru_cross(path):
        # Keras's reset_after GRU is PyTorch's with the gates in the order z, r, n, not r, z, n.
        f = np.load(path)
        a, _ = adapter(model="gru", classes=2, batch_size=4)
        out = {}
        for features, want in ((False, "out"), (True, "state")):
            a.build(models.build_arch("gru", 2, 1, features=features))
            embedding, gru = [layer for layer in a.model.layers if layer.weights][:2]
            embedding.set_weights([f["embedding"]])
            biases = np.stack([zrn(f["bias_ih"]), zrn(f["bias_hh"])])
            gru.set_weights([zrn(f["weight_ih"]).T, zrn(f["weight_hh"]).T, biases])
            if not features:
                a.model.layers[-1].set_weights([f["dense_weight"].T, f["dense_bias"]])
            got = a.model(f["x"], training=False).numpy()
            out[want] = [float(np.abs(got - f[want]).max()), float(np.abs(f[want]).max())]
        return out

    def zrn(array):
        r, z, n = np.split(array, 3)
        return np.concatenate([z, r, n])

    def check_gru_train():
        # PyTorch reaches about 0.9 validation accuracy in 3 epochs of this.
        a, info = adapter(model="gru", classes=2, dataset_size=1280, batch_size=64, optimizer="adam",
                          lr=0.001, epochs=4)
        a.build_model()
        train_size, _ = a.load_data()
        a.reset()
        epochs = [[train_epoch(a, e, train_size)] + list(a.evaluate()) for e in range(1, 5)]
        graph = a._train_fn.get_concrete_function().graph
        return {"settings": info["settings"], "epochs": epochs,
                "ops": sorted({op.type for op in graph.get_operations()
                               if "While" in op.type or "RNN" in op.type})}

    def check_gru_inference():
        out = {}
        for features in (False, True):
            a, _ = adapter(model="gru", classes=2, task="inference", features=features,
                           dataset_size=40, batch_size=8)
            a.build_model()
            steps = a.prepare_epoch(runner.epoch_order(0, 1, a.load_data()[0]))
            a.infer_step(steps - 1)
            a.synchronize()
            out[str(features)] = list(a._output.shape)
        return out

    def check_cuda():
        try:
            adapter(device="cuda")
        except base.Unavailable as exc:
            return {"error": str(exc)}
        return {"error": None}

    def check_oom():
        import tensorflow as tf
        a, _ = adapter()
        cases = [MemoryError(),
                 tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
                 RuntimeError("out of memory"), tf.errors.InvalidArgumentError(None, None, "shapes"),
                 ValueError("out of memory")]
        return [a.is_oom(exc) for exc in cases]

    run_checks(globals())
    """
)

MATRIX = """
name: tensorflow-models
settings: {min_time: 0, min_steps: 1,
           dataset_size: 20, batch_size: 4, epochs: 1, warmup_steps: 1, image_size: 64, classes: 3,
           threads: 1, timeout: 600}
axes: {framework: [tensorflow], model: [small_cnn, alexnet, mobilenet_v2, resnet50, vgg16, googlenet,
                                        vit_tiny]}
include:
  - {framework: tensorflow, model: gru, classes: 2}
  - {framework: tensorflow, model: gpt_tiny, sequence_length: 16}
"""


@pytest.fixture(scope="session")
def tensorflow_python() -> Path:
    return framework_python("tensorflow")


@pytest.fixture(scope="module")
def driven(tensorflow_python, pytorch_python, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tensorflow")
    (folder / "torch_side.py").write_text(TORCH_SIDE)
    run_driver(pytorch_python, folder / "torch_side.py", str(folder), json.dumps(CROSS), timeout=400)
    torch_gru.dump(pytorch_python, folder)  # folder/gru.npz
    checks = [["models", []], ["train", []], ["optimizers", []], ["cross", [str(folder), CROSS]]]
    checks += [["gru_cross", [str(folder / "gru.npz")]], ["gru_train", []], ["gru_inference", []]]
    checks += [["cuda", []], ["oom", []]]
    return checked(drive(tensorflow_python, folder, DRIVER, checks, timeout=400)[0])


@pytest.fixture(scope="module")
def ran(tensorflow_python, tmp_path_factory):
    """The real harness, once: every model, one thread each (applied before TensorFlow starts);
    `bench run` in a process of its own, its imports recorded (tests/import_record.py)."""
    return import_record.sweep(tmp_path_factory.mktemp("tensorflow-sweep"), MATRIX)


@pytest.fixture(scope="module")
def sweep(ran):
    from orchestrator.cli.main import cli

    path = ran[0]
    cwd = os.getcwd()
    os.chdir(path)
    try:
        runner = CliRunner()
        reports = [runner.invoke(cli, ["report", *o], catch_exceptions=False) for o in ([], ["--crashes"])]
    finally:
        os.chdir(cwd)
    conn = sqlite3.connect(path / "bench.db")
    conn.row_factory = sqlite3.Row
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT r.*, e.framework_version, e.threads_applied FROM runs r "
            "JOIN environments e ON e.run_id = r.id ORDER BY r.id"
        )
    ]
    epochs = [dict(r) for r in conn.execute("SELECT * FROM epochs ORDER BY run_id, repeat, epoch")]
    conn.close()
    return rows, epochs, reports


def test_module_imports_without_tensorflow(tensorflow_python):
    """In the framework's own interpreter, where importing the framework would succeed and be seen:
    only the adapter's setup() imports it."""
    code = (
        "import sys, workers.adapters.tensorflow as t; "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules; print(t.Adapter.name)"
    )
    proc = subprocess.run(
        [str(tensorflow_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "tensorflow", proc.stderr


@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_keras_parameter_count_equals_infer(driven, name):
    got = driven("models")[name]
    assert got["keras"] == got["infer"]
    assert got["shape"] == [2, 1000]


def test_small_cnn_reference_count(driven):
    assert driven("models")["small_cnn_32"] == 3_441_592


def test_gru_parameter_count_equals_infer(driven):
    assert driven("models")["gru"] == {"keras": 3_818_302, "infer": 3_818_302, "shape": [2, 2]}


@pytest.mark.parametrize("name", [case[0] for case in CROSS])
def test_keras_model_computes_what_the_pytorch_model_computes(driven, name):
    difference, scale = driven("cross")[name]
    assert difference <= 1e-5 * max(1.0, scale)


@pytest.mark.parametrize("output", ["out", "state"])
def test_keras_gru_computes_what_the_pytorch_gru_computes(driven, output):
    """Logits, and the last state that features: true yields, with PyTorch's weights."""
    torch_gru.assert_same_as_pytorch(driven("gru_cross")[output])


def test_gru_learns_the_synthetic_tokens(driven):
    got = driven("gru_train")
    torch_gru.assert_learns(got["epochs"], accuracy=0.75)


def test_gru_runs_keras_loop_on_cpu_and_says_so(driven):
    got = driven("gru_train")
    # No GPU: Keras falls back from cuDNN to its GRUCell in a while loop; no XLA (as Keras's "auto").
    assert "While" in got["ops"] and not [op for op in got["ops"] if "Cudnn" in op], got["ops"]
    settings = got["settings"]
    assert settings["gru_implementation"] == "GRUCell in a tf.while_loop" and settings["xla_jit"] is False
    assert settings["data_format"] == "token ids (N, L) int64"


def test_gru_inference_and_features(driven):
    assert driven("gru_inference") == {"False": [8, 2], "True": [8, models.GRU_UNITS]}


def test_small_cnn_learns_the_synthetic_data(driven):
    got = driven("train")
    assert got["sizes"] == [320, 80]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.6, got["epochs"]
    assert accuracies[-1] >= 0.6, got["epochs"]  # chance is 0.25
    assert got["traces"] == 1  # one graph, traced in build()
    # A training graph with no output ran 2-6% slower than the same graph returning its loss.
    assert got["train_outputs"] == 1


def test_reset_restores_the_initial_weights(driven):
    got = driven("train")
    assert got["trained_differs"] and got["reset_restores"] and got["optimizer_fresh"]
    # weights, optimizer state and dropout seeds all restored: the repeat retraces epoch 1
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


def test_setup_reports_versions_and_default_threads(driven):
    info = driven("train")["info"]
    assert info["framework_version"] == "2.21.0" and info["keras_version"].startswith("3.")
    assert info["python_version"] and info["device_name"] and info["cuda_version"] is None
    threads = info["threads"]
    assert threads["requested"] == 0 and threads["intra_op"] == 0 and threads["intra_op_effective"] >= 1


def test_optimizers_use_pytorch_defaults(driven):
    got = driven("optimizers")
    assert got["adam"]["epsilon"] == 1e-8 and got["adam"]["beta_2"] == 0.999
    assert got["rmsprop"]["rho"] == 0.99 and got["rmsprop"]["epsilon"] == 1e-8
    assert got["rmsprop"]["momentum"] == 0.0 and got["rmsprop"]["centered"] == 0.0
    for name in ("adam", "rmsprop"):  # an epoch's mean cross-entropy: > 0, finite, a number
        loss = got[name]["loss"]
        assert isinstance(loss, float) and math.isfinite(loss) and loss > 0, (name, loss)


def test_cuda_unavailable_says_why(driven):
    assert "CPU-only build" in driven("cuda")["error"]


def test_is_oom(driven):
    assert driven("oom") == [True, True, True, False, False]


def test_the_orchestrator_never_imported_tensorflow(ran):
    import_record.assert_no_framework(ran[1], "profiler.sampler")


@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_every_model_runs_in_the_harness(sweep, name):
    rows, epochs, _ = sweep
    row = next(r for r in rows if r["model"] == name and r["image_size"] == 64)
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == models.infer(models.build_arch(name, 3, 64))["parameters"]
    assert row["steps_per_epoch"] == 16 // 4 and row["images_per_second"] > 0
    assert row["framework_version"] == "2.21.0"
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


def test_the_gru_runs_in_the_harness(sweep):
    rows, epochs, _ = sweep
    row = next(r for r in rows if r["model"] == "gru")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == 3_818_302 and row["steps_per_epoch"] == 16 // 4
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


def test_threads_are_applied_and_reported_in_the_harness(sweep):
    rows, _, _ = sweep
    for row in rows:
        threads = json.loads(row["threads_applied"])
        assert row["threads"] == 1 and threads["applied"], threads
        assert threads["intra_op"] == threads["inter_op"] == 1


def test_reports_list_the_runs(sweep):
    rows, _, (table, crashes) = sweep
    assert table.exit_code == 0 and crashes.exit_code == 0, table.output + crashes.output
    assert len(rows) == 9  # seven models on the grid, the GRU and the tiny GPT
    listed = [line.split()[:3] for line in table.output.splitlines() if line.split()[1:2] == ["tensorflow"]]
    assert listed == [[str(r["id"]), "tensorflow", r["model"]] for r in rows], table.output
    assert "\n9 configurations: 9 ok" in table.output, table.output
    assert crashes.output.splitlines()[-1] == "every configuration ended ok", crashes.output


def test_the_language_model_runs_in_the_harness(sweep):
    rows, epochs, _ = sweep
    row = next(r for r in rows if r["model"] == "gpt_tiny")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["sequence_length"] == 16 and row["steps_per_epoch"] == 16 // 4
    arch = models.build_arch("gpt_tiny", 3, 64, sequence_length=16)
    assert row["parameter_count"] == models.infer(arch)["parameters"]
    assert row["tokens_per_second"] == pytest.approx(row["images_per_second"] * 16)
    assert 0.0 <= row["final_val_accuracy"] <= 1.0
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]

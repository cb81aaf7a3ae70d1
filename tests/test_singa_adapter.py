"""The Singa adapter against the real framework, driven in the Singa environment's Python 3.6.

singa never enters this pytest process: a driver script runs the checks in a subprocess and writes
plain JSON; each test reads its own part. Thread settings are read when singa's OpenMP runtime
loads, so the threads check runs in a second, short process.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.drivers import checked, drive, framework_python
from workers import models

# Every model but vit_b16, whose 86 M parameters are built in every framework once, by
# tests/test_across_frameworks.py (bench models): here that would cost minutes per framework.
ADAPTER_MODELS = [m for m in models.MODELS if m != "vit_b16"]

pytestmark = [pytest.mark.slow, pytest.mark.framework]
REPO = Path(__file__).resolve().parent.parent

DRIVER = textwrap.dedent(
    """
    import numpy as np
    from tests.driver_checks import configurer, run_checks
    from workers import models, runner
    from workers.adapters import base
    from workers.adapters.singa import adapter as adapter_module, layers as singa_layers

    config, adapter = configurer("singa", epochs=3, dataset_size=320, image_size=16)

    def check_models():
        a, _ = adapter(batch_size=2)
        out = {}
        # build() frees the previous model (VGG: 0.5 GB) first
        for name in [m for m in models.MODELS if m != "vit_b16"]:
            arch = models.build_arch(name, 1000, 64)
            try:
                count = a.build(arch)
            except base.Unsupported as exc:
                out[name] = {"unsupported": str(exc)}
                continue
            shape = list(a.logits(np.zeros((2, 3, 64, 64), np.float32)).shape)
            out[name] = {"singa": count, "infer": models.infer(arch)["parameters"], "shape": shape}
        out["small_cnn_32"] = a.build(models.build_arch("small_cnn", 10, 32))
        try:
            out["gru"] = {"singa": a.build(models.build_arch("gru", 2, 1))}
        except base.Unsupported as exc:
            out["gru"] = {"unsupported": str(exc)}
        # the refusal left the previous model whole: it still trains
        out["after_gru"] = list(a.logits(np.zeros((2, 3, 32, 32), np.float32)).shape)
        return out

    def check_ops():
        # the binding workarounds against numpy: host copies, the loss, adaptive pooling
        a, _ = adapter(batch_size=2)
        sg, io = adapter_module.import_singa(), adapter_module.HostIO
        x = np.random.RandomState(0).randn(2, 3, 5, 5).astype(np.float32)
        t = sg["tensor"].Tensor(x.shape, a.dev)
        io.put(t, x)
        logits = sg["tensor"].Tensor((2, 3), a.dev)
        io.put(logits, x[:, :, 0, 0].copy())
        labels = sg["tensor"].Tensor((2,), a.dev, sg["tensor"].int32)
        io.put(labels, np.array([2, 0], np.int32))
        loss = sg["autograd"].softmax_cross_entropy(logits, labels).l1()
        z = x[:, :, 0, 0].astype(np.float64)
        z = z - np.log(np.exp(z).sum(1, keepdims=True))
        pooled = {}
        for size in (6, 3):  # 5x5 -> 6x6 (bins overlap and repeat), 5x5 -> 3x3 (unequal bins)
            run = singa_layers.Translator(sg, a.dev, 2).adaptive_avgpool((3, 5, 5), size)
            got = io.get(run(t))
            want = np.zeros_like(got)
            for i in range(size):
                for j in range(size):
                    rows = slice(i * 5 // size, -(-(i + 1) * 5 // size))
                    cols = slice(j * 5 // size, -(-(j + 1) * 5 // size))
                    want[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
            pooled[size] = float(np.abs(got - want).max())
        got = io.get(sg["layer"].MaxPool2d(3, 2, 1)(t))  # ResNet's stem pooling, padded
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        want = np.array([[padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3))
                          for j in range(3)] for i in range(3)]).transpose(2, 3, 0, 1)
        pooled["max"] = float(np.abs(got - want).max())
        return {"roundtrip": bool((io.get(t) == x).all()), "loss": loss,
                "numpy_loss": float(-(z[0, 2] + z[1, 0]) / 2), "pool_error": pooled}

    def values(a):
        io = adapter_module.HostIO
        return [io.get(t) for t in a._states]

    def same(v1, v2):
        return all(bool((p == q).all()) for p, q in zip(v1, v2))

    def train_epoch(a, epoch, train_size):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        return a.epoch_loss()

    def check_train():
        a, info = adapter()
        a.build_model()
        initial = values(a)
        train_size, val_size = a.load_data()
        a.reset()  # as the runner does before each repeat
        epochs = []
        for epoch in range(1, a.config["epochs"] + 1):
            epochs.append([train_epoch(a, epoch, train_size)] + list(a.evaluate()))
        trained_differs = not same(initial, values(a))
        a.reset()
        return {"info": info, "sizes": [train_size, val_size], "epochs": epochs,
                "trained_differs": trained_differs, "reset_restores": same(initial, values(a)),
                "repeat_first_loss": train_epoch(a, 1, train_size)}

    def failure(**over):
        try:
            adapter(**over)
        except base.WorkerFailure as exc:
            return [type(exc).__name__, str(exc)]
        return None

    def check_refusals():
        return {"cuda": failure(device="cuda"), "adam": failure(optimizer="adam"),
                "rmsprop": failure(optimizer="rmsprop")}

    def check_oom():
        a, _ = adapter()
        cases = [MemoryError(), RuntimeError("std::bad_alloc"), RuntimeError("shape mismatch"),
                 ValueError("out of memory")]
        return [a.is_oom(exc) for exc in cases]

    def check_threads():
        return adapter(threads=1)[1]["threads"]

    run_checks(globals())
    """
)


def _drive(python: Path, folder: Path, checks: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    return drive(python, folder, DRIVER, [[name, []] for name in checks], env=env)[0]


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    python = framework_python("singa")
    folder = tmp_path_factory.mktemp("singa")
    results = _drive(python, folder, ["models", "ops", "train", "refusals", "oom"])
    results.update(_drive(python, folder, ["threads"]))  # a fresh process: OpenMP reads it at load
    return checked(results)


# The IMDB GRU through the harness: an honest outcome, not a crash or a missing row.
GRU_MATRIX = """
settings: {min_time: 0, min_steps: 1,
           model: gru, classes: 2, dataset_size: 20, batch_size: 4, epochs: 1, warmup_steps: 1}
axes: {framework: [singa]}
"""


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    from orchestrator.cli.main import cli

    framework_python("singa")
    path = tmp_path_factory.mktemp("singa-gru")
    (path / "m.yaml").write_text(GRU_MATRIX)
    cwd = os.getcwd()
    os.chdir(path)
    try:
        ran = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert ran.exit_code == 0, ran.output
    conn = sqlite3.connect(path / "bench.db")
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    conn.close()
    return rows


def test_module_imports_without_singa():
    """In the framework's own interpreter, where importing the framework would succeed and be seen:
    only the adapter's setup() imports it."""
    code = "import sys, workers.adapters.singa as s; assert 'singa' not in sys.modules; print(s.Adapter.name)"
    proc = subprocess.run(
        [str(framework_python("singa")), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "singa", proc.stderr


@pytest.mark.parametrize("name", [m for m in ADAPTER_MODELS if m not in ("mobilenet_v2", "googlenet")])
def test_parameter_count_equals_infer(driven, name):
    got = driven("models")[name]
    assert got["singa"] == got["infer"]
    assert got["shape"] == [2, 1000]


def test_mobilenet_v2_is_unsupported_for_its_grouped_convolutions(driven):
    reason = driven("models")["mobilenet_v2"]["unsupported"]
    assert "grouped convolution" in reason and "groups=32" in reason


def test_googlenet_is_unsupported_for_its_concatenation(driven):
    reason = driven("models")["googlenet"]["unsupported"]
    assert "concatenation" in reason and "VecTensor" in reason


def test_gru_is_unsupported_on_cpu_for_its_cudnn_only_rnn(driven):
    reason = driven("models")["gru"]["unsupported"]
    assert "cuDNN-only" in reason and "layer.CudnnRNN" in reason and "embedding" in reason
    assert driven("models")["after_gru"] == [2, 10]


def test_small_cnn_reference_count(driven):
    assert driven("models")["small_cnn_32"] == 3_441_592


def test_binding_workarounds_agree_with_numpy(driven):
    got = driven("ops")
    assert got["roundtrip"]
    assert got["loss"] == pytest.approx(got["numpy_loss"], rel=1e-5)
    assert max(got["pool_error"].values()) < 1e-5


def test_small_cnn_learns_the_synthetic_data(driven):
    got = driven("train")
    assert got["sizes"] == [256, 64]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.6, got["epochs"]
    assert accuracies[-1] >= 0.6, got["epochs"]  # chance is 0.25


def test_reset_restores_the_initial_weights(driven):
    got = driven("train")
    assert got["trained_differs"] and got["reset_restores"]
    # weights, momentum buffers and the device's random stream restored: the repeat retraces epoch 1
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


def test_setup_reports_versions(driven):
    info = driven("train")["info"]
    assert info["framework_version"] == "3.0.0.dev1"
    assert info["python_version"].startswith("3.6") and info["device_name"]
    assert info["cuda_version"] is None
    assert info["threads"]["requested"] == 0 and info["threads"]["openmp"] >= 1


def test_cuda_unavailable_and_missing_optimizers_unsupported(driven):
    got = driven("refusals")
    assert got["cuda"][0] == "Unavailable" and "CPU-only build" in got["cuda"][1]
    for name in ("adam", "rmsprop"):
        assert got[name][0] == "Unsupported" and "has only SGD" in got[name][1]


def test_is_oom(driven):
    assert driven("oom") == [True, True, False, False]


def test_threads_are_applied_and_reported(driven):
    threads = driven("threads")
    assert threads["requested"] == 1 and threads["openmp"] == 1
    assert threads["env"]["OMP_NUM_THREADS"] == "1"


def test_harness_records_the_gru_as_unsupported_with_its_reason(gru_run):
    (row,) = gru_run
    assert row["outcome"] == "unsupported", row["reason"] or row["stderr_tail"]
    assert "cuDNN-only" in row["reason"] and "CudnnRNN" in row["reason"]

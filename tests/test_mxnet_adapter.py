"""The MXNet adapter against the real framework, driven in the MXNet environment's interpreter,
then every model through the whole harness.

mxnet never enters this pytest process: one driver script runs the checks in a subprocess
(paying mxnet's import once) and writes plain JSON; a second, tiny run checks the thread
settings, which MXNet reads only before its import. PyTorch's weights and outputs, dumped by the
TensorFlow tests' scripts in the PyTorch environment, check that the Gluon translation computes
the same function as the PyTorch one.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests import import_record, torch_gru
from tests.drivers import checked, drive, framework_python, run_driver
from tests.test_tensorflow_adapter import CROSS, TORCH_SIDE
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
    from workers.adapters.mxnet import layers as mxnet_layers

    config, adapter = configurer("mxnet")

    def check_models():
        a, _ = adapter(image_size=64)
        out = {}
        for name in [m for m in models.MODELS if m != "vit_b16"]:
            arch = models.build_arch(name, 1000, 64)
            out[name] = {"mxnet": a.build(arch), "infer": models.infer(arch)["parameters"],
                         "shape": list(a.forward_shape(2))}
        a._release()  # free VGG's half gigabyte before the next check
        out["small_cnn_32"] = a.build(models.build_arch("small_cnn", 10, 32))
        arch = models.build_arch("gru", 2, 64)
        out["gru"] = {"mxnet": a.build(arch), "infer": models.infer(arch)["parameters"],
                      "shape": list(a.forward_shape(2))}
        return out

    def check_cross(folder, cases):
        # Gluon registers each block's parameters in PyTorch's state_dict order (conv and dense
        # weight, bias; BN gamma, beta, running mean, running variance), with the same shapes (NCHW).
        import mxnet as mx
        a, _ = adapter(batch_size=2, classes=10)
        out = {}
        for name, size in cases:
            a.build(models.build_arch(name, 10, size))
            f = np.load("{}/{}.npz".format(folder, name))
            params = [f["p{:04d}".format(i)] for i in range(sum(k[0] == "p" for k in f.files))]
            mine = list(a.net.collect_params().values())
            assert len(mine) == len(params), (len(mine), len(params))
            for param, value in zip(mine, params):
                assert param.shape == value.shape, (param.name, param.shape, value.shape)
                param.set_data(mx.nd.array(value))
            got = a.net(mx.nd.array(f["x"])).asnumpy()
            out[name] = [float(np.abs(got - f["out"]).max()), float(np.abs(f["out"]).max())]
        return out

    def check_gru_cross(path):
        # Gluon's GRU has PyTorch's gate order (r, z, n) and layout: the weights load as they are.
        import mxnet as mx
        f = np.load(path)
        a, _ = adapter(model="gru", classes=2, batch_size=4)
        names = ["embedding", "weight_ih", "weight_hh", "bias_ih", "bias_hh", "dense_weight", "dense_bias"]
        out = {}
        for features, want in ((False, "out"), (True, "state")):
            a.build(models.build_arch("gru", 2, 1, features=features))
            mine = list(a.net.collect_params().values())
            for param, name in zip(mine, names):
                param.set_data(mx.nd.array(f[name]))
            got = a.net(mx.nd.array(f["x"])).asnumpy()  # float32 token ids, as the adapter feeds them
            out[want] = [float(np.abs(got - f[want]).max()), float(np.abs(f[want]).max())]
        return out

    def check_gru_train():
        # PyTorch reaches about 0.9 validation accuracy in 3 epochs of this.
        a, info = adapter(model="gru", classes=2, dataset_size=1280, batch_size=64, optimizer="adam",
                          lr=0.001, epochs=4)
        a.build_model()
        train_size, _ = a.load_data()
        a.reset()
        epochs = [[train_epoch(a, e, train_size)] + list(a.evaluate()) for e in range(1, 5)]
        return {"settings": info["settings"], "epochs": epochs}

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

    def check_adaptive_pool():
        # PyTorch's windows: [floor(i*n/s), ceil((i+1)*n/s)), also for inputs smaller than s.
        import mxnet as mx, numpy as np
        pool = mxnet_layers.block_classes(mx)["AdaptiveAvgPool"]
        rng, worst = np.random.RandomState(0), {}
        for n, s in ((1, 6), (2, 7), (13, 6), (6, 6), (3, 7)):
            x = rng.standard_normal((2, 3, n, n)).astype("float32")
            got = pool(s)(mx.nd.array(x)).asnumpy()
            want = np.zeros((2, 3, s, s), "float32")
            for i in range(s):
                for j in range(s):
                    h0, h1 = i * n // s, -(-(i + 1) * n // s)
                    w0, w1 = j * n // s, -(-(j + 1) * n // s)
                    want[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
            worst["{}->{}".format(n, s)] = float(abs(got - want).max())
        return worst

    def state(a):
        return [p.data().asnumpy() for p, _ in a._initial]

    def same(s1, s2):
        return all((x == y).all() for x, y in zip(s1, s2))

    def train_epoch(a, epoch, train_size):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        return a.epoch_loss()

    def check_train():
        a, info = adapter()
        a.build_model()
        initial = state(a)
        train_size, val_size = a.load_data()
        a.reset()  # as the runner does before each repeat
        epochs = []
        for epoch in range(1, a.config["epochs"] + 1):
            epochs.append([train_epoch(a, epoch, train_size)] + list(a.evaluate()))
        trained_differs = not same(initial, state(a))
        a.reset()
        return {"info": info, "sizes": [train_size, val_size], "epochs": epochs,
                "trained_differs": trained_differs, "reset_restores": same(initial, state(a)),
                "repeat_first_loss": train_epoch(a, 1, train_size)}

    def check_cuda():
        try:
            adapter(device="cuda")
        except base.Unavailable as exc:
            return str(exc)
        return None

    def check_oom():
        import mxnet as mx
        a, _ = adapter()
        cases = [MemoryError(), mx.base.MXNetError("[12:00:00] storage: Failed to allocate CPU Memory"),
                 mx.base.MXNetError("cudaMalloc retry failed: out of memory"),
                 mx.base.MXNetError("Shape inconsistent"), ValueError("out of memory")]
        return [a.is_oom(exc) for exc in cases]

    def check_threads(n):  # alone in its process: MXNet reads its thread settings at import
        return adapter(threads=n)[1]["threads"]

    run_checks(globals())
    """
)

CHECKS = [["models", []], ["adaptive_pool", []], ["train", []], ["cuda", []], ["oom", []]]
CHECKS += [["gru_train", []], ["gru_inference", []]]
THREADS = 3  # not what MXNet picks by default (half the processors) on a machine of 2 to 4 cores

MATRIX = """
name: mxnet-models
settings: {min_time: 0, min_steps: 1,
           dataset_size: 20, batch_size: 4, epochs: 1, warmup_steps: 1, image_size: 64, classes: 3,
           timeout: 600}
axes:
  framework: [mxnet]
  model: [small_cnn, alexnet, mobilenet_v2, resnet50, vgg16, googlenet, vit_tiny]
include:
  - {framework: mxnet, model: small_cnn, image_size: 32, threads: 1, optimizer: rmsprop, lr: 0.001,
     repeats: 2}
  - {framework: mxnet, model: small_cnn, device: cuda}
  - {framework: mxnet, model: gru, classes: 2}
  - {framework: mxnet, model: gpt_tiny, sequence_length: 16}
"""


@pytest.fixture(scope="module")
def mxnet_python() -> Path:
    return framework_python("mxnet")


@pytest.fixture(scope="module")
def driven(mxnet_python, pytorch_python, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mxnet")
    (folder / "torch_side.py").write_text(TORCH_SIDE)
    run_driver(pytorch_python, folder / "torch_side.py", str(folder), json.dumps(CROSS), timeout=400)
    torch_gru.dump(pytorch_python, folder)  # folder/gru.npz
    checks = CHECKS + [["cross", [str(folder), CROSS]], ["gru_cross", [str(folder / "gru.npz")]]]
    results = drive(mxnet_python, folder, DRIVER, checks)[0]
    # A fresh process: MXNet reads its thread settings at import.
    results.update(drive(mxnet_python, folder, DRIVER, [["threads", [THREADS]]])[0])
    return checked(results)


@pytest.fixture(scope="module")
def ran(mxnet_python, tmp_path_factory):
    """`bench run` on the matrix in a process of its own, its imports recorded (tests/import_record.py)."""
    path = tmp_path_factory.mktemp("mxnet-sweep")
    (path / "m.yaml").write_text(MATRIX)
    run = import_record.bench(path, "run", "--matrix", "m.yaml", "--db", str(path / "bench.db"))
    assert run.returncode == 0, run.stdout + run.stderr
    return path, run


@pytest.fixture(scope="module")
def sweep(ran):
    from orchestrator.cli.main import cli

    db = str(ran[0] / "bench.db")
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT r.*, e.framework_version, e.threads_applied, e.thread_env "
            "FROM runs r JOIN environments e ON e.run_id = r.id ORDER BY r.id"
        )
    ]
    epochs = [dict(r) for r in conn.execute("SELECT * FROM epochs ORDER BY run_id, repeat, epoch")]
    conn.close()
    report = CliRunner().invoke(cli, ["report", "--db", db]).output
    crashes = CliRunner().invoke(cli, ["report", "--db", db, "--crashes"]).output
    return rows, epochs, report, crashes


def test_module_imports_without_mxnet(mxnet_python):
    """In the framework's own interpreter, where importing the framework would succeed and be seen:
    only the adapter's setup() imports it."""
    code = "import sys, workers.adapters.mxnet as m; assert 'mxnet' not in sys.modules; print(m.Adapter.name)"
    proc = subprocess.run(
        [str(mxnet_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "mxnet", proc.stderr


@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_mxnet_parameter_count_equals_infer(driven, name):
    got = driven("models")[name]
    assert got["mxnet"] == got["infer"]
    assert got["shape"] == [2, 1000]


def test_small_cnn_reference_count(driven):
    assert driven("models")["small_cnn_32"] == 3_441_592


def test_gru_parameter_count_equals_infer(driven):
    assert driven("models")["gru"] == {"mxnet": 3_818_302, "infer": 3_818_302, "shape": [2, 2]}


@pytest.mark.parametrize("name", [case[0] for case in CROSS])
def test_gluon_model_computes_what_the_pytorch_model_computes(driven, name):
    difference, scale = driven("cross")[name]
    assert difference <= 1e-5 * max(1.0, scale)


@pytest.mark.parametrize("output", ["out", "state"])
def test_gluon_gru_computes_what_the_pytorch_gru_computes(driven, output):
    """Logits, and the last state that features: true yields, with PyTorch's weights."""
    torch_gru.assert_same_as_pytorch(driven("gru_cross")[output])


def test_gru_learns_the_synthetic_tokens(driven):
    got = driven("gru_train")
    torch_gru.assert_learns(got["epochs"], accuracy=0.75)


def test_gru_runs_on_onednn_and_says_so(driven):
    settings = driven("gru_train")["settings"]
    assert settings["mkldnn_rnn"] is True and settings["MXNET_USE_MKLDNN_RNN"] is None
    assert settings["token_dtype"] == "float32"


def test_gru_inference_and_features(driven):
    assert driven("gru_inference") == {"False": [8, 2], "True": [8, models.GRU_UNITS]}


def test_adaptive_pool_matches_pytorch_windows(driven):
    worst = driven("adaptive_pool")
    assert sorted(worst) == ["1->6", "13->6", "2->7", "3->7", "6->6"], worst
    assert all(err < 1e-5 for err in worst.values()), worst


def test_small_cnn_learns_the_synthetic_data(driven):
    got = driven("train")
    assert got["sizes"] == [320, 80]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.6, got["epochs"]
    assert accuracies[-1] >= 0.6, got["epochs"]  # chance is 0.25


def test_reset_restores_the_initial_weights(driven):
    got = driven("train")
    assert got["trained_differs"] and got["reset_restores"]
    # weights, optimizer state and random stream all restored: the repeat retraces epoch 1
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


def test_setup_reports_versions(driven):
    info = driven("train")["info"]
    assert info["framework_version"] == "1.9.1" and info["cuda_version"] is None
    assert info["python_version"] and info["device_name"]
    assert info["threads"]["requested"] == 0 and info["threads"]["intra_op"] >= 1


def test_threads_are_applied_before_import_and_reported(driven):
    threads = driven("threads")
    assert threads["applied_before_import"] and threads["omp_num_threads"] == str(THREADS)
    assert threads["intra_op"] == THREADS and threads["inter_op"] == THREADS


def test_cuda_unavailable_says_why(driven):
    error = driven("cuda")
    assert error and ("CPU-only build" in error or "sees no GPU" in error)


def test_is_oom(driven):
    assert driven("oom") == [True, True, True, False, False]


# -- the whole harness -------------------------------------------------------------------------


def test_the_orchestrator_never_imported_mxnet(ran):
    import_record.assert_no_framework(ran[1], "profiler.sampler")


@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_every_model_runs_through_the_harness(sweep, name):
    rows, epochs, _, _ = sweep
    row = next(r for r in rows if r["model"] == name and r["image_size"] == 64 and r["device"] == "cpu")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == models.infer(models.build_arch(name, 3, 64))["parameters"]
    assert row["steps_per_epoch"] == 16 // 4
    assert row["median_epoch_seconds"] > 0 and row["images_per_second"] > 0
    assert row["framework_version"] == "1.9.1"
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


def test_threads_one_and_repeats_through_the_harness(sweep):
    rows, epochs, _, _ = sweep
    row = next(r for r in rows if r["threads"] == 1)
    assert row["outcome"] == "ok" and row["optimizer"] == "rmsprop", row["reason"]
    assert json.loads(row["thread_env"])["OMP_NUM_THREADS"] == "1"
    applied = json.loads(row["threads_applied"])
    assert applied["intra_op"] == 1 and applied["inter_op"] == 1
    mine = [e for e in epochs if e["run_id"] == row["id"]]
    assert [(e["repeat"], e["epoch"]) for e in mine] == [(0, 1), (1, 1)]
    assert mine[0]["train_loss"] == pytest.approx(mine[1]["train_loss"], rel=1e-4)


def test_the_gru_runs_through_the_harness(sweep):
    rows, epochs, _, _ = sweep
    row = next(r for r in rows if r["model"] == "gru")
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    assert row["parameter_count"] == 3_818_302 and row["steps_per_epoch"] == 16 // 4
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


@pytest.mark.parametrize("name, length", [("gpt_tiny", 16)])
def test_the_language_models_run_through_the_harness(sweep, name, length):
    rows, epochs, _, _ = sweep
    row = next(r for r in rows if r["model"] == name)
    assert row["outcome"] == "ok", row["reason"] or row["stderr_tail"]
    arch = models.build_arch(name, 3, 64, sequence_length=length)
    assert row["parameter_count"] == models.infer(arch)["parameters"]
    assert row["tokens_per_second"] == pytest.approx(row["images_per_second"] * length)
    assert [e["epoch"] for e in epochs if e["run_id"] == row["id"]] == [1]


def test_cuda_through_the_harness_is_unavailable(sweep):
    rows, _, _, crashes = sweep
    row = next(r for r in rows if r["device"] == "cuda")
    assert row["outcome"] == "unavailable" and "CPU-only build" in row["reason"]
    assert "unavailable" in crashes


def test_report_lists_every_run(sweep):
    rows, _, report, _ = sweep
    assert len(rows) == 11  # seven models on the grid, four included configurations
    # vit_b16 and gpt2_small are built in every framework by test_across_frameworks, not here
    for name in models.ALL_MODELS:
        if name not in ("vit_b16", "gpt2_small"):
            assert name in report

"""The Paddle adapter against the real framework, driven in the Paddle environment's interpreter.

paddle never enters this pytest process: one driver script runs the checks in a subprocess (paying
paddle's import once) and writes plain JSON; each test reads its own part of it. Thread counts that
Paddle reads at import get a subprocess of their own, and one small sweep goes through the harness.
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

from tests import torch_gru
from tests.drivers import checked, drive, framework_python, run_driver
from tests.test_tensorflow_adapter import TORCH_SIDE
from workers import models

# Every model but vit_b16, whose 86 M parameters are built in every framework once, by
# tests/test_across_frameworks.py (bench models): here that would cost minutes per framework.
ADAPTER_MODELS = [m for m in models.MODELS if m != "vit_b16"]

pytestmark = [pytest.mark.slow, pytest.mark.framework]

REPO = Path(__file__).resolve().parent.parent

DRIVER = textwrap.dedent(
    """
    import math
    import numpy as np
    from tests.driver_checks import configurer, run_checks
    from workers import models, runner
    from workers.adapters import base

    config, adapter = configurer("paddle", image_size=16)

    def check_models():
        a, _ = adapter()  # before this process imports paddle: setup() prepares the import
        import paddle
        out = {}
        for name in [m for m in models.MODELS if m != "vit_b16"]:
            arch = models.build_arch(name, 1000, 64)
            count = a.build(arch)
            a.model.eval()
            with paddle.no_grad():
                shape = list(a.model(paddle.zeros([2, 3, 64, 64])).shape)
            norms = [l for l in a.model.sublayers() if isinstance(l, paddle.nn.BatchNorm2D)]
            bn = [[l._momentum, l._epsilon] for l in norms[:1]]
            out[name] = {"paddle": count, "infer": models.infer(arch)["parameters"],
                         "shape": shape, "bn": bn}
        out["small_cnn_32"] = a.build(models.build_arch("small_cnn", 10, 32))
        return out

    def std_and_bound(arch, layers):
        conv, dense = layers[2], layers[13]  # conv 50 -> 50 (3x3); dense 6400 -> 512
        w = conv.weight.numpy()
        v = dense.weight.numpy()
        fans_conv = models.fans(arch["layers"][2], 50)
        fans_dense = models.fans(arch["layers"][13], 6400)
        return {"conv_std": float(w.std()), "conv_mean": float(w.mean()),
                "conv_want": models.init_scale("he_fan_out", *fans_conv),
                "dense_max": float(np.abs(v).max()), "dense_std": float(v.std()),
                "dense_bound": models.init_scale("glorot", *fans_dense),
                "biases_zero": bool((conv.bias.numpy() == 0).all() and (dense.bias.numpy() == 0).all())}

    def check_init():
        a, _ = adapter()
        arch = models.build_arch("small_cnn", 10, 32)
        a.build(arch)
        first = std_and_bound(arch, list(a.model.children()))
        w1 = a.model[2].weight.numpy().copy()
        a.build(arch)  # the same seed gives the same weights
        first["same_seed_same_weights"] = bool((a.model[2].weight.numpy() == w1).all())
        return first

    def check_pool():
        import paddle
        out = {}
        rng = np.random.RandomState(0)
        for h, s in ((1, 6), (2, 7), (13, 6)):
            x = rng.standard_normal((2, 3, h, h)).astype(np.float32)
            got = paddle.nn.AdaptiveAvgPool2D(s)(paddle.to_tensor(x)).numpy()
            want = np.empty((2, 3, s, s), np.float32)  # PyTorch's windows: floor / ceil
            for i in range(s):
                r0, r1 = (i * h) // s, -((-(i + 1) * h) // s)
                for j in range(s):
                    c0, c1 = (j * h) // s, -((-(j + 1) * h) // s)
                    want[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
            out["%d->%d" % (h, s)] = float(np.abs(got - want).max())
        return out

    def state(a):
        return {k: v.numpy().copy() for k, v in a.model.state_dict().items()}

    def same(s1, s2):
        return all((s1[k] == s2[k]).all() for k in s1)

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
        restored = same(initial, state(a))
        return {"info": info, "sizes": [train_size, val_size], "epochs": epochs,
                "training_mode_after_eval": a.model.training,
                "trained_differs": trained_differs, "reset_restores": restored,
                "optimizer_state_after_reset": len(a.optimizer._accumulators),
                "repeat_first_loss": train_epoch(a, 1, train_size)}

    def check_optimizers():
        import paddle
        out = {}
        for name, lr in (("sgd", 0.01), ("adam", 0.001), ("rmsprop", 0.001)):
            a, _ = adapter(optimizer=name, lr=lr, dataset_size=40, image_size=16)
            a.build_model()
            train_size, _ = a.load_data()
            out[name] = [train_epoch(a, 1, train_size), type(a.optimizer).__name__]
        # One RMSProp step on a scalar against PyTorch's rule, lr * g / (sqrt(0.01 g^2) + 1e-8):
        # the adapter's epsilon must give PyTorch's step for large and small gradients alike
        # (Paddle's epsilon sits inside the root: 1e-8 there would make the 1e-5 step 99x smaller).
        steps = []
        for g in (1.0, 1e-5):
            p = paddle.create_parameter([1], "float32",
                                        default_initializer=paddle.nn.initializer.Constant(0.0))
            a._trainable = [p]
            opt = a._make_optimizer()
            (p * g).sum().backward()
            opt.step()
            steps.append([float(p.numpy()[0]), -lr * g / (math.sqrt(0.01 * g * g) + 1e-8)])
        out["rmsprop_step"] = steps
        return out

    def check_cuda():
        error = None
        try:
            adapter(device="cuda")
        except base.Unavailable as exc:
            error = str(exc)
        import paddle
        return {"compiled": paddle.is_compiled_with_cuda(), "error": error}

    def check_oom():
        a, _ = adapter()
        import paddle
        try:
            paddle.empty([2 ** 40], dtype="float32").fill_(1.0)  # 4 TiB on the host
            real = None
        except Exception as exc:
            real = exc
        cases = [MemoryError(), real, RuntimeError("ResourceExhaustedError: Out of memory error"),
                 RuntimeError("shape mismatch"), ValueError("out of memory")]
        return [type(real).__name__] + [a.is_oom(exc) for exc in cases]

    def check_threads(n):
        return adapter(threads=n)[1]["threads"]

    def check_gru():
        a, info = adapter(model="gru", classes=2, batch_size=2)
        count = a.build_model()
        embedding, gru = a.model[0], a.model[1].gru
        weights = {name: p.numpy() for name, p in gru.named_parameters()}
        table = embedding.weight.numpy()
        return {"paddle": count, "infer": models.infer(models.build_arch("gru", 2, 1))["parameters"],
                "shape": list(a.forward_shape(2)), "settings": info["settings"],
                "gru_shapes": {name: list(w.shape) for name, w in weights.items()},
                "gru_max": max(float(np.abs(w).max()) for w in weights.values()),
                "gru_std": [float(w.std()) for w in weights.values()],
                "embedding_std": float(table.std()), "embedding_mean": float(table.mean())}

    def gru_variables(a, f):
        a.model[0].weight.set_value(f["embedding"])
        gru = a.model[1].gru
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(gru, name + "_l0").set_value(f[name])
        if len(a.model) > 2:
            a.model[2].weight.set_value(f["dense_weight"].T)  # Paddle's Linear weight is (in, out)
            a.model[2].bias.set_value(f["dense_bias"])

    def check_gru_cross(path):
        import paddle
        a, _ = adapter(model="gru", classes=2, batch_size=2)
        f = np.load(path)
        out = {}
        for features in (False, True):  # the logits, and the last state (features: true)
            a.build(models.build_arch("gru", 2, 1, features=features))
            gru_variables(a, f)
            a.model.eval()
            with paddle.no_grad():
                got = a.forward(paddle.to_tensor(f["x"])).numpy()
            want = f["state" if features else "out"]
            out["state" if features else "logits"] = [float(np.abs(got - want).max()),
                                                       float(np.abs(want).max())]
        return out

    def check_cross(folder, cases):
        import paddle
        a, _ = adapter(batch_size=2, classes=10)
        out = {}
        for name, size in cases:
            a.build(models.build_arch(name, 10, size))
            f = np.load("{}/{}.npz".format(folder, name))
            params = [f["p{:04d}".format(i)] for i in range(sum(k[0] == "p" for k in f.files))]
            load_torch_weights(paddle, a.model, params)
            a.model.eval()
            with paddle.no_grad():
                got = a.forward(paddle.to_tensor(f["x"])).numpy()
            out[name] = [float(np.abs(got - f["out"]).max()), float(np.abs(f["out"]).max())]
        return out

    def load_torch_weights(paddle, model, params):
        # Both walk the layers depth first in the order they were made (modules(), sublayers()),
        # and both flatten C, H, W: only the dense weights are transposed (Paddle's are (in, out)).
        nn, i = paddle.nn, 0
        for layer in model.sublayers():
            if isinstance(layer, nn.BatchNorm2D):
                names = ["weight", "bias", "_mean", "_variance"]
            elif isinstance(layer, (nn.Conv2D, nn.Linear)):
                names = ["weight"] + (["bias"] if layer.bias is not None else [])
            else:
                continue
            for name in names:
                value = params[i].T if name == "weight" and isinstance(layer, nn.Linear) else params[i]
                getattr(layer, name).set_value(value)
                i += 1
        assert i == len(params), (i, len(params))

    def check_gru_train():
        # PyTorch reaches ~0.9 validation accuracy in three epochs of this (Adam, batch 64).
        a, _ = adapter(model="gru", classes=2, dataset_size=1280, batch_size=64, optimizer="adam",
                       lr=0.001, epochs=3)
        a.build_model()
        train_size, _ = a.load_data()
        a.reset()
        epochs = [[train_epoch(a, epoch, train_size)] + list(a.evaluate()) for epoch in (1, 2, 3)]
        a.reset()
        return {"epochs": epochs, "repeat_first_loss": train_epoch(a, 1, train_size)}

    run_checks(globals())
    """
)

CHECKS = [["models", []], ["init", []], ["pool", []], ["train", []], ["optimizers", []]]
CHECKS += [["cuda", []], ["oom", []], ["gru", []], ["gru_train", []]]
# The PyTorch reference of GoogLeNet: convolutions, batch norm, padded pooling, concatenation.
CROSS = [["googlenet", 32]]

# One harness sweep: a real run, an explicit thread count recorded, and a device it cannot use.
MATRIX = """
settings: {min_time: 0, min_steps: 1,
           dataset_size: 20, batch_size: 4, epochs: 1, warmup_steps: 1, image_size: 32, classes: 3}
axes: {framework: [paddle], model: [small_cnn]}
include:
  - {framework: paddle, model: small_cnn, threads: 2}
  - {framework: paddle, model: small_cnn, device: cuda}
  - {framework: paddle, model: gru, classes: 2}
  - {framework: paddle, model: gru, classes: 2, task: inference, features: true}
"""


@pytest.fixture(scope="module")
def paddle_python() -> Path:
    return framework_python("paddle")


@pytest.fixture(scope="module")
def driven(paddle_python, pytorch_python, tmp_path_factory):
    folder = tmp_path_factory.mktemp("paddle")
    (folder / "torch_side.py").write_text(TORCH_SIDE)
    run_driver(pytorch_python, folder / "torch_side.py", str(folder), json.dumps(CROSS))
    gru = torch_gru.dump(pytorch_python, folder)
    checks = CHECKS + [["cross", [str(folder), CROSS]], ["gru_cross", [str(gru)]]]
    checks += [["threads", [1]]]  # threads last: it changes the pools
    results, stderr = drive(paddle_python, folder, DRIVER, checks)
    result = checked(results)
    result.stderr = stderr  # type: ignore[attr-defined]
    return result


@pytest.fixture(scope="module")
def sweep(paddle_python, tmp_path_factory):
    from orchestrator.cli.main import cli

    path = tmp_path_factory.mktemp("paddle-sweep")
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
    rows = [
        dict(r)
        for r in conn.execute(
            "SELECT r.*, e.framework_version, e.threads_applied, e.thread_env "
            "FROM runs r JOIN environments e ON e.run_id = r.id ORDER BY r.id"
        )
    ]
    conn.close()
    return rows


def test_module_imports_without_paddle(paddle_python):
    """In the framework's own interpreter, where importing the framework would succeed and be seen:
    only the adapter's setup() imports it."""
    code = (
        "import sys, workers.adapters.paddle as p; assert 'paddle' not in sys.modules; print(p.Adapter.name)"
    )
    proc = subprocess.run(
        [str(paddle_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "paddle", proc.stderr


@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_paddle_parameter_count_equals_infer(driven, name):
    got = driven("models")[name]
    assert got["paddle"] == got["infer"]
    assert got["shape"] == [2, 1000]


def test_small_cnn_reference_count(driven):
    assert driven("models")["small_cnn_32"] == 3_441_592


def test_batchnorm_uses_the_architecture_convention(driven):
    # Paddle's momentum weighs the running statistic: 1 - the architecture's 0.1.
    for name in ("mobilenet_v2", "resnet50"):
        (momentum, epsilon) = driven("models")[name]["bn"][0]
        assert momentum == pytest.approx(1 - models.BN_MOMENTUM) and epsilon == pytest.approx(models.BN_EPS)


def test_init_follows_the_scheme_not_paddles_defaults(driven):
    got = driven("init")
    assert got["conv_std"] == pytest.approx(got["conv_want"], rel=0.05) and abs(got["conv_mean"]) < 0.01
    assert got["dense_bound"] * 0.99 < got["dense_max"] <= got["dense_bound"]
    assert got["dense_std"] == pytest.approx(got["dense_bound"] / math.sqrt(3), rel=0.05)
    assert got["biases_zero"] and got["same_seed_same_weights"]


def test_adaptive_avgpool_matches_pytorch_windows(driven):
    assert sorted(driven("pool")) == ["1->6", "13->6", "2->7"], driven("pool")
    assert all(error < 1e-6 for error in driven("pool").values()), driven("pool")


def test_small_cnn_learns_the_synthetic_data(driven):
    got = driven("train")
    assert got["sizes"] == [320, 80]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.6, got["epochs"]
    assert accuracies[-1] >= 0.6, got["epochs"]  # chance is 0.25
    assert got["training_mode_after_eval"]


def test_reset_restores_the_initial_weights(driven):
    got = driven("train")
    assert got["trained_differs"] and got["reset_restores"]
    assert got["optimizer_state_after_reset"] == 0
    # weights, optimizer state and random stream all restored: the repeat retraces epoch 1
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


def test_every_optimizer_trains_with_pytorch_hyper_parameters(driven):
    got = driven("optimizers")
    assert [got[k][1] for k in ("sgd", "adam", "rmsprop")] == ["Momentum", "Adam", "RMSProp"]
    assert all(math.isfinite(got[k][0]) for k in ("sgd", "adam", "rmsprop"))
    for paddle_step, torch_step in got["rmsprop_step"]:
        assert paddle_step == pytest.approx(torch_step, rel=0.02)


def test_setup_reports_versions_and_default_threads(driven):
    info = driven("train")["info"]
    assert info["framework_version"] == "3.3.1" and info["cuda_version"] is None
    assert info["python_version"] and info["device_name"]
    threads = info["threads"]
    assert threads["requested"] == 0 and "set_num_threads" not in threads
    # Paddle's own default: one thread, whatever the machine has.
    assert threads["intra_op"] == 1 and threads["paddle_num_threads_flag"] == 1


def test_import_noise_is_quiet_but_not_hidden(driven):
    assert "ccache" not in driven.stderr and "always track global mean" not in driven.stderr


def test_cuda_unavailable_says_why(driven):
    got = driven("cuda")
    if got["compiled"]:
        pytest.skip("this environment has a CUDA build of paddle")
    assert got["error"] and "CPU-only build" in got["error"] and "paddlepaddle-gpu" in got["error"]


def test_is_oom(driven):
    assert driven("oom") == ["MemoryError", True, True, True, False, False]


def test_threads_are_applied_and_reported(driven):
    threads = driven("threads")
    assert threads["requested"] == 1 and threads["set_num_threads"] == 1 and threads["intra_op"] == 1


def test_harness_run_records_outcomes_and_threads(sweep):
    ok, two, cuda = sweep[:3]
    assert ok["outcome"] == "ok", ok["reason"] or ok["stderr_tail"]
    assert ok["parameter_count"] == models.infer(models.build_arch("small_cnn", 3, 32))["parameters"]
    assert ok["framework_version"] == "3.3.1" and ok["images_per_second"] > 0
    # threads: 2 differs from Paddle's default of 1, so this shows the setting reached Paddle.
    assert two["outcome"] == "ok", two["reason"] or two["stderr_tail"]
    applied = json.loads(two["threads_applied"])
    assert json.loads(two["thread_env"])["OMP_NUM_THREADS"] == "2"
    assert applied["intra_op"] == 2 and applied["paddle_num_threads_flag"] == 2
    assert cuda["outcome"] == "unavailable" and "CPU-only build" in cuda["reason"]


def test_gru_parameter_count_equals_infer(driven):
    got = driven("gru")
    assert got["paddle"] == got["infer"] == 3_818_302
    assert got["shape"] == [2, 2]
    assert got["settings"]["training_path"] == "eager"


def test_gru_has_pytorchs_layout_and_init(driven):
    got = driven("gru")
    assert got["gru_shapes"] == {
        "weight_ih_l0": [300, 125],
        "weight_hh_l0": [300, 100],
        "bias_ih_l0": [300],
        "bias_hh_l0": [300],
    }
    bound = 1 / math.sqrt(models.GRU_UNITS)  # every weight and bias uniform on +-1/sqrt(hidden)
    assert bound * 0.99 < got["gru_max"] <= bound
    assert all(std == pytest.approx(bound / math.sqrt(3), rel=0.1) for std in got["gru_std"])
    assert got["embedding_std"] == pytest.approx(1.0, rel=0.01) and abs(got["embedding_mean"]) < 0.01


@pytest.mark.parametrize("output", ["logits", "state"])
def test_gru_computes_what_the_pytorch_gru_computes(driven, output):
    torch_gru.assert_same_as_pytorch(driven("gru_cross")[output])


@pytest.mark.parametrize("name", [case[0] for case in CROSS])
def test_paddle_model_computes_what_the_pytorch_model_computes(driven, name):
    difference, scale = driven("cross")[name]
    assert difference <= 1e-5 * max(1.0, scale)


def test_gru_learns_the_synthetic_tokens(driven):
    got = driven("gru_train")
    torch_gru.assert_learns(got["epochs"])
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


def test_harness_runs_the_gru_and_its_features(sweep):
    torch_gru.assert_harness_ran(*sweep[3:])

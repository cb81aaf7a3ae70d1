"""TensorFlow's modes and precisions against the real framework (workers/adapters/tensorflow/modes.py).

One driver process in the TensorFlow environment runs every mode x precision on small_cnn at a tiny
size and writes JSON; the tests read it. Keras's dtype policy is global: the driver checks that
each build leaves it as it found it, which is what lets one process run every combination.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from tests.drivers import checked, drive, framework_python
from workers import execution
from workers.adapters.tensorflow import modes as tf_modes

pytestmark = [pytest.mark.slow, pytest.mark.framework]

MODES = ("eager", "graph", "compiled")
PRECISIONS = ("fp32", "bf16", "fp16")
# What each combination does on this CPU: "ok" (trains and learns) or the words its Unsupported
# message must contain. TensorFlow's CPU build runs all nine (bf16 and fp16 on kernels without
# native 16-bit support here, so slowly: docs/frameworks/tensorflow.md).
SUPPORT = {(mode, precision): "ok" for mode in MODES for precision in PRECISIONS}
COMPUTE_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
POLICY = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
# The first and second training steps' losses in graph and compiled mode against eager, fp32, the
# same initial weights and batches, no dropout: within this absolute tolerance (measured: graph
# equal to the last digit, XLA within 1e-6; docs/frameworks/tensorflow.md).
LOSS_TOLERANCE = 1e-4
# The learning check. 8 px: bf16's convolution gradients ran 4 to 20 times slower than fp32's on
# this CPU (no AVX-512), about 1.2 s a step at 16 px, which would take this file far past its
# budget; 8 px (two max-pools down to 2x2) still learns the synthetic classes.
# Inference in every mode, and in bf16 once (its logits float32, its convolutions bfloat16).
INFER = [("eager", "fp32"), ("graph", "fp32"), ("compiled", "fp32"), ("graph", "bf16")]
LEARN = {"image_size": 8, "dataset_size": 160, "epochs": 3}

DRIVER = textwrap.dedent(
    """
    from tests.driver_checks import cases, configurer, run_checks
    from workers import models, runner
    from workers.adapters import base

    config, adapter = configurer("tensorflow", threads=2, classes=4)

    def no_dropout(size):
        arch = models.build_arch("small_cnn", 4, size)
        arch["layers"] = [node for node in arch["layers"] if node["op"] != "dropout"]
        return arch

    def made(**over):
        try:
            a, info = adapter(**over)
            a.build(no_dropout(a.config["image_size"]))
        except base.Unsupported as exc:
            return None, None, str(exc)
        return a, info, None

    def check_train(mode, precision, learn):
        import keras
        before = keras.config.dtype_policy().name
        a, info, why = made(mode=mode, precision=precision, **learn)
        if a is None:
            return {"unsupported": why}
        train_size, _ = a.load_data()
        a.reset()
        losses, accuracy = [], None
        for epoch in range(1, a.config["epochs"] + 1):
            steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
            for i in range(steps):
                a.train_step(i)
            a.synchronize()
            losses.append(a.epoch_loss())
            accuracy = a.evaluate()[1]
        return {"losses": losses, "accuracy": accuracy, "execution": a.execution_info(),
                "settings": info["settings"], "policy_before": before,
                "policy_after": keras.config.dtype_policy().name}

    def check_first_steps(mode):
        a, _, why = made(mode=mode, image_size=16)
        if a is None:
            return {"unsupported": why}
        train_size, _ = a.load_data()
        a.reset()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        out = []
        for i in (0, 1):
            a.train_step(i)
            out.append(a.epoch_loss())
        return out

    def check_infer(mode, precision):
        a, _, why = made(mode=mode, precision=precision, task="inference", image_size=16)
        if a is None:
            return {"unsupported": why}
        train_size, _ = a.load_data()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        a.infer_step(0)
        a.synchronize()
        return {"shape": list(a._output.shape), "dtype": a._output.dtype.name,
                "finite": bool(a.tf.reduce_all(a.tf.math.is_finite(a._output)).numpy()),
                "execution": a.execution_info()}

    def check_default():
        a, info = adapter(image_size=16)
        a.build_model()
        return {"execution": a.execution_info(), "settings": info["settings"]}

    run_checks(cases(globals()))
    """
)


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    checks: list[list[object]] = [["default", []]]
    checks += [[f"first_steps-{m}", [m]] for m in MODES]
    checks += [[f"infer-{m}-{p}", [m, p]] for m, p in INFER]
    checks += [[f"train-{m}-{p}", [m, p, LEARN]] for m in MODES for p in PRECISIONS]
    folder = Path(tmp_path_factory.mktemp("tf-modes"))
    return checked(drive(framework_python("tensorflow"), folder, DRIVER, checks, timeout=600)[0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_mode_and_precision_learns_or_says_why_not(driven, mode, precision):
    got, expected = driven(f"train-{mode}-{precision}"), SUPPORT[(mode, precision)]
    if expected != "ok":
        assert expected in got.get("unsupported", ""), got
        return
    assert "unsupported" not in got, got
    losses = got["losses"]
    assert all(math.isfinite(loss) for loss in losses), losses  # no NaN, no infinity
    assert losses[-1] < losses[0], losses
    assert got["accuracy"] > 0.25 + 0.15, got  # 4 classes: chance is 0.25
    # Keras's policy is global: set for the build only, restored after.
    assert got["policy_before"] == got["policy_after"] == "float32"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_execution_says_mode_how_and_precision(driven, mode, precision):
    got = driven(f"train-{mode}-{precision}")
    if "unsupported" in got:
        pytest.skip("unsupported: checked above")
    execution = got["execution"]
    assert execution["mode"] == mode and execution["mode_default"] is False
    assert execution["precision"] == precision
    assert (
        execution["how"]
        == {
            "eager": "the step's Python function called eagerly (no tf.function)",
            "graph": "tf.function(jit_compile=False)",
            "compiled": "tf.function(jit_compile=True) (XLA)",
        }[mode]
    )
    # What the convolutions and matrix products really ran in: the traced graph's ops where there
    # is a graph, the layers' compute dtype in eager.
    dtype = COMPUTE_DTYPE[precision]
    assert execution["compute_dtypes"] == {"conv": dtype, "matmul": dtype}
    assert ("traced graph" in execution["compute_dtypes_from"]) == (mode != "eager")
    assert execution["keras_dtype_policy"] == POLICY[precision]
    scaler = execution["loss_scaling"] or ""
    assert scaler.startswith("keras.optimizers.LossScaleOptimizer") == (precision == "fp16")
    assert "tf32_enabled" not in execution  # a cuda setting: not recorded on CPU
    settings = got["settings"]
    assert settings["xla_jit"] is (mode == "compiled")


@pytest.mark.parametrize("mode", ["graph", "compiled"])
def test_first_steps_match_eager_in_fp32(driven, mode):
    eager, other = driven("first_steps-eager"), driven(f"first_steps-{mode}")
    assert len(eager) == len(other) == 2
    for a, b in zip(eager, other, strict=True):
        assert abs(a - b) <= LOSS_TOLERANCE, (eager, other)
    assert eager[0] != eager[1]  # the second step saw updated weights: not one number twice


@pytest.mark.parametrize(("mode", "precision"), INFER)
def test_inference_runs_in_each_mode(driven, mode, precision):
    got = driven(f"infer-{mode}-{precision}")
    assert got["shape"] == [16, 4] and got["finite"]
    assert got["dtype"] == "float32"  # the logits, cast by the float32 last layer in bf16
    assert got["execution"]["mode"] == mode
    assert got["execution"]["compute_dtypes"]["conv"] == COMPUTE_DTYPE[precision]


def test_mode_left_unset_is_todays_graph(driven):
    got = driven("default")
    execution = got["execution"]
    assert execution["mode"] == "graph" and execution["mode_default"] is True
    assert execution["precision"] == "fp32" and execution["how"] == "tf.function(jit_compile=False)"
    assert got["settings"]["execution"] == "tf.function graph" and got["settings"]["xla_jit"] is False


def test_unset_mode_is_kerass_auto_jit_by_device():
    """Unset on a GPU the step was XLA-compiled before modes were an axis (Keras's jit_compile
    "auto"), except the GRU's: the run records that as mode compiled, not as graph."""
    tf = {"framework": "tensorflow"}
    assert tf_modes.default_mode({**tf, "device": "cpu", "model": "resnet50"}) == "graph"
    assert tf_modes.default_mode({**tf, "device": "cuda", "model": "resnet50"}) == "compiled"
    assert tf_modes.default_mode({**tf, "device": "cuda", "model": "gru"}) == "graph"
    # The orchestrator resolves it by the same rule (workers/execution.py), for a run's record.
    assert execution.mode_of({**tf, "device": "cuda", "model": "vgg16"}) == "compiled"
    assert execution.mode_of({"framework": "pytorch", "device": "cuda", "model": "vgg16"}) == "eager"

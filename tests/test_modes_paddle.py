"""Paddle's execution modes and precisions against the real framework (workers/adapters/paddle/modes.py).

One driver process in the Paddle environment runs every mode x precision on small_cnn at a tiny size
and writes JSON; the tests read it. Nothing the adapter sets is global beyond the run (auto_cast is a
context around each forward), so one process runs every combination.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from tests.drivers import checked, drive, framework_python

pytestmark = [pytest.mark.slow, pytest.mark.framework]

MODES = ("eager", "graph", "compiled")
PRECISIONS = ("fp32", "bf16", "fp16")
NO_CINN = "built without CINN"
NO_AMP_ON_CPU = "amp_guard can only be enabled on CUDAPlace, XPUPlace, and CustomPlace"
# What each combination does with paddlepaddle 3.3.1's CPU wheel: "ok" (trains and learns) or words
# its Unsupported message must contain. The mode is checked first: compiled is refused whatever the
# precision. auto_cast switches itself off on a CPU place (with a warning), so bf16 and fp16 would
# silently run fp32: refused, quoting Paddle.
SUPPORT = {
    ("eager", "fp32"): "ok",
    ("graph", "fp32"): "ok",
    ("eager", "bf16"): NO_AMP_ON_CPU,
    ("graph", "bf16"): NO_AMP_ON_CPU,
    ("eager", "fp16"): NO_AMP_ON_CPU,
    ("graph", "fp16"): NO_AMP_ON_CPU,
    ("compiled", "fp32"): NO_CINN,
    ("compiled", "bf16"): NO_CINN,
    ("compiled", "fp16"): NO_CINN,
}
# The first and second training steps' losses in graph mode against eager, fp32, the same initial
# weights and batches, no dropout: within this absolute tolerance (measured: equal to the last digit).
LOSS_TOLERANCE = 1e-4
TRAINING_PATH = {"eager": "eager", "graph": "paddle.jit.to_static(full_graph=True)"}
LEARN = {"image_size": 16, "dataset_size": 160, "epochs": 3}

DRIVER = textwrap.dedent(
    """
    from tests.driver_checks import cases, configurer, run_checks
    from workers import models, runner
    from workers.adapters import base

    config, adapter = configurer("paddle", threads=2, classes=4)

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
                "settings": info["settings"]}

    def check_first_steps(mode):
        a, _, why = made(mode=mode)
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

    def check_infer(mode):
        a, _, why = made(mode=mode, task="inference")
        if a is None:
            return {"unsupported": why}
        train_size, _ = a.load_data()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        a.infer_step(0)
        a.synchronize()
        out = a._output.numpy()
        return {"shape": list(out.shape), "dtype": str(out.dtype), "finite": bool((out == out).all()),
                "execution": a.execution_info()}

    def check_default():
        a, info = adapter()
        a.build_model()
        return {"execution": a.execution_info(), "settings": info["settings"]}

    run_checks(cases(globals()))
    """
)


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    checks: list[list[object]] = [["default", []]]
    checks += [[f"first_steps-{m}", [m]] for m in ("eager", "graph")]
    checks += [[f"infer-{m}", [m]] for m in MODES]
    checks += [[f"train-{m}-{p}", [m, p, LEARN]] for m in MODES for p in PRECISIONS]
    folder = Path(tmp_path_factory.mktemp("paddle-modes"))
    return checked(drive(framework_python("paddle"), folder, DRIVER, checks, timeout=400)[0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_mode_and_precision_learns_or_says_why_not(driven, mode, precision):
    got, expected = driven(f"train-{mode}-{precision}"), SUPPORT[(mode, precision)]
    if expected != "ok":
        assert expected in got.get("unsupported", ""), got
        refused = "mode 'compiled' is not available" if mode == "compiled" else f"precision '{precision}'"
        assert got["unsupported"].startswith(refused)
        return
    assert "unsupported" not in got, got
    losses = got["losses"]
    assert all(math.isfinite(loss) for loss in losses), losses  # no NaN, no infinity
    assert losses[-1] < losses[0], losses
    assert got["accuracy"] > 0.25 + 0.15, got  # 4 classes: chance is 0.25


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_execution_says_mode_how_and_precision(driven, mode):
    got = driven(f"train-{mode}-fp32")
    execution = got["execution"]
    assert execution["mode"] == mode and execution["mode_default"] is False
    assert execution["precision"] == "fp32" and execution["loss_scaling"] is None
    assert (
        execution["how"]
        == {
            "eager": "paddle dygraph (eager)",
            "graph": "paddle.jit.to_static(model, full_graph=True)",
        }[mode]
    )
    # The output dtype of the first convolution and linear layer in one untimed forward.
    assert execution["compute_dtypes"] == {"conv": "float32", "matmul": "float32"}
    assert got["settings"]["training_path"] == TRAINING_PATH[mode]
    assert got["settings"]["cinn_built"] is False


def test_first_steps_match_eager_in_fp32(driven):
    eager, graph = driven("first_steps-eager"), driven("first_steps-graph")
    assert len(eager) == len(graph) == 2
    for a, b in zip(eager, graph, strict=True):
        assert abs(a - b) <= LOSS_TOLERANCE, (eager, graph)
    assert eager[0] != eager[1]  # the second step saw updated weights: not one number twice


@pytest.mark.parametrize("mode", MODES)
def test_inference_runs_in_each_supported_mode(driven, mode):
    got = driven(f"infer-{mode}")
    if SUPPORT[(mode, "fp32")] != "ok":
        assert SUPPORT[(mode, "fp32")] in got["unsupported"]
        return
    assert got["shape"] == [16, 4] and got["finite"] and got["dtype"] == "float32"
    assert got["execution"]["mode"] == mode


def test_mode_left_unset_is_todays_eager(driven):
    got = driven("default")
    execution = got["execution"]
    assert execution["mode"] == "eager" and execution["mode_default"] is True
    assert execution["precision"] == "fp32" and execution["how"] == "paddle dygraph (eager)"
    assert got["settings"]["training_path"] == "eager"

"""JAX in each execution mode and precision, against the real framework (CPU).

One driver process (tests/mode_driver.py) runs every combination on small_cnn at a tiny size.
Eager (no jit) dispatches every primitive of the forward pass, the backward pass and the Optax
update on its own, and XLA compiles each distinct primitive the first time it meets it, so the
eager runs take most of this file's time (docs/frameworks/jax.md, "Modes and precision").
"""

from __future__ import annotations

import textwrap

import pytest

from tests.drivers import checked, drive

pytestmark = [pytest.mark.slow, pytest.mark.framework]

GRAPH = "mode 'graph' is not available in JAX: JAX runs a traced program (a jaxpr) only by compiling it"

# What each combination does on the CPU, pinned: "ok" (trains, learns, infers) or a fragment
# of its Unsupported message. A change in support fails the test.
TABLE = {
    ("eager", "fp32"): "ok",
    ("graph", "fp32"): GRAPH,
    ("compiled", "fp32"): "ok",
    ("eager", "bf16"): "ok",
    ("graph", "bf16"): GRAPH,
    ("compiled", "bf16"): "ok",
    ("eager", "fp16"): "ok",
    ("graph", "fp16"): GRAPH,
    ("compiled", "fp16"): "ok",
}
HOW = {"eager": "no jax.jit: the step's functions called inside jax.disable_jit()", "compiled": "jax.jit"}
# fp32, no dropout: the first two training steps' losses of the jitted step against eager. XLA
# fuses and reorders the sums (also the convolutions' and the reductions'), eager runs each
# primitive alone: the first step agrees to rel 1e-5, the second to rel 1e-4.
FIRST_STEP_REL = 1e-5
SECOND_STEP_REL = 1e-4

# fp32 without dropout, three epochs; bf16 and fp16 (several times slower here: no bf16 or fp16
# instructions on this CPU) with dropout, two epochs.
CHECKS = [
    [f"combo_{mode}_{precision}", [mode, precision, precision != "fp32", 3 if precision == "fp32" else 2]]
    for mode, precision in TABLE
]
CHECKS += [["default", []], ["overflow", []]]

DRIVER = textwrap.dedent(
    """
    from tests import mode_driver
    from tests.driver_checks import run_checks

    checks = mode_driver.checks("jax")
    for key, args in {KEYS}:
        kind = "check_" + key.split("_")[0]
        if kind in checks:  # the shared checks; this driver's own are defined below
            globals()["check_" + key] = checks[kind]

    def check_overflow():
        # fp16 with a loss scale so large that the float16 backward pass overflows: the step
        # must be skipped (weights and optimizer state kept), the scale halved, the skip counted.
        import jax
        import numpy as np
        from workers import runner
        from tests.driver_checks import configurer

        _, adapter = configurer("jax", **mode_driver.SIZES)
        a, _ = adapter(mode="compiled", precision="fp16")
        a.build_model()
        train_size, _ = a.load_data()
        a.reset()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        a._state["scale"] = jax.numpy.asarray(2.0 ** 100, jax.numpy.float32)
        before = jax.device_get(a._state["params"])
        a.train_step(0)
        a.synchronize()
        after = jax.device_get(a._state["params"])
        kept = all(np.array_equal(x, y) for x, y in zip(jax.tree_util.tree_leaves(before),
                                                         jax.tree_util.tree_leaves(after)))
        out = {"kept": kept, "scale": float(a._state["scale"]), "skipped": int(a._state["skipped"])}
        a.train_step(1)  # at 2**99 still overflowing: skipped again
        a.synchronize()
        out["scale_after_two"] = float(a._state["scale"])
        out["skipped_after_two"] = int(a._state["skipped"])
        return out

    run_checks(globals())
    """
).replace("{KEYS}", repr([[name, args] for name, args in CHECKS]))


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    from tests.drivers import framework_python

    folder = tmp_path_factory.mktemp("modes-jax")
    results, _ = drive(framework_python("jax"), folder, DRIVER, CHECKS, timeout=1200)
    return checked(results)


@pytest.mark.parametrize(("mode", "precision"), list(TABLE))
def test_each_mode_and_precision_learns_or_is_unsupported(driven, mode, precision):
    got = driven(f"combo_{mode}_{precision}")
    expected = TABLE[(mode, precision)]
    if expected != "ok":
        assert expected in got.get("unsupported", ""), got
        return
    assert "unsupported" not in got, got["unsupported"]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.8, got["epochs"]
    assert accuracies[-1] >= 0.5, got["epochs"]  # chance is 0.25


def test_the_compile_ahead_of_time_is_counted_and_eager_compiles_nothing(driven):
    # The jitted step and forward are compiled in prepare_epoch(), before any step: the runner
    # adds these seconds to compile_seconds (the first GPU check saw 0.1 s reported without them).
    assert driven("combo_compiled_fp32")["ahead_of_time_seconds"] > 0.05
    assert driven("combo_eager_fp32")["ahead_of_time_seconds"] == 0.0


def test_first_steps_of_the_compiled_step_match_eager_in_fp32(driven):
    eager, compiled = driven("combo_eager_fp32"), driven("combo_compiled_fp32")
    assert len(eager["first_losses"]) == 2
    assert compiled["first_losses"][0] == pytest.approx(eager["first_losses"][0], rel=FIRST_STEP_REL)
    assert compiled["first_losses"][1] == pytest.approx(eager["first_losses"][1], rel=SECOND_STEP_REL)
    assert compiled["first_losses"][1] != compiled["first_losses"][0]  # the step changed the weights


@pytest.mark.parametrize(("mode", "precision"), [k for k, v in TABLE.items() if v == "ok"])
def test_inference_runs_in_each_supported_mode(driven, mode, precision):
    got = driven(f"combo_{mode}_{precision}")
    assert got["infer_steps"] == 12 and got["infer_shape"] == [16, 4]


@pytest.mark.parametrize(("mode", "precision"), [k for k, v in TABLE.items() if v == "ok"])
def test_the_result_says_mode_how_and_precision(driven, mode, precision):
    got = driven(f"combo_{mode}_{precision}")
    execution = got["execution"]
    assert execution["mode"] == mode and execution["precision"] == precision
    assert not execution["mode_default"]
    assert execution["how"].startswith(HOW[mode]) and got["settings_execution"] == execution["how"]
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[precision]
    # from the jaxpr of the loss and its gradient: every convolution and product in that dtype
    assert execution["compute_dtypes"]["conv"] == dtype and execution["compute_dtypes"]["matmul"] == dtype
    if precision == "fp32":
        assert execution["loss_scaling"] is None and execution["precision_how"] == "float32 throughout"
    else:
        assert f"cast to {dtype}" in execution["precision_how"]
        assert ("dynamic" in (execution["loss_scaling"] or "")) == (precision == "fp16")
    if precision == "fp16":  # the scale is still its start: no step of this tiny run overflowed
        assert execution["loss_scale"] == 2.0**15 and execution["skipped_steps"] == 0


def test_no_mode_is_todays_jit(driven):
    got = driven("default")
    assert got["execution"]["mode"] == "compiled" and got["execution"]["mode_default"]
    assert got["execution"]["precision"] == "fp32"
    assert got["settings_execution"] == got["execution"]["how"]
    assert "jax.jit" in got["execution"]["how"]


def test_fp16_loss_scaling_skips_an_overflowing_step_and_halves_the_scale(driven):
    got = driven("overflow")
    assert got["kept"], "a step with non-finite gradients changed the weights"
    assert got["scale"] == 2.0**99 and got["skipped"] == 1
    assert got["scale_after_two"] == 2.0**98 and got["skipped_after_two"] == 2

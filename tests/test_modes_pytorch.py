"""PyTorch in each execution mode and precision, against the real framework (CPU).

One driver process (tests/mode_driver.py) runs every combination on small_cnn at a tiny size:
inductor compiles small_cnn three times (fp32, bf16, fp16), tens of seconds each on two cores,
so this file takes minutes, not seconds (docs/frameworks/pytorch.md, "Modes and precision").
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.drivers import checked, drive

pytestmark = [pytest.mark.slow, pytest.mark.framework]

# What each combination does on the CPU, pinned: "ok" (trains, learns, infers) or a fragment
# of its Unsupported message. A change in support fails the test.
TABLE = {
    ("eager", "fp32"): "ok",
    ("graph", "fp32"): "ok",
    ("compiled", "fp32"): "ok",
    ("eager", "bf16"): "ok",
    ("graph", "bf16"): "ok",
    ("compiled", "bf16"): "ok",
    ("eager", "fp16"): "ok",
    ("graph", "fp16"): "ok",
    ("compiled", "fp16"): "ok",
}
HOW = {
    "eager": "eager",
    "graph": "torch.compile(backend='aot_eager')",
    "compiled": "torch.compile(backend='inductor', mode='default')",
}
# fp32, no dropout: the first two training steps' losses in graph and compiled mode against eager.
# aot_eager runs the same ATen kernels as eager; inductor generates its own loops (other
# summation orders), so the first step (same weights, same batch) agrees to rel 1e-5 and the second
# (after one SGD step on weights that differ in the last bits) to rel 1e-4.
FIRST_STEP_REL = 1e-5
SECOND_STEP_REL = 1e-4

# fp32 without dropout, three epochs; bf16 and fp16 (several times slower here: no bf16 or fp16
# instructions on this CPU) with dropout, two epochs.
CHECKS = [
    [f"combo_{mode}_{precision}", [mode, precision, precision != "fp32", 3 if precision == "fp32" else 2]]
    for mode, precision in TABLE
]
CHECKS += [[f"refusal_gru_{mode}", ["gru", mode, "fp32"]] for mode in ("graph", "compiled")]
CHECKS += [["default", []]]

DRIVER = textwrap.dedent(
    """
    from tests import mode_driver
    from tests.driver_checks import run_checks

    checks = mode_driver.checks("pytorch")
    for key, args in {KEYS}:
        kind = "check_" + key.split("_")[0]
        if kind in checks:  # the shared checks; this driver's own are defined below
            globals()["check_" + key] = checks[kind]
    run_checks(globals())
    """
).replace("{KEYS}", repr([[name, args] for name, args in CHECKS]))


@pytest.fixture(scope="module")
def driver_tmp(tmp_path_factory):
    """The driver's temporary folder (TMPDIR), where each compiled run's own cache goes."""
    return tmp_path_factory.mktemp("modes-pytorch-tmp")


@pytest.fixture(scope="module")
def driven(pytorch_python, tmp_path_factory, driver_tmp):
    folder = tmp_path_factory.mktemp("modes-pytorch")
    env = {**os.environ, "TMPDIR": str(driver_tmp)}
    env.pop("BENCH_COMPILE_CACHE", None)
    results, _ = drive(pytorch_python, folder, DRIVER, CHECKS, env=env, timeout=1200)
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


@pytest.mark.parametrize("mode", ["graph", "compiled"])
def test_first_steps_match_eager_in_fp32(driven, mode):
    eager, other = driven("combo_eager_fp32"), driven(f"combo_{mode}_fp32")
    assert len(eager["first_losses"]) == 2
    assert other["first_losses"][0] == pytest.approx(eager["first_losses"][0], rel=FIRST_STEP_REL)
    assert other["first_losses"][1] == pytest.approx(eager["first_losses"][1], rel=SECOND_STEP_REL)
    assert other["first_losses"][1] != other["first_losses"][0]  # the step changed the weights


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
    assert execution["compute_dtypes"]["conv"] == dtype and execution["compute_dtypes"]["matmul"] == dtype
    if precision == "fp32":
        assert execution["loss_scaling"] is None and execution["precision_how"] == "float32 throughout"
    else:
        assert execution["precision_how"].startswith(f"torch.autocast('cpu', dtype=torch.{dtype})")
        assert ("GradScaler" in (execution["loss_scaling"] or "")) == (precision == "fp16")
    if mode != "eager":  # Dynamo captured the forward pass whole: no graph break
        assert execution["dynamo_graphs"] >= 1 and execution["graph_breaks"] == 0


@pytest.mark.parametrize("mode", ["graph", "compiled"])
def test_the_gru_is_unsupported_in_graph_and_compiled_with_the_reason(driven, mode):
    message = driven(f"refusal_gru_{mode}")
    assert message.startswith(f"mode '{mode}' is not available in PyTorch:")
    assert "nn.GRU" in message and "graph break" in message


def test_no_mode_is_todays_eager(driven):
    got = driven("default")
    assert got["execution"]["mode"] == "eager" and got["execution"]["mode_default"]
    assert got["execution"]["precision"] == "fp32"
    assert got["settings_execution"] == got["execution"]["how"]
    assert got["execution"]["how"].startswith("eager")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_compiled_run_compiles_cold_into_its_own_folder_removed_at_exit(driven, driver_tmp, precision):
    """Inductor's on-disk cache made a rerun's compile figure a warm cache's (docs/fairness.md:
    19.6 s cold, 0.3 s warm): each graph or compiled run gets a fresh folder of its own."""
    got = driven(f"combo_compiled_{precision}")
    said = got["execution"]["compile_cache"]
    assert said.startswith("cold: "), said
    folder = Path(said.split("(", 1)[1].split(")", 1)[0])
    assert folder.parent == driver_tmp and folder.name.startswith("bench-compile-cache-")
    assert got["inductor_cache_files"] > 0  # inductor wrote its code there
    assert not folder.exists()  # and it went as the driver exited
    other = driven(f"combo_compiled_{'bf16' if precision == 'fp32' else 'fp32'}")["execution"][
        "compile_cache"
    ]
    assert other != said  # one folder a run
    assert "compile_cache" not in driven(f"combo_eager_{precision}")["execution"]

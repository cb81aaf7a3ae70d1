"""Singa's execution modes and precisions against the real framework (workers/adapters/singa/modes.py).

One driver process in the Singa environment's Python 3.6 runs every combination (Singa keeps no
process-wide precision state; each build resets the device's graph). Each combination either trains
small_cnn and learns the synthetic data, or is refused as unsupported with a message naming what
singa 3.0.0.dev1 lacks; TRAIN and INFER pin which, so a change in support fails the test.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.drivers import checked, drive, framework_python

pytestmark = [pytest.mark.slow, pytest.mark.framework]

MODES = ("eager", "graph", "compiled")
PRECISIONS = ("fp32", "bf16", "fp16")
OK = "ok"
NO_COMPILER = "has no compiler that generates fused code"
NO_BF16 = "has no bfloat16 type"
NO_FP16 = "has no mixed precision"

# (mode, precision) -> "ok", or a fragment of the Unsupported message (training, on CPU). The mode
# is refused before the precision.
TRAIN = {(mode, precision): OK for mode in ("eager", "graph") for precision in ("fp32",)}
TRAIN.update({(mode, "bf16"): NO_BF16 for mode in ("eager", "graph")})
TRAIN.update({(mode, "fp16"): NO_FP16 for mode in ("eager", "graph")})
TRAIN.update({("compiled", precision): NO_COMPILER for precision in PRECISIONS})
INFER = {"eager": OK, "graph": OK, "compiled": NO_COMPILER}
HOW = {"eager": "use_graph=False", "graph": "Device.RunGraph"}
# The first two training steps of graph mode against eager, float32, small_cnn without dropout:
# the graph replays the very kernels eager runs (measured: equal to the last digit).
FIRST_STEPS_RTOL = 1e-5
# Buffered (graph) inference against eager: the same kernels, so the same outputs to this share.
OUTPUT_RTOL = 1e-5

DRIVER = textwrap.dedent(
    """
    import json
    import sys

    from tests.driver_checks import configurer, run_checks
    from workers import events, models, runner
    from workers.adapters import base

    config, adapter = configurer("singa", epochs=2, dataset_size=320, image_size=16)

    def train_epoch(a, epoch, train_size):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        return a.epoch_loss()

    def check_train(mode, precision):
        try:
            a, info = adapter(mode=mode, precision=precision)
            a.build_model()
        except base.Unsupported as exc:
            return {"unsupported": str(exc)}
        train_size, _ = a.load_data()
        a.reset()
        epochs = [[train_epoch(a, e, train_size)] + list(a.evaluate()) for e in (1, 2)]
        return {"epochs": epochs, "execution": a.execution_info(),
                "training_path": info["settings"]["training_path"]}

    def check_first_steps(mode):
        a, _ = adapter(mode=mode)
        arch = models.build_arch("small_cnn", 4, 16)
        arch["layers"] = [node for node in arch["layers"] if node["op"] != "dropout"]
        a.build(arch)
        train_size, _ = a.load_data()
        a.reset()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        losses = []
        for i in (0, 1):
            a.train_step(i)
            a.synchronize()
            losses.append(a.epoch_loss())
        return losses

    def check_infer(mode):
        from workers.adapters.singa.binding import HostIO
        try:
            a, _ = adapter(mode=mode, task="inference")
            a.build_model()
        except base.Unsupported as exc:
            return {"unsupported": str(exc)}
        train_size, _ = a.load_data()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        outputs = []
        for i in (0, 1, 0):  # the graph replays on each new batch
            a.infer_step(i)
            a.synchronize()
            outputs.append(HostIO.get(a._output).tolist())
        return {"outputs": outputs, "execution": a.execution_info()}

    def check_runner(folder):
        # The whole runner, mode and precision left unset: today's buffered graph in float32.
        from workers.adapters.singa import Adapter
        writer = events.EventWriter(folder + "/events.jsonl")
        a = Adapter(config(epochs=1, timeout=600))
        result = runner.run(a, a.config, writer)
        writer.close()
        return {"status": result["status"], "execution": result["execution"],
                "training_path": result["info"]["settings"]["training_path"]}

    # A check named "train:graph:fp32" is check_train with its arguments: one result each.
    for _name, _ in json.loads(sys.argv[2]):
        globals()["check_" + _name] = globals()["check_" + _name.split(":")[0]]
    run_checks(globals())
    """
)


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("singa-modes")
    checks: list[list[Any]] = [[f"train:{m}:{p}", [m, p]] for (m, p) in sorted(TRAIN)]
    checks += [["first_steps:" + m, [m]] for m in ("eager", "graph")]
    checks += [["infer:" + m, [m]] for m in MODES]
    checks += [["runner", [str(folder)]]]
    return checked(drive(framework_python("singa"), folder, DRIVER, checks)[0])


@pytest.mark.parametrize(("mode", "precision"), sorted(TRAIN))
def test_each_mode_and_precision_trains_or_says_what_is_missing(driven, mode, precision):
    got, want = driven(f"train:{mode}:{precision}"), TRAIN[(mode, precision)]
    if want != OK:
        assert "unsupported" in got, f"{mode} {precision} ran; the table says: {want}"
        assert want in got["unsupported"], got["unsupported"]
        return
    assert "epochs" in got, got
    losses = [e[0] for e in got["epochs"]]
    assert losses[-1] < losses[0], losses
    assert got["epochs"][-1][2] > 0.5, got["epochs"]  # 4 classes: chance is 0.25
    execution = got["execution"]
    assert execution["mode"] == mode and execution["precision"] == precision
    assert HOW[mode] in execution["how"] and got["training_path"] == execution["how"]
    assert execution["compute_dtypes"] == {"conv": "float32", "matmul": "float32"}


def test_graph_mode_first_steps_match_eager(driven):
    eager, graph = driven("first_steps:eager"), driven("first_steps:graph")
    assert graph == pytest.approx(eager, rel=FIRST_STEPS_RTOL)
    assert eager[1] != eager[0]  # the second step saw the first update


@pytest.mark.parametrize("mode", MODES)
def test_inference_runs_in_each_mode_or_says_what_is_missing(driven, mode):
    got = driven(f"infer:{mode}")
    if INFER[mode] != OK:
        assert INFER[mode] in got["unsupported"], got
        return
    assert got["execution"]["mode"] == mode and HOW[mode] in got["execution"]["how"]
    first, second, again = got["outputs"]
    assert first != second and first == again  # each step computes on its own batch
    eager = driven("infer:eager")["outputs"][0]
    largest = max(abs(v) for row in eager for v in row)
    rows = zip(eager, first, strict=True)
    worst = max(abs(a - b) for r1, r2 in rows for a, b in zip(r1, r2, strict=True))
    assert worst <= OUTPUT_RTOL * largest, (worst, largest)


def test_the_runner_records_the_default_mode(driven):
    got = driven("runner")
    assert got["status"] == "ok"
    execution = got["execution"]
    assert execution["mode"] == "graph" and execution["mode_default"] is True
    assert execution["precision"] == "fp32" and execution["how"] == got["training_path"]
    assert "use_graph=True" in execution["how"]

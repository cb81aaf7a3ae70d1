"""MXNet's execution modes and precisions against the real framework (workers/adapters/mxnet/modes.py).

``mxnet.contrib.amp.init`` rewrites MXNet's operators for the whole process and cannot be undone, so
the float32 checks share one driver process and every bf16 combination runs in a process of its own.
Each combination either trains small_cnn and learns the synthetic data, or is refused as
unsupported with a message naming what is missing; TRAIN and INFER below pin which, so a change in
support fails the test. Whether MXNet 1.9.1 has bfloat16 kernels depends on the CPU (its oneDNN's
bf16 kernels need AVX-512), so that row follows /proc/cpuinfo's flags.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.drivers import checked, drive, framework_python

pytestmark = [pytest.mark.slow, pytest.mark.framework]

MODES = ("eager", "graph", "compiled")


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# oneDNN 2.4's bf16 convolutions need its avx512_core level: AVX-512 F, BW, VL and DQ.
HAS_BF16_KERNELS = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= _cpu_flags()
OK = "ok"
NO_CPU_COMPILER = "has no compiler that generates fused code for training on CPU"
NO_BF16_KERNEL = "has no bfloat16 convolution kernel for this CPU"
FP16_GPU_ONLY = "AMP casts to float16 on GPU contexts only"

# (mode, precision) -> "ok", or a fragment of the Unsupported message (training, on CPU).
TRAIN = {
    ("eager", "fp32"): OK,
    ("graph", "fp32"): OK,
    ("compiled", "fp32"): NO_CPU_COMPILER,
    ("eager", "bf16"): OK if HAS_BF16_KERNELS else NO_BF16_KERNEL,
    ("graph", "bf16"): OK if HAS_BF16_KERNELS else NO_BF16_KERNEL,
    ("compiled", "bf16"): NO_CPU_COMPILER,
    ("eager", "fp16"): FP16_GPU_ONLY,
    ("graph", "fp16"): FP16_GPU_ONLY,
    ("compiled", "fp16"): NO_CPU_COMPILER,  # the mode is refused first
}
# Task inference in fp32: compiled is the oneDNN subgraph pass (optimize_for(backend='MKLDNN')).
INFER = {"eager": OK, "graph": OK, "compiled": OK}
HOW = {
    "eager": "Gluon imperative",
    "graph": "hybridize(static_alloc=True, static_shape=True)",
    "compiled": "optimize_for(x, backend='MKLDNN'",
}
# The first two training steps of graph mode against eager, float32, small_cnn without dropout:
# the same operators on the same data and weights (measured: equal to the last digit).
FIRST_STEPS_RTOL = 1e-5
# Compiled (fused) inference against eager: the same outputs up to this share of their largest.
FUSED_OUTPUT_RTOL = 1e-4

DRIVER = textwrap.dedent(
    """
    import json
    import sys

    from tests.driver_checks import configurer, run_checks
    from workers import events, models, runner
    from workers.adapters import base

    config, adapter = configurer("mxnet", epochs=3, dataset_size=320, image_size=16)

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
        epochs = [[train_epoch(a, e, train_size)] + list(a.evaluate()) for e in (1, 2, 3)]
        return {"epochs": epochs, "execution": a.execution_info(),
                "settings_execution": info["settings"]["execution"]}

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
        try:
            a, _ = adapter(mode=mode, task="inference")
            a.build_model()
        except base.Unsupported as exc:
            return {"unsupported": str(exc)}
        train_size, _ = a.load_data()
        a.prepare_epoch(runner.epoch_order(0, 1, train_size))
        a.infer_step(0)
        a.synchronize()
        return {"output": a._output.asnumpy().tolist(), "execution": a.execution_info()}

    def check_bf16_graph_types():
        # What AMP makes of the graph, whether or not this CPU has the kernels to run it.
        import mxnet as mx
        from mxnet.contrib import amp
        from workers.adapters.mxnet import layers, modes
        amp.init(target_dtype="bfloat16")
        arch = models.build_arch("small_cnn", 4, 16)
        net, _ = layers.Translator(mx).sequential(arch["layers"], (3, 16, 16))
        net.initialize()
        return modes.compute_dtypes(mx, net, (3, 16, 16))

    def check_runner(folder):
        # The whole runner, mode and precision left unset: today's graph mode in float32.
        writer = events.EventWriter(folder + "/events.jsonl")
        from workers.adapters.mxnet import Adapter
        a = Adapter(config(epochs=1, timeout=600))
        result = runner.run(a, a.config, writer)
        writer.close()
        return {"status": result["status"], "execution": result["execution"],
                "settings": result["info"]["settings"]["execution"]}

    # A check named "train:graph:fp32" is check_train with its arguments: one result each.
    for _name, _ in json.loads(sys.argv[2]):
        globals()["check_" + _name] = globals()["check_" + _name.split(":")[0]]
    run_checks(globals())
    """
)


@pytest.fixture(scope="module")
def fp32(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every float32 and fp16 check in one process (fp16 is refused before amp.init on CPU)."""
    folder = tmp_path_factory.mktemp("mxnet-modes")
    checks: list[list[Any]] = [[f"train:{m}:{p}", [m, p]] for m in MODES for p in ("fp32", "fp16")]
    checks += [["first_steps:" + m, [m]] for m in ("eager", "graph")]
    checks += [["infer:" + m, [m]] for m in MODES]
    checks += [["runner", [str(folder)]]]
    return checked(drive(framework_python("mxnet"), folder, DRIVER, checks)[0])


@pytest.fixture(scope="module")
def bf16(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each bf16 combination in a process of its own (amp.init is for the whole process)."""
    python, out = framework_python("mxnet"), {}
    for mode in MODES:
        folder = tmp_path_factory.mktemp(f"mxnet-bf16-{mode}")
        checks: list[list[Any]] = [[f"train:{mode}:bf16", [mode, "bf16"]]]
        if mode == "graph":
            checks.append(["bf16_graph_types", []])
        out.update(drive(python, folder, DRIVER, checks)[0])
    return checked(out)


def _combination(fp32: Any, bf16: Any, mode: str, precision: str) -> Any:
    return (bf16 if precision == "bf16" else fp32)(f"train:{mode}:{precision}")


@pytest.mark.parametrize(("mode", "precision"), sorted(TRAIN))
def test_each_mode_and_precision_trains_or_says_what_is_missing(fp32, bf16, mode, precision):
    got, want = _combination(fp32, bf16, mode, precision), TRAIN[(mode, precision)]
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
    assert HOW[mode] in execution["how"] and got["settings_execution"] == execution["how"]
    dtype = "bfloat16" if precision == "bf16" else "float32"
    assert execution["compute_dtypes"] == {"conv": dtype, "matmul": dtype}


def test_graph_mode_first_steps_match_eager(fp32):
    eager, graph = fp32("first_steps:eager"), fp32("first_steps:graph")
    assert graph == pytest.approx(eager, rel=FIRST_STEPS_RTOL)
    assert eager[1] != eager[0]  # the second step saw the first update


@pytest.mark.parametrize("mode", MODES)
def test_inference_runs_in_each_mode(fp32, mode):
    got = fp32(f"infer:{mode}")
    assert INFER[mode] == OK and "output" in got, got
    assert got["execution"]["mode"] == mode and HOW[mode] in got["execution"]["how"]
    eager = fp32("infer:eager")["output"]
    largest = max(abs(v) for row in eager for v in row)
    rows = zip(eager, got["output"], strict=True)
    worst = max(abs(a - b) for r1, r2 in rows for a, b in zip(r1, r2, strict=True))
    assert worst <= FUSED_OUTPUT_RTOL * largest, (worst, largest)


def test_compiled_inference_runs_fused_onednn_operators(fp32):
    fused = fp32("infer:compiled")["execution"]["fused_operators"]
    assert fused.get("_sg_mkldnn_conv") == 4 and fused.get("_sg_mkldnn_fully_connected") == 2, fused
    assert "Convolution" not in fused and "Activation" not in fused, fused


def test_amp_bf16_puts_convolutions_and_products_in_bfloat16(bf16):
    assert bf16("bf16_graph_types") == {"conv": "bfloat16", "matmul": "bfloat16"}


def test_the_runner_records_the_default_mode(fp32):
    got = fp32("runner")
    assert got["status"] == "ok"
    execution = got["execution"]
    assert execution["mode"] == "graph" and execution["mode_default"] is True
    assert execution["precision"] == "fp32" and execution["how"] == got["settings"]
    assert execution["compute_dtypes"] == {"conv": "float32", "matmul": "float32"}

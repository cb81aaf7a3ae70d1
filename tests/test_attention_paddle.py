"""The attention models in Paddle (issue 25): each node against the pure reference through the tiny
ViT and GPT (random parameters in the canonical layout), in dygraph and through to_static, the
causal mask, the initialisation, both tiny models learning their synthetic data through the
adapter, and what the modes and precisions do with them. Driven in the Paddle environment."""

from __future__ import annotations

import math
import textwrap

import pytest

from tests import attention_asserts
from tests.drivers import checked, drive, framework_python
from workers import models

pytestmark = [pytest.mark.slow, pytest.mark.framework]

DRIVER = textwrap.dedent(
    """
    import math
    import numpy as np
    from tests import attention_checks
    from tests.driver_checks import configurer, run_checks
    from workers import models
    from workers.adapters import base
    from workers.adapters.paddle import attention

    config, adapter = configurer("paddle", threads=1)

    def load(a, arch, params):
        attention.load_canonical(a.paddle, a.model, params)

    def forward(a, x):  # through the adapter's forward: the model, or its to_static conversion
        paddle = a.paddle
        a.model.eval()
        with paddle.no_grad():
            return a.forward(paddle.to_tensor(x)).numpy().astype(np.float64)

    def check_reference(name, mode):
        made = lambda **over: adapter(mode=mode, **over)
        return attention_checks.against_reference(made, load, forward, name)

    def check_learns(name, epochs, over):
        return attention_checks.learns(adapter, name, epochs, **over)

    def check_how():
        a, _ = adapter(model="gpt_tiny", sequence_length=8)
        a.build_model()
        tables = [list(p.shape) for p in a.model.parameters() if list(p.shape) == [512, 64]]
        return {"execution": a.execution_info(), "tables": tables}

    def check_init():
        a, _ = adapter(model="vit_tiny", image_size=16)
        a.build_model()
        vit = dict(a.model.named_sublayers())
        g, _ = adapter(model="gpt_tiny", sequence_length=8)
        g.build_model()
        gpt = dict(g.model.named_sublayers())
        mha = vit["3.body.1"].attention
        linears = [getattr(mha, k + "_proj") for k in ("q", "k", "v", "out")]
        projections = np.concatenate([linear.weight.numpy().ravel() for linear in linears])
        biases = np.concatenate([linear.bias.numpy() for linear in linears])
        norm = vit["3.body.0"]
        return {
            "attention_max": float(np.abs(projections).max()),
            "attention_std": float(projections.std()),
            "attention_bound": models.init_scale("glorot", 64, 64),
            "attention_biases_zero": bool((biases == 0).all()),
            "patch_std": float(vit["0"].conv.weight.numpy().std()),
            "patch_want": 1.0 / math.sqrt(3 * 4 * 4),
            "class_token_zero": bool((vit["1"].weight.numpy() == 0).all()),
            "vit_position_std": float(vit["2"].weight.numpy().std()),
            "layernorm": [float(norm.weight.numpy().min()), float(norm.weight.numpy().max()),
                          float(np.abs(norm.bias.numpy()).max())],
            "token_std": float(gpt["0"].weight.numpy().std()),
            "gpt_position_std": float(gpt["1"].weight.numpy().std()),
        }

    def check_modes(name, mode, precision):
        over = dict(attention_checks.SIZES[name], dataset_size=48, batch_size=8)
        try:
            a, _ = adapter(model=name, mode=mode, precision=precision, **over)
            a.build_model()
        except base.Unsupported as exc:
            return {"unsupported": str(exc)}
        train_size, _ = a.load_data()
        a.prepare_epoch(list(range(train_size)))
        for i in range(2):
            a.train_step(i)
        loss = a.read_loss_sum() / 2
        val = a.evaluate()
        a.infer_step(0)
        a.synchronize()
        return {"loss": loss, "val": list(val), "infer_shape": list(a._output.shape),
                "execution": a.execution_info()}

    run_checks(globals())
    """
)
VIT_LEARN = {"dataset_size": 320, "batch_size": 32, "optimizer": "adam", "lr": 0.001, "classes": 4}
GPT_LEARN = {"dataset_size": 160, "batch_size": 16, "lr": 0.3, "sequence_length": 32}
MODES = [("eager", "fp32"), ("graph", "fp32"), ("compiled", "fp32"), ("eager", "bf16"), ("graph", "fp16")]
# paddlepaddle 3.3.1's CPU wheel, as tests/test_modes_paddle.py records it for the CNNs.
REFUSED = {
    "compiled": "built without CINN",
    "bf16": "amp_guard can only be enabled on CUDAPlace, XPUPlace, and CustomPlace",
    "fp16": "amp_guard can only be enabled on CUDAPlace, XPUPlace, and CustomPlace",
}
TINY = ("vit_tiny", "gpt_tiny")
CHECKS = [[f"reference-{name}-{mode}", [name, mode]] for name in TINY for mode in ("eager", "graph")]
CHECKS += [
    ["learns-vit", ["vit_tiny", 6, VIT_LEARN]],
    ["learns-gpt", ["gpt_tiny", 6, GPT_LEARN]],
    ["learns-vit_graph", ["vit_tiny", 3, dict(VIT_LEARN, mode="graph")]],
    ["learns-gpt_graph", ["gpt_tiny", 3, dict(GPT_LEARN, mode="graph")]],
    ["how", []],
    ["init", []],
]
CHECKS += [[f"modes-{n}-{m}-{p}", [n, m, p]] for n in TINY for m, p in MODES]


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    results, _ = drive(
        framework_python("paddle"),
        tmp_path_factory.mktemp("attention-paddle"),
        DRIVER.replace(
            "run_checks(globals())", "from tests.driver_checks import cases\nrun_checks(cases(globals()))"
        ),
        CHECKS,
        timeout=900,
    )
    return checked(results)


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("name", ["vit_tiny", "gpt_tiny"])
def test_every_node_computes_the_reference(driven, name, mode):
    got = driven(f"reference-{name}-{mode}")
    attention_asserts.matches_reference(got)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_a_later_token_cannot_change_an_earlier_position(driven, mode):
    got = driven(f"reference-gpt_tiny-{mode}")
    attention_asserts.causal(got)


@pytest.mark.parametrize("case", ["learns-vit", "learns-gpt", "learns-vit_graph", "learns-gpt_graph"])
def test_the_tiny_models_learn_their_synthetic_data(driven, case):
    got = driven(case)
    attention_asserts.learns(got)


def test_to_static_trains_the_same_vit_as_dygraph(driven):
    # No dropout in the ViT: the same weights and batches give the same first epoch in both modes.
    eager, graph = driven("learns-vit")["history"][0], driven("learns-vit_graph")["history"][0]
    assert eager == pytest.approx(graph, rel=1e-4)


def test_the_run_records_how_attention_is_written(driven):
    got = driven("how")
    layers = got["execution"]["layers"]
    assert layers["attention"].startswith("paddle.nn.MultiHeadAttention")
    assert layers["layernorm"] == "paddle.nn.LayerNorm"
    assert "transpose_y=True" in layers["tied_output"] and "patch_embed" not in layers
    assert got["tables"] == [[512, 64]]  # one token table, shared by the output
    assert models.GPT["gpt_tiny"][:3] == (512, 128, 64)


def test_initialisation_follows_the_rules(driven):
    got = driven("init")
    bound = got["attention_bound"]
    assert bound * 0.98 < got["attention_max"] <= bound and got["attention_biases_zero"]
    assert got["attention_std"] == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert got["patch_std"] == pytest.approx(got["patch_want"], rel=0.1)
    assert got["class_token_zero"] and got["layernorm"] == [1.0, 1.0, 0.0]
    for key in ("vit_position_std", "token_std", "gpt_position_std"):
        assert got[key] == pytest.approx(models.GPT_INIT_STD, rel=0.1), key


@pytest.mark.parametrize("mode, precision", MODES)
@pytest.mark.parametrize("name", ["vit_tiny", "gpt_tiny"])
def test_modes_and_precisions_run_or_say_why_not(driven, name, mode, precision):
    got = driven(f"modes-{name}-{mode}-{precision}")
    refused = REFUSED.get(mode) or REFUSED.get(precision)
    if refused:
        assert refused in got.get("unsupported", ""), got
        return
    assert "unsupported" not in got, got
    assert got["execution"]["mode"] == mode and got["execution"]["precision"] == precision
    assert math.isfinite(got["loss"]) and all(math.isfinite(v) for v in got["val"]), got
    sizes = {"vit_tiny": [8, 4], "gpt_tiny": [8, 8, models.GPT["gpt_tiny"][0]]}
    assert got["infer_shape"] == sizes[name]

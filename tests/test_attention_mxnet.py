"""The attention models in MXNet Gluon (issue 25): each node against the pure reference through the
tiny ViT and GPT (random parameters in the canonical layout), hybridized (mode graph, the default),
imperative (eager) and through the oneDNN subgraph pass (compiled, inference); the causal mask; the
tied output sharing the embedding's one Parameter; both tiny models learning their synthetic data
through the adapter; what the modes and bf16 do. Driven in the MXNet environment."""

from __future__ import annotations

import textwrap

import pytest

from tests import attention_asserts
from tests.drivers import checked, drive, framework_python
from tests.test_modes_mxnet import HAS_BF16_KERNELS, NO_BF16_KERNEL

pytestmark = [pytest.mark.framework]

DRIVER = textwrap.dedent(
    """
    import numpy as np
    from tests import attention_checks
    from tests.driver_checks import configurer, run_checks
    from workers import runner
    from workers.adapters.mxnet import attention

    config, adapter = configurer("mxnet", threads=1)

    def load(a, arch, params):
        attention.load_canonical(a.mx, a.blocks, params)

    def forward(a, x):  # outside autograd.record(): inference mode, dropout off
        return a.net(a.mx.nd.array(x, dtype="float32")).asnumpy()

    def check_reference(name, mode):
        over = {"task": "inference", "batch_size": 2} if mode == "compiled" else {}

        def make(**kw):
            kw.update(over)
            return adapter(mode=mode, **kw)

        out = attention_checks.against_reference(make, load, forward, name)
        a, _ = make(model=name, **attention_checks.SIZES[name])
        a.build_model()
        out["hybridized"] = bool(a.net._active)  # Gluon's flag: hybridize() was called
        return out

    def check_learns(name, epochs, over):
        return attention_checks.learns(adapter, name, epochs, **over)

    def check_tied():
        a, _ = adapter(model="gpt_tiny", sequence_length=8)
        count = a.build_model()
        embedding, output = a.blocks["0"], a.net[len(a.net) - 1]
        # One training step's gradient on the table (hybridized): rows of tokens absent from the
        # input get theirs through the output alone; rows of present tokens from both uses.
        mx = a.mx
        x = mx.nd.array(np.arange(16).reshape(2, 8) % 10)
        with mx.autograd.record():
            loss = a.loss_fn(a.net(x), mx.nd.array(np.ones((2, 8))))
        loss.backward()
        grad = np.abs(embedding.weight.grad().asnumpy()).sum(axis=1)
        return {"same_parameter": output.weight is embedding.weight, "count": count,
                "parameters": len(list(a.net.collect_params().keys())), "execution": a.execution_info(),
                "hybridized": bool(a.net._active), "absent_rows_with_gradient": int((grad[10:] > 0).sum())}

    def check_modes(name, mode, precision, task):
        sizes = attention_checks.SIZES[name]
        try:
            a, _ = adapter(model=name, mode=mode, precision=precision, task=task, dataset_size=16,
                           batch_size=4, **sizes)
            a.build_model()
            steps = a.prepare_epoch(runner.epoch_order(0, 1, a.load_data()[0]))
            for i in range(steps):
                (a.infer_step if task == "inference" else a.train_step)(i)
            a.synchronize()
        except Exception as exc:
            return {"outcome": type(exc).__name__, "reason": str(exc)}
        return {"outcome": "ok", "execution": a.execution_info()}

    run_checks(globals())
    """
)
REFERENCE = [
    [f"reference-{name}-{mode}", [name, mode]]
    for name in ("vit_tiny", "gpt_tiny")
    for mode in ("graph", "eager", "compiled")
]
CHECKS = REFERENCE + [
    [
        "learns-vit",
        [
            "vit_tiny",
            6,
            {"dataset_size": 320, "batch_size": 32, "optimizer": "adam", "lr": 0.001, "classes": 4},
        ],
    ],
    [
        "learns-gpt",
        ["gpt_tiny", 6, {"dataset_size": 160, "batch_size": 16, "lr": 0.3, "sequence_length": 32}],
    ],
    ["tied", []],
    ["modes-compiled-training", ["gpt_tiny", "compiled", "fp32", "training"]],
    ["modes-eager-training", ["gpt_tiny", "eager", "fp32", "training"]],
    ["modes-compiled-inference", ["vit_tiny", "compiled", "fp32", "inference"]],
]
# Alone in its process: amp.init (bf16) rewrites MXNet's operators for the whole process.
BF16 = [["modes-bf16", ["gpt_tiny", "graph", "bf16", "training"]]]


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    python, folder = framework_python("mxnet"), tmp_path_factory.mktemp("attention")
    script = DRIVER.replace(
        "run_checks(globals())", "from tests.driver_checks import cases\nrun_checks(cases(globals()))"
    )
    results, _ = drive(python, folder, script, CHECKS, timeout=900)
    results.update(drive(python, folder, script, BF16, timeout=300)[0])
    return checked(results)


@pytest.mark.parametrize("case", [c[0] for c in REFERENCE])
def test_every_node_computes_the_reference(driven, case):
    got = driven(case)
    attention_asserts.matches_reference(got)
    # graph (the default) and compiled run hybridized; eager is imperative Gluon
    assert got["hybridized"] == (not case.endswith("-eager"))


@pytest.mark.parametrize("mode", ["graph", "eager", "compiled"])
def test_a_later_token_cannot_change_an_earlier_position(driven, mode):
    got = driven(f"reference-gpt_tiny-{mode}")
    attention_asserts.causal(got)


@pytest.mark.parametrize("case", ["learns-vit", "learns-gpt"])
def test_the_tiny_models_learn_their_synthetic_data(driven, case):
    got = driven(case)
    attention_asserts.learns(got)


def test_the_output_shares_the_embeddings_one_parameter(driven):
    got = driven("tied")
    assert got["same_parameter"]
    # 2 layer norms x 2 blocks + final (2 each), attention 4 each, MLP 4 each, embedding, positions
    assert got["parameters"] == 2 * (4 + 4 + 4) + 2 + 2
    assert got["count"] == 141_056  # models.infer's: the table counted once
    # the output's use reaches the one table: every row of the 512-token vocabulary not in the input
    assert got["hybridized"] and got["absent_rows_with_gradient"] == 512 - 10


def test_the_run_records_how_attention_is_written(driven):
    layers = driven("tied")["execution"]["layers"]
    assert "interleaved_matmul_selfatt_qk" in layers["attention"]
    assert layers["layernorm"] == "gluon.nn.LayerNorm(epsilon=eps)"
    assert "params=embedding.params" in layers["tied_output"] and "F.tanh" in layers["gelu"]


def test_the_modes_run_or_say_why_not(driven):
    assert driven("modes-eager-training")["outcome"] == "ok"
    compiled = driven("modes-compiled-inference")
    assert compiled["outcome"] == "ok", compiled
    # the oneDNN subgraph pass fuses the attention operators too
    assert "_sg_mkldnn_selfatt_qk" in compiled["execution"]["fused_operators"], compiled
    training = driven("modes-compiled-training")
    assert training["outcome"] == "Unsupported" and "no backward" in training["reason"], training


def test_bf16_runs_where_the_cpu_has_the_kernels_else_says_which_is_missing(driven):
    got = driven("modes-bf16")
    # MXNet 1.9.1's bfloat16 kernels are oneDNN's and need AVX-512 (modes.py checks before amp.init):
    # test_modes_mxnet's rule, by /proc/cpuinfo's flags
    if not HAS_BF16_KERNELS:
        assert got["outcome"] == "Unsupported" and NO_BF16_KERNEL in got["reason"], got
        return
    assert got["outcome"] == "ok", got
    # the projections ran in bfloat16; the fused attention products (float32 only on CPU) in float32
    dtypes = got["execution"]["compute_dtypes"]
    assert dtypes["matmul"] == "bfloat16", dtypes
    assert dtypes["attention"] == "float32", dtypes

"""The attention models in JAX (issue 25): each node against the pure reference through the tiny
ViT and GPT (random parameters in the canonical layout), the causal mask, Flax's layout and the
initialisation rules, and both tiny models learning their synthetic data through the adapter.
Driven in the JAX environment."""

from __future__ import annotations

import math
import os
import textwrap

import pytest

from tests import attention_asserts
from tests.drivers import checked, drive, framework_python
from workers import models

pytestmark = [pytest.mark.framework]

DRIVER = textwrap.dedent(
    """
    import numpy as np
    from tests import attention_checks
    from tests.driver_checks import configurer, run_checks
    from workers import models
    from workers.adapters.jax import attention

    config, adapter = configurer("jax", threads=1)

    def load(a, arch, params):
        a._state["params"] = attention.load_canonical(a._state["params"], arch, params)

    def forward(a, x):
        x = x.transpose(0, 2, 3, 1) if x.ndim == 4 else x.astype(np.int32)  # NHWC; int32 ids
        variables = {"params": a._state["params"], "batch_stats": a._state["batch_stats"]}
        return np.asarray(a.net.apply(variables, x, train=False), dtype=np.float64)

    def check_reference(name):
        return attention_checks.against_reference(adapter, load, forward, name)

    def check_learns(name, epochs, over):
        return attention_checks.learns(adapter, name, epochs, **over)

    def check_layout():
        out = {}
        for name, sizes in (("gpt_tiny", {"sequence_length": 8}), ("vit_tiny", {"image_size": 16})):
            a, _ = adapter(model=name, **sizes)
            a.build_model()
            params = a._state["params"]
            arrays = dict(("{}/{}".format(layer, "/".join(k)), np.asarray(v)) for layer in params
                          for k, v in _leaves(params[layer]))
            out[name] = {"shapes": dict((k, list(v.shape)) for k, v in arrays.items()),
                         "std": dict((k, float(v.std())) for k, v in arrays.items()),
                         "max": dict((k, float(np.abs(v).max())) for k, v in arrays.items()),
                         "mean": dict((k, float(v.mean())) for k, v in arrays.items())}
        return out

    def _leaves(tree, prefix=()):
        for key in sorted(tree):
            if hasattr(tree[key], "shape"):
                yield prefix + (key,), tree[key]
            else:
                for item in _leaves(tree[key], prefix + (key,)):
                    yield item

    def check_how():
        a, info = adapter(model="gpt_tiny", sequence_length=8)
        a.build_model()
        return dict(a.execution_info(), settings=info["settings"])

    run_checks(globals())
    """
)
CHECKS = [
    ["reference-vit", ["vit_tiny"]],
    ["reference-gpt", ["gpt_tiny"]],
    ["layout", []],
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
    ["how", []],
]


def _drive(folder, checks, kernel=None):
    env = dict(os.environ)
    env.pop("BENCH_JAX_ATTENTION", None)
    if kernel:
        env["BENCH_JAX_ATTENTION"] = kernel
    script = DRIVER.replace(
        "run_checks(globals())", "from tests.driver_checks import cases\nrun_checks(cases(globals()))"
    )
    return checked(drive(framework_python("jax"), folder, script, checks, env=env, timeout=900)[0])


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    return _drive(tmp_path_factory.mktemp("attention-jax"), CHECKS)


@pytest.fixture(scope="module")
def driven_jax_nn(tmp_path_factory):
    """The same module calling jax.nn.dot_product_attention (BENCH_JAX_ATTENTION=jax.nn)."""
    checks = [c for c in CHECKS if c[0] in ("reference-vit", "reference-gpt", "how")]
    return _drive(tmp_path_factory.mktemp("attention-jax-nn"), checks, kernel="jax.nn")


@pytest.mark.parametrize("case, name", [("reference-vit", "vit_tiny"), ("reference-gpt", "gpt_tiny")])
@pytest.mark.parametrize("kernel", ["flax", "jax.nn"])
def test_every_node_computes_the_reference(request, kernel, case, name):
    got = request.getfixturevalue("driven" if kernel == "flax" else "driven_jax_nn")(case)
    attention_asserts.matches_reference(got)


@pytest.mark.parametrize("kernel", ["flax", "jax.nn"])
def test_a_later_token_cannot_change_an_earlier_position(request, kernel):
    got = request.getfixturevalue("driven" if kernel == "flax" else "driven_jax_nn")("reference-gpt")
    attention_asserts.causal(got)


def test_flax_layout_one_tied_table_and_the_init_rules(driven):
    vocab, context, width, _, heads, _ = models.GPT["gpt_tiny"]
    gpt = driven("layout")["gpt_tiny"]
    shapes = gpt["shapes"]
    # DenseGeneral's kernels: (D, heads, D / heads) in, (heads, D / heads, D) out
    assert shapes["attention5/query/kernel"] == [width, heads, width // heads]
    assert shapes["attention5/query/bias"] == [heads, width // heads]
    assert shapes["attention5/out/kernel"] == [heads, width // heads, width]
    # The tied output adds no parameter: the token table is the only (vocab, D) array, and no
    # layer holds a (D, vocab) one.
    assert [k for k, s in shapes.items() if s == [vocab, width]] == ["embedding0/embedding"]
    assert not [k for k, s in shapes.items() if vocab in s and k != "embedding0/embedding"]
    assert shapes["position_embedding1/pos_embedding"] == [context, width]
    assert gpt["std"]["embedding0/embedding"] == pytest.approx(models.GPT_INIT_STD, rel=0.05)
    assert gpt["std"]["position_embedding1/pos_embedding"] == pytest.approx(0.02, rel=0.05)
    bound = models.init_scale("glorot", width, width)  # each D x D projection on its own
    for part in ("query", "key", "value", "out"):
        assert 0.95 * bound < gpt["max"][f"attention5/{part}/kernel"] <= bound
        assert gpt["max"][f"attention5/{part}/bias"] == 0.0
    assert gpt["mean"]["layernorm4/scale"] == 1.0 and gpt["max"]["layernorm4/bias"] == 0.0
    vit = driven("layout")["vit_tiny"]
    patch, vit_width = models.VIT["vit_tiny"][:2]
    assert vit["shapes"]["patch_embed0/kernel"] == [patch, patch, 3, vit_width]
    want = 1 / math.sqrt(3 * patch * patch)
    assert vit["std"]["patch_embed0/kernel"] == pytest.approx(want, rel=0.05)
    assert vit["max"]["class_token1/cls"] == 0.0 and vit["shapes"]["class_token1/cls"] == [vit_width]


@pytest.mark.parametrize("case", ["learns-vit", "learns-gpt"])
def test_the_tiny_models_learn_their_synthetic_data(driven, case):
    got = driven(case)
    attention_asserts.learns(got)


def test_the_run_records_how_attention_is_written(driven, driven_jax_nn):
    layers = driven("how")["layers"]
    assert "MultiHeadDotProductAttention" in layers["attention"] and "make_causal_mask" in layers["attention"]
    assert layers["layernorm"] == "flax.linen.LayerNorm" and "Embed.attend" in layers["tied_output"]
    assert set(layers) == {"attention", "layernorm", "gelu", "tied_output"}  # gpt_tiny's kinds
    other = driven_jax_nn("how")
    assert "jax.nn.dot_product_attention" in other["layers"]["attention"]
    assert other["settings"]["attention"] == "jax.nn"

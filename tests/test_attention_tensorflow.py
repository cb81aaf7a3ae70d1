"""The attention models in TensorFlow/Keras (issue 25): each node against the pure reference through
the tiny ViT and GPT (random parameters in the canonical layout, mapped onto Keras's kernels), the
causal mask, both tiny models learning their synthetic data through the adapter, and every
execution mode with fp32 and bf16. Driven in the TensorFlow environment."""

from __future__ import annotations

import math
import textwrap

import pytest

from tests import attention_asserts
from tests.drivers import checked, drive
from workers import models

pytestmark = [pytest.mark.slow, pytest.mark.framework]

DRIVER = textwrap.dedent(
    """
    import numpy as np
    from tests import attention_checks
    from tests.driver_checks import cases, configurer, run_checks
    from workers import runner
    from workers.adapters.tensorflow import transformer

    config, adapter = configurer("tensorflow", threads=1)

    def load(a, arch, params):
        transformer.load_canonical(a.layer_paths, params)

    def forward(a, x):
        if x.ndim == 4:  # the checks' NCHW images; the Keras model reads NHWC
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        return np.asarray(a.model(x, training=False), dtype=np.float64)

    def check_reference(name):
        return attention_checks.against_reference(adapter, load, forward, name)

    def check_learns(name, epochs, over):
        return attention_checks.learns(adapter, name, epochs, **over)

    def check_how():
        a, _ = adapter(model="gpt_tiny", sequence_length=8)
        count = a.build_model()
        tables = [v for v in a.model.trainable_variables if tuple(v.shape) == (512, 64)]
        attention = a.layer_paths["3.body.1"]  # the first block's MultiHeadAttention
        kernels = [d.kernel.numpy().reshape(64, 64) for d in transformer.projections(attention)]
        return {"info": a.execution_info(), "parameters": count, "tables": len(tables),
                "kernels_alike": [bool(np.array_equal(kernels[i], kernels[j]))
                                  for i in range(4) for j in range(i + 1, 4)],
                "kernels_max": [float(np.abs(k).max()) for k in kernels],
                "kernels_std": [float(k.std()) for k in kernels]}

    def check_modes(name, over):
        # Every mode with fp32 and bf16: two training steps, the evaluation, one inference step.
        out = {}
        for mode in ("eager", "graph", "compiled"):
            for precision in ("fp32", "bf16"):
                a, _ = adapter(model=name, mode=mode, precision=precision, dataset_size=40,
                               batch_size=8, **over)
                a.build_model()
                train_size, _ = a.load_data()
                steps = a.prepare_epoch(runner.epoch_order(0, 1, train_size))
                for i in range(min(steps, 2)):
                    a.train_step(i)
                a.infer_step(0)
                a.synchronize()
                info = a.execution_info()
                out[mode + "-" + precision] = {
                    "loss": a.read_loss_sum(), "evaluate": list(a.evaluate()),
                    "output": list(a._output.shape), "output_dtype": a._output.dtype.name,
                    "mode": info["mode"], "compute_dtypes": info["compute_dtypes"]}
        return out

    run_checks(cases(globals()))
    """
)
CHECKS = [
    ["reference-vit", ["vit_tiny"]],
    ["reference-gpt", ["gpt_tiny"]],
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
    ["modes-vit", ["vit_tiny", {"image_size": 16}]],
    ["modes-gpt", ["gpt_tiny", {"sequence_length": 8}]],
]


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    from tests.drivers import framework_python

    results, _ = drive(
        framework_python("tensorflow"), tmp_path_factory.mktemp("attention"), DRIVER, CHECKS, timeout=900
    )
    return checked(results)


@pytest.mark.parametrize("case, name", [("reference-vit", "vit_tiny"), ("reference-gpt", "gpt_tiny")])
def test_every_node_computes_the_reference(driven, case, name):
    got = driven(case)
    attention_asserts.matches_reference(got)


def test_a_later_token_cannot_change_an_earlier_position(driven):
    got = driven("reference-gpt")
    attention_asserts.causal(got)


@pytest.mark.parametrize("case", ["learns-vit", "learns-gpt"])
def test_the_tiny_models_learn_their_synthetic_data(driven, case):
    got = driven(case)
    attention_asserts.learns(got)


def test_the_run_records_how_attention_is_written(driven):
    got = driven("how")
    layers = got["info"]["layers"]
    assert "keras.layers.MultiHeadAttention" in layers["attention"]
    assert layers["layernorm"] == "keras.layers.LayerNormalization"
    assert "reverse=True" in layers["tied_output"]


def test_the_tied_output_shares_the_embeddings_one_table(driven):
    got = driven("how")
    arch = models.build_arch("gpt_tiny", 2, 32, sequence_length=8)
    assert got["parameters"] == models.infer(arch)["parameters"] and got["tables"] == 1


@pytest.mark.parametrize("case, output", [("modes-vit", [8, 4]), ("modes-gpt", [8, 8, 512])])
@pytest.mark.parametrize("mode", ["eager", "graph", "compiled"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_every_mode_and_bf16_run(driven, case, output, mode, precision):
    got = driven(case)[f"{mode}-{precision}"]
    assert got["mode"] == mode and got["output"] == output and got["output_dtype"] == "float32"
    loss, (val_loss, accuracy) = got["loss"], got["evaluate"]
    assert math.isfinite(loss) and loss > 0 and math.isfinite(val_loss) and 0.0 <= accuracy <= 1.0, got
    want = "bfloat16" if precision == "bf16" else "float32"
    assert got["compute_dtypes"]["matmul"] == want, got


def test_each_attention_projection_draws_its_own_glorot_uniform(driven):
    """MultiHeadAttention clones one seeded initializer for all four projections; the adapter
    draws each again from its own seed (query, key and value alike would be a different model)."""
    got = driven("how")
    bound = math.sqrt(6 / (64 + 64))
    assert len(got["kernels_max"]) == len(got["kernels_std"]) == 4, got  # query, key, value, output
    assert got["kernels_alike"] == [False] * 6, got  # no two of the four alike
    assert all(bound * 0.9 < m <= bound for m in got["kernels_max"]), got
    assert all(s == pytest.approx(bound / math.sqrt(3), rel=0.05) for s in got["kernels_std"]), got

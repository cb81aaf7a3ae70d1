"""The attention models in PyTorch (issue 25): each node against the pure reference through the
tiny ViT and GPT (random parameters in the canonical layout), the causal mask, and both tiny
models learning their synthetic data through the adapter. Driven in the PyTorch environment."""

from __future__ import annotations

import textwrap

import pytest

from tests import attention_asserts
from tests.drivers import checked, drive
from workers import models

pytestmark = [pytest.mark.framework]

DRIVER = textwrap.dedent(
    """
    import warnings
    import numpy as np
    from tests import attention_checks
    # A language model's targets are (N, L): an epoch buffer of the wrong shape was resized with
    # this warning (deprecated, and a copy each epoch).
    warnings.filterwarnings("error", message="An output with one or more elements was resized")
    from tests.driver_checks import configurer, run_checks
    from workers.adapters.pytorch import layers

    config, adapter = configurer("pytorch", threads=1)

    def load(a, arch, params):
        layers.load_canonical(a.torch, a.model, params)

    def forward(a, x):
        torch = a.torch
        a.model.eval()
        with torch.no_grad():
            return a.model(torch.from_numpy(x)).double().numpy()

    def check_reference(name):
        return attention_checks.against_reference(adapter, load, forward, name)

    def check_learns(name, epochs, over):
        return attention_checks.learns(adapter, name, epochs, **over)

    def check_how():
        a, _ = adapter(model="gpt_tiny", sequence_length=8)
        a.build_model()
        return a.execution_info()

    run_checks(globals())
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
]


@pytest.fixture(scope="module")
def driven(tmp_path_factory, pytorch_python):
    from tests.driver_checks import cases  # noqa: F401  (the same module the driver uses)

    results, _ = drive(
        pytorch_python,
        tmp_path_factory.mktemp("attention"),
        DRIVER.replace(
            "run_checks(globals())", "from tests.driver_checks import cases\nrun_checks(cases(globals()))"
        ),
        CHECKS,
        timeout=600,
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
    layers = driven("how")["layers"]
    assert "scaled_dot_product_attention" in layers["attention"] and layers["layernorm"] == "nn.LayerNorm"
    assert models.GPT["gpt_tiny"][0] == 512


def test_bench_models_holds_a_language_model_to_its_own_output_shape(pytorch_python):
    """A language model's output is [batch, L, vocabulary], not [batch, classes]: the table says
    identical for it when the count is the reference's."""
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    result = CliRunner().invoke(
        cli, ["models", "--framework", "pytorch", "--model", "gpt_tiny", "--image-size", "32"]
    )
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("gpt_tiny "))
    assert line.split() == ["gpt_tiny", "141,056", "141,056", "yes"]

"""workers/frameworks.py is the one place that says what bench knows of each framework; everything
else reads it. These checks hold the rest of the tree to it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.provision import envs
from orchestrator.report.html import plots
from workers import execution, frameworks

REPO = Path(__file__).resolve().parent.parent


def test_each_framework_has_its_adapter_and_each_real_one_its_pins():
    adapters = REPO / "workers" / "adapters"
    for f in frameworks.FRAMEWORKS:
        assert (adapters / f.name / "adapter.py").exists() or (adapters / f"{f.name}.py").exists(), f.name
    for name in frameworks.REAL:
        assert (REPO / "envs" / f"{name}.txt").exists(), name
    assert frameworks.REAL == tuple(n for n in FRAMEWORKS if n != "fault")


def test_the_orchestrator_reads_the_registry():
    assert FRAMEWORKS == frameworks.NAMES
    assert envs.DISTRIBUTIONS == {n: frameworks.BY_NAME[n].distribution for n in frameworks.REAL}
    assert envs.PYTHON_SERIES == {"singa": "3.6"}
    assert plots.FRAMEWORK_COLOURS == {f.name: f.colour for f in frameworks.FRAMEWORKS}
    assert len(set(plots.FRAMEWORK_COLOURS.values())) == len(frameworks.FRAMEWORKS)  # one each


def test_the_default_modes_come_from_it():
    assert execution.DEFAULT_MODES == {f.name: f.default_mode for f in frameworks.FRAMEWORKS}
    assert (
        execution.default_mode({"framework": "tensorflow", "device": "cuda", "model": "resnet50"})
        == "compiled"
    )
    assert execution.default_mode({"framework": "tensorflow", "device": "cuda", "model": "gru"}) == "graph"
    assert (
        execution.default_mode({"framework": "tensorflow", "device": "cpu", "model": "resnet50"}) == "graph"
    )
    assert execution.default_mode({"framework": "jax", "device": "cuda", "model": "resnet50"}) == "compiled"
    assert execution.default_mode({"framework": "no-such", "device": "cpu"}) == "eager"

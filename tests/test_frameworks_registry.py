"""workers/frameworks.py is the one place that says what bench knows of each framework; everything
else reads it. These checks hold the rest of the tree to it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.provision import envs
from orchestrator.report.html import plots
from orchestrator.report.notes import fairness
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


def test_the_fairness_notes_read_each_frameworks_pools_and_gaps_from_it():
    assert fairness.POOLS == {f.name: f.pools for f in frameworks.FRAMEWORKS if f.pools}
    assert [(g.framework, g.key, g.section) for g in fairness.GAPS] == [
        (f.name, g.key, g.section) for f in frameworks.FRAMEWORKS for g in f.gaps
    ]
    for f in frameworks.FRAMEWORKS:
        assert all(isinstance(p, frameworks.Pool) for p in f.pools), f.name
        for gap in f.gaps:  # a size range that holds at least one size
            assert isinstance(gap, frameworks.Gap) and 0 < gap.min_image_size <= gap.max_image_size, gap
    assert not frameworks.BY_NAME["fault"].pools and not frameworks.BY_NAME["fault"].gaps

"""The fault worker's settings as one value in a matrix: `fault: {kind: segfault, after_steps: 2,
replica: 1}` is the same configuration as the flat keys it stands for (docs/matrix.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.matrix import Matrix, load_matrix
from orchestrator.config.settings import FAULT_FIELDS, FAULT_PARTS
from orchestrator.errors import ConfigError


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # errors then name the file as m.yaml


def load(tmp_path: Path, text: str) -> Matrix:
    (tmp_path / "m.yaml").write_text(text)
    return load_matrix("m.yaml")


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_every_fault_setting_has_one_key_in_the_value():
    assert sorted(FAULT_PARTS.values()) == sorted(FAULT_FIELDS)
    assert FAULT_PARTS["kind"] == "fault" and FAULT_PARTS["replica"] == "fault_replica"


def test_the_mapping_is_the_configuration_its_flat_keys_make(tmp_path):
    common = "settings:\n  framework: fault\n  replicas: 2\n"
    flat = load(tmp_path, common + "  fault: segfault\n  after_steps: 2\n  fault_replica: 1\n")
    nested = load(tmp_path, common + "  fault: {kind: segfault, after_steps: 2, replica: 1}\n")
    assert nested.configs == flat.configs
    assert nested.configs[0].config_hash == flat.configs[0].config_hash
    assert (nested.configs[0].fault, nested.configs[0].after_steps, nested.configs[0].fault_replica) == (
        "segfault",
        2,
        1,
    )


def test_an_axis_of_faults_mixes_names_and_mappings_and_excludes_by_either(tmp_path):
    text = (
        "settings: {framework: fault}\n"
        "axes:\n"
        "  fault:\n"
        "    - {kind: hold, hold_seconds: 0.5, hold_threads: 2}\n"
        "    - hang\n"
        "    - {kind: exit, exit_code: 3}\n"
        "exclude:\n"
        "  - {fault: {kind: hang}}\n"
    )
    configs = load(tmp_path, text).configs
    assert [(c.fault, c.hold_seconds, c.hold_threads, c.exit_code) for c in configs] == [
        ("hold", 0.5, 2, None),
        ("exit", None, None, 3),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "  fault: {kind: segfault, after_step: 2}\n",
            "m.yaml:2: after_step: unknown key (did you mean after_steps?)",
        ),
        ("  fault: {kind: sefgault}\n", "m.yaml:2: fault: unknown fault 'sefgault'"),
        ("  fault: {kind: exit, exit_code: x}\n", "m.yaml:2: exit_code: expected an integer"),
        ("  fault: {}\n", "m.yaml:2: fault: an empty mapping"),
        (
            "  after_steps: 1\n  fault: {kind: raise, after_steps: 2}\n",
            "m.yaml:3: after_steps: given twice (first on line 2)",
        ),
        ("  fault: !!set {kind: raise}\n", "m.yaml:2: fault: expected a mapping"),
    ],
)
def test_a_bad_fault_value_names_its_line_and_key(tmp_path, text, expected):
    assert error(tmp_path, "settings:\n" + text + "  framework: fault\n").startswith(expected)


def test_a_setting_on_two_axes_is_refused(tmp_path):
    axes = "axes:\n  after_steps: [1, 2]\n  fault: [{kind: raise, after_steps: 3}]\n"
    text = "settings: {framework: fault}\n" + axes
    assert error(tmp_path, text).startswith("m.yaml:4: fault: after_steps is set by axis after_steps too")


def test_the_fault_value_only_applies_to_the_fault_framework(tmp_path):
    text = "settings:\n  framework: pytorch\n  fault: {kind: raise}\n"
    assert error(tmp_path, text).startswith("m.yaml:3: fault: only applies to framework fault, not pytorch")

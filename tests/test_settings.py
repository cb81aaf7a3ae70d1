"""Each setting is declared once (orchestrator/config/settings.py): RunConfig, the validators, --help,
docs/matrix.md's field table and the runs table all follow the declarations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from orchestrator.config import field_docs, settings
from orchestrator.config.run_config import FIELD_NAMES, RunConfig
from orchestrator.config.setting import Setting
from orchestrator.storage.db import SCHEMA_PATH, _statements, schema_version
from orchestrator.storage.migrate import tables_in

REPO = Path(__file__).resolve().parent.parent


def test_runconfig_fields_are_the_declarations_one_for_one():
    fields = [(f.name, f.type, f.default) for f in dataclasses.fields(RunConfig)]
    declared = [(s.name, s.type, s.default) for s in settings.SETTINGS]
    assert fields == declared


def test_every_setting_has_a_check_and_words_for_its_values():
    for s in settings.SETTINGS:
        assert callable(s.validator), s.name
        assert field_docs.allowed(s.name), f"{s.name}: help cannot say which values it takes"
        assert field_docs.doc_values(s), s.name


def test_a_setting_without_check_choices_or_limits_is_refused():
    with pytest.raises(TypeError, match="no check, choices or limits"):
        _ = Setting(name="x", type="int", default=0, help="x", since=1).validator


def test_the_derived_checks_enforce_the_declared_limits():
    for name, (low, high) in settings.INT_LIMITS.items():
        check = settings.VALIDATORS[name]
        assert check(high) in (high, None)  # replicas: 1 is stored as unset, never the high end
        with pytest.raises(ValueError):
            check(high + 1)
        with pytest.raises(ValueError):
            check(low - 1)


def test_the_matrix_page_holds_the_generated_field_table():
    page = (REPO / "docs" / "matrix.md").read_text()
    assert field_docs.table() in page, (
        "docs/matrix.md's field table differs from the declarations: "
        "run python -m orchestrator.config.field_docs --write docs/matrix.md"
    )
    assert field_docs.replaced(page) == page


def test_the_generator_replaces_a_stale_table_and_keeps_the_rest():
    stale = "# Fields\n\n" + "\n".join(field_docs.HEADER) + "\n| `lr` | old | old | old |\n\nAfter.\n"
    fresh = field_docs.replaced(stale)
    assert fresh.startswith("# Fields\n\n") and fresh.endswith("\nAfter.\n")
    assert "| old |" not in fresh and "| `lr` | number > 0 | `0.01` | Learning rate. |" in fresh


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (4096, "4096"),
        (10_000, "10,000"),
        (10**9, "10⁹"),
        (2**20, "2²⁰"),
        (2**32 - 1, "2³² − 1"),
        (-(2**31), "−2³¹"),
    ],
)
def test_readable_numbers(n, text):
    assert field_docs.readable(n) == text


def test_every_setting_has_its_runs_column():
    runs = tables_in(_statements(SCHEMA_PATH.read_text()))["runs"][1]
    missing = [s.name for s in settings.SETTINGS if s.runs_column not in runs]
    assert not missing, f"settings without a runs column in schema.sql: {missing}"


def test_a_setting_added_after_the_first_schema_is_left_out_of_older_hashes():
    # A later setting, unset, is not in the hash: the configurations recorded before it existed
    # keep their identity. Declared `since` is what decides it.
    assert settings.LATE_FIELDS == {s.name for s in settings.SETTINGS if s.since > 1}
    assert RunConfig().config_hash == RunConfig(trace=None, replicas=None).config_hash
    first = [s for s in settings.SETTINGS if s.since == 1]
    assert [s.name for s in first] == list(FIELD_NAMES[: len(first)])


def test_the_schema_says_which_version_added_each_late_column():
    version = schema_version()
    assert all(1 <= s.since <= version for s in settings.SETTINGS)

"""docs/studies/<name>.md is generated from the study's committed results (studies/<name>/results/,
files `bench export` wrote): regenerated here, it must equal the committed page, so no figure in
the docs can drift from its data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli

REPO = Path(__file__).resolve().parent.parent
WITH_RESULTS = sorted(p.parent.parent.name for p in REPO.glob("studies/*/results/*.json"))


def page(name: str, studies: Path | None = None) -> str:
    args = ["study", "report", name, "--committed", "--format", "markdown"]
    result = CliRunner().invoke(bench_cli, [*args, *(["--studies", str(studies)] if studies else [])])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_study_has_committed_results():
    assert "umons" in WITH_RESULTS


@pytest.mark.parametrize("name", sorted(set(WITH_RESULTS)))
def test_the_committed_page_is_what_its_data_gives(name):
    committed = REPO / "docs" / "studies" / f"{name}.md"
    assert committed.exists(), (
        f"write it: bench study report {name} --committed --format markdown > {committed}"
    )
    assert page(name) == committed.read_text(), (
        f"docs/studies/{name}.md differs from its data: "
        f"bench study report {name} --committed --format markdown > docs/studies/{name}.md"
    )


def test_a_changed_figure_changes_the_page(tmp_path):
    shutil.copytree(REPO / "studies", tmp_path / "studies")
    data = tmp_path / "studies" / "umons" / "results" / "cpu-ranking.json"
    document = json.loads(data.read_text())
    for entry in document["sweeps"][0]["runs"]:
        if entry["run"]["framework"] == "paddle" and entry["run"]["seconds_per_image"]:
            entry["run"]["seconds_per_image"] /= 10  # Paddle ten times faster
    data.write_text(json.dumps(document))
    changed = page("umons", tmp_path / "studies")
    assert changed != (REPO / "docs" / "studies" / "umons.md").read_text()
    assert "paddle" in changed


def test_a_study_without_committed_results_says_so_in_one_line(tmp_path):
    shutil.copytree(
        REPO / "studies" / "umons", tmp_path / "studies" / "umons", ignore=shutil.ignore_patterns("results")
    )
    result = CliRunner().invoke(
        bench_cli, ["study", "report", "umons", "--committed", "--studies", str(tmp_path / "studies")]
    )
    assert result.exit_code == 1 and "has no committed results" in result.output
    assert result.output.count("\n") == 1

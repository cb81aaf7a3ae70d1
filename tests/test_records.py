"""The docs' measured tables are their records': each page regenerated from docs/records/ equals the
committed page, so a hand-edited figure fails here with the command that regenerates it, and the
records hold together (one newest record a measurement, each older one superseded by a named
record) (issue 44)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.tools.records import __main__ as records
from benchmarks.tools.records import record, render
from orchestrator.config.matrix import load_matrix

REPO = records.REPO


def test_the_records_load_and_hold_together():
    found = record.load_folder(REPO / render.FOLDER)
    assert len(found) >= 20
    assert {"sampler-cost", "calibration-noise", "scaling", "suite-time"} <= {r.measurement for r in found}


@pytest.mark.parametrize("name", sorted(records.pages()))
def test_each_page_equals_its_regeneration_from_the_records(name: str):
    assert (REPO / name).read_text() == records.pages()[name], (
        f"{name} differs from its records: run {records.COMMAND}"
    )


def test_performance_and_fairness_open_with_their_current_figures():
    for name in ("docs/performance.md", "docs/fairness.md"):
        head = (REPO / name).read_text()[:3000]
        assert "<!-- records: current -->" in head and "**Current figures**" in head, name


def write(root: Path, rid: str, rows: list[list[str]], **fields: object) -> None:
    data = {
        "id": rid,
        "measurement": "cost",
        "title": "Cost",
        "date": "2026-11-22",
        "machine": "2 vCPUs",
        "versions": "torch 2.13",
        "commands": ["bench run --matrix m.yaml"],
        "supersedes": "",
        "page": "docs/p.md",
        "summary": "the step's time",
        "columns": ["what", "ms"],
        "rows": rows,
        **fields,
    }
    (root / "docs" / "records").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "records" / f"{rid}.json").write_text(json.dumps(data))


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A repository of one page and two records of one measurement, the newer superseding the older."""
    write(tmp_path, "cost-1", [["step", "12.5"]], date="2026-11-20", summary="12.5 ms")
    write(tmp_path, "cost-2", [["step", "9.4"]], supersedes="cost-1", summary="9.4 ms")
    page = "# P\n\n<!-- records: current -->\n<!-- /records -->\n\n## Cost\n\n"
    page += "<!-- record: cost -->\n<!-- /record -->\n"
    (tmp_path / "docs" / "p.md").write_text(page)
    assert records.stale(tmp_path) == ["docs/p.md"]
    (tmp_path / "docs" / "p.md").write_text(records.pages(tmp_path)["docs/p.md"])
    assert records.stale(tmp_path) == []
    return tmp_path


def test_the_newest_record_is_shown_and_the_older_listed_as_superseded(planted: Path):
    text = (planted / "docs" / "p.md").read_text()
    assert "| step | 9.4 |" in text and "| step | 12.5 |" not in text
    assert "[`cost-1`](records/cost-1.json) (2026-11-20): 12.5 ms; superseded by [`cost-2`]" in text
    assert "- **Cost** (2026-11-22, [`cost-2`](records/cost-2.json)): 9.4 ms" in text
    assert "    bench run --matrix m.yaml" in text


def test_a_hand_edited_table_is_found_and_names_the_command(planted: Path, capsys):
    page = planted / "docs" / "p.md"
    page.write_text(page.read_text().replace("| step | 9.4 |", "| step | 8.9 |"))
    assert records.stale(planted) == ["docs/p.md"]
    # The prose outside the markers is the page's own: editing it changes nothing the check sees.
    page.write_text(records.pages(planted)["docs/p.md"] + "\nA closing paragraph.\n")
    assert records.stale(planted) == []


def test_two_current_records_of_one_measurement_are_refused(tmp_path: Path):
    write(tmp_path, "cost-1", [["step", "12.5"]])
    write(tmp_path, "cost-2", [["step", "9.4"]])
    with pytest.raises(record.RecordError, match=r"measurement cost: 2 current records \(cost-1, cost-2\)"):
        record.load_folder(tmp_path / "docs" / "records")


def test_a_cycle_or_a_missing_predecessor_is_refused(tmp_path: Path):
    write(tmp_path, "cost-1", [["step", "12.5"]], supersedes="cost-0")
    with pytest.raises(record.RecordError, match="supersedes cost-0, which is not a record"):
        record.load_folder(tmp_path / "docs" / "records")
    write(tmp_path, "cost-0", [["step", "1"]], supersedes="cost-2")
    write(tmp_path, "cost-2", [["step", "9.4"]], supersedes="cost-1")
    write(tmp_path, "cost-3", [["step", "9.1"]], supersedes="cost-0")
    with pytest.raises(record.RecordError, match="measurement cost"):
        record.load_folder(tmp_path / "docs" / "records")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"columns": ["what", "ms", "note"]}, "row 1 is not 3 strings"),
        ({"date": "26 Nov"}, "`date` must be YYYY-MM-DD or 'not recorded'"),
        ({"id": "other"}, "`id` must be the file's name"),
        ({"commands": "later"}, "`commands` is a list of commands, or 'not recorded'"),
        ({"machine": ""}, "`machine` must be a non-empty string"),
    ],
)
def test_a_malformed_record_is_refused_naming_its_file(tmp_path: Path, fields: dict, says: str):
    write(tmp_path, "cost-1", [["step", "12.5"]], **fields)
    with pytest.raises(record.RecordError, match="^cost-1.json: " + says.replace("(", r"\(")):
        record.load_folder(tmp_path / "docs" / "records")


def test_a_record_without_its_command_says_so(tmp_path: Path):
    write(tmp_path, "cost-1", [["step", "12.5"]], commands="not recorded")
    (tmp_path / "docs" / "p.md").write_text("<!-- record: cost -->\n<!-- /record -->\n")
    assert "Command: not recorded" in records.pages(tmp_path)["docs/p.md"]


def test_a_record_without_its_marker_and_a_marker_without_its_record_fail(tmp_path: Path):
    write(tmp_path, "cost-1", [["step", "12.5"]])
    (tmp_path / "docs" / "p.md").write_text("# P\n")
    with pytest.raises(render.MarkerError, match="no `<!-- record: NAME -->` marker for cost"):
        records.pages(tmp_path)
    (tmp_path / "docs" / "p.md").write_text(
        "<!-- record: cost -->\n<!-- /record -->\n<!-- record: gone -->\n<!-- /record -->\n"
    )
    with pytest.raises(render.MarkerError, match="marker `record: gone`"):
        records.pages(tmp_path)


def test_the_check_exits_1_and_names_the_command(planted: Path, monkeypatch, capsys):
    page = planted / "docs" / "p.md"
    page.write_text(page.read_text().replace("9.4", "9.5"))
    monkeypatch.setattr(records, "REPO", planted)
    assert records.main(["--check"]) == 1
    assert capsys.readouterr().out == f"docs/p.md differs from its records: run {records.COMMAND}\n"
    assert records.main([]) == 0 and records.main(["--check"]) == 0


# The pages this mechanism covers, and the matrices their commands run (issue 44: fairness.md's
# commands named small.yaml, pair.yaml, threads0.yaml, ..., files no user had).
PAGES = ["performance", "fairness", "gpu", "profiler", "kernels", "models", "inference"]
_MATRIX = re.compile(r"--matrix ([\w./-]+\.yaml)")
WORK_FOLDER = ".gpu-check/"  # matrices the GPU check writes for itself as it runs


def test_every_matrix_the_pages_and_records_run_is_shipped():
    texts = [(REPO / "docs" / f"{name}.md").read_text() for name in PAGES]
    texts += [p.read_text() for p in sorted((REPO / render.FOLDER).glob("*.json"))]
    named = {m for text in texts for m in _MATRIX.findall(text) if not m.startswith(WORK_FOLDER)}
    assert "matrices/experiments/gaps-traced.yaml" in named
    missing = sorted(m for m in named if not (REPO / m).is_file())
    assert not missing, f"commands run matrices the repository does not ship: {missing}"


@pytest.mark.parametrize(
    "path", sorted((REPO / "matrices" / "experiments").glob("*.yaml")), ids=lambda p: p.name
)
def test_each_experiment_matrix_loads_and_names_its_page(path: Path):
    configs = load_matrix(path).configs
    assert configs
    assert re.search(r"docs/\w+\.md", path.read_text()), f"{path.name}: its comment names no page"

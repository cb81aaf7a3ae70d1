"""`bench export` and `bench import`: a sweep carried to another database reads the same in every
report, a second import changes nothing, a portable export holds no path of this machine, and a
document that is not what it claims is refused in one line with nothing written."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

MATRIX = """
name: carried
settings: {dataset_size: 32, batch_size: 8, epochs: 2, warmup_steps: 0, runs: 2}
axes:
  framework: [fault]
  seed: [1, 2]
include:
  - {framework: fault, fault: {kind: segfault}, seed: 3}
"""


@pytest.fixture
def exported(cli, write_matrix, workdir) -> Path:
    write_matrix(MATRIX)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    result = cli("export", "--out", "out.json", "--portable")
    assert result.exit_code == 0 and "exported 1 sweep(s), 6 runs" in result.output, result.output
    return workdir / "out.json"


def count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def test_an_imported_sweep_reads_the_same_in_every_report(cli, exported, workdir):
    # Without --portable, so that the run folders' paths read the same too.
    assert cli("export", "--out", "plain.json").exit_code == 0
    result = cli("import", "plain.json", "--db", "other.db")
    assert result.exit_code == 0 and "1 sweep(s) added (ids 1), 6 runs" in result.output, result.output
    for args in (["--table", "results"], ["--table", "comparison"], ["--crashes"], ["--format", "json"]):
        here = cli("report", *args).output
        there = cli("report", "--db", "other.db", *args).output
        assert there.replace("other.db", "bench.db") == here, args
    for table in ("runs", "epochs", "environments", "phases", "calibrations"):
        assert count(workdir / "other.db", table) == count(workdir / "bench.db", table), table
    assert count(workdir / "other.db", "samples") == 0  # the raw samples stay behind


def test_a_second_import_changes_nothing(cli, exported, workdir):
    assert cli("import", str(exported), "--db", "other.db").exit_code == 0
    again = cli("import", str(exported), "--db", "other.db")
    assert again.exit_code == 0 and "0 sweep(s) added" in again.output and "skipped: carried" in again.output
    assert count(workdir / "other.db", "sweeps") == 1 and count(workdir / "other.db", "runs") == 6


def test_a_portable_export_holds_no_path_of_this_machine(exported, workdir):
    text = exported.read_text()
    assert str(workdir) not in text and str(Path.home()) not in text
    runs = json.loads(text)["sweeps"][0]["runs"]
    assert all(r["run"]["run_dir"].startswith("./bench-runs/") for r in runs)


def test_a_portable_export_of_a_study_names_its_matrix_inside_the_checkout(cli, workdir):
    """A study's sweep records its matrix by the checkout's absolute path (neither the working
    folder nor home here): a portable document writes the checkout as `.`."""
    tiny = Path(__file__).resolve().parent / "data" / "studies"
    assert cli("study", "run", "tiny", "--studies", str(tiny)).exit_code == 0
    assert cli("export", "--out", "study.json", "--portable").exit_code == 0
    text = (workdir / "study.json").read_text()
    checkout = str(Path(__file__).resolve().parent.parent)
    assert checkout not in text
    [sweep] = json.loads(text)["sweeps"]
    assert sweep["sweep"]["matrix_path"] == "./tests/data/studies/tiny/tiny.yaml"


def _broken(document: dict, how: str) -> dict:
    run = document["sweeps"][0]["runs"][0]
    if how == "unknown column":
        run["run"]["shell"] = "rm -rf /"
    elif how == "text for a number":
        run["run"]["seconds_per_image"] = "fast"
    elif how == "a link bench sets":
        run["run"]["sweep_id"] = 99
    elif how == "missing column":
        del run["run"]["config_hash"]
    elif how == "unknown table":
        run["samples"] = []
    elif how == "a bool for a number":  # a run that trained (the order of runs is shuffled)
        run = next(r for r in document["sweeps"][0]["runs"] if r["epochs"])
        run["epochs"][0]["seconds"] = True
    elif how == "control characters in a key":
        run["run"]["\x1b[31mred"] = 1
    return document


@pytest.mark.parametrize(
    "how, says",
    [
        ("unknown column", "'shell' is not a column bench imports into runs"),
        ("text for a number", "seconds_per_image: 'fast' is not a value of this column"),
        ("a link bench sets", "'sweep_id' is not a column bench imports into runs"),
        ("missing column", "config_hash is missing"),
        ("unknown table", "'samples' is not a table bench exports"),
        ("a bool for a number", "True is not a value of this column"),
        ("control characters in a key", "is not a column bench imports into runs"),
    ],
)
def test_a_damaged_document_is_one_line_and_writes_nothing(cli, exported, workdir, how, says):
    assert cli("import", str(exported), "--db", "other.db").exit_code == 0
    document = json.loads(exported.read_text())
    document["sweeps"][0]["sweep"]["started_at"] = "2000-01-01T00:00:00+00:00"  # a new sweep
    bad = workdir / "bad.json"
    bad.write_text(json.dumps(_broken(document, how)))
    before = count(workdir / "other.db", "runs")
    from click.testing import CliRunner

    from orchestrator.cli.main import cli as bench_cli

    result = CliRunner().invoke(bench_cli, ["import", str(bad), "--db", "other.db"])
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and says in result.output and "\x1b" not in result.output
    assert re.search(r"run \d+", result.output)
    assert count(workdir / "other.db", "runs") == before and count(workdir / "other.db", "sweeps") == 1


@pytest.mark.parametrize(
    "text, says",
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a bench export"),
        ('{"format": "bench-export", "version": 2}', "export version 2"),
        ('{"format": "bench-export", "version": 1, "schema": 999, "sweeps": []}', "upgrade bench"),
        ('{"format": "bench-export", "version": 1, "schema": 14, "sweeps": {}}', '"sweeps" is not a list'),
        ('{"format": "bench-export", "version": 1, "schema": NaN, "sweeps": []}', "NaN is not a number"),
    ],
)
def test_a_file_that_is_not_an_export_is_one_line(workdir, text, says):
    from click.testing import CliRunner

    from orchestrator.cli.main import cli as bench_cli

    (workdir / "f.json").write_text(text)
    result = CliRunner().invoke(bench_cli, ["import", "f.json", "--db", "other.db"])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and says in result.output, result.output
    assert not (workdir / "other.db").exists()  # checked before the database is opened


def test_export_of_a_sweep_that_does_not_exist_is_one_line(cli, exported):
    from click.testing import CliRunner

    from orchestrator.cli.main import cli as bench_cli

    result = CliRunner().invoke(bench_cli, ["export", "--sweep", "7", "--out", "x.json"])
    assert result.exit_code == 1 and "no sweep 7" in result.output and result.output.count("\n") == 1

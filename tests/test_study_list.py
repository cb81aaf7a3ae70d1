"""`bench study list` shows each study's committed results (studies/committed.py) and, with --db, how
many of each scale's planned runs the database holds: a real `bench export --portable` of the tiny
study's fault-worker runs, and damaged and hostile files, each a one-line note in its row."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.studies import committed

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "tests" / "data" / "studies" / "tiny"


def _row(output: str, name: str = "tiny") -> str:
    [line] = [x for x in output.splitlines() if x.startswith(f"{name} ")]
    return line


@pytest.mark.slow
def test_a_real_export_is_listed_with_its_runs_scale_date_and_machine(cli, workdir):
    """The fault worker's runs, exported as a study commits them; then half of them deleted from
    the database, which --db counts as what --resume would run."""
    root = workdir / "studies"
    shutil.copytree(TINY, root / "tiny")
    ran = cli("study", "run", "tiny", "--studies", str(root))
    assert ran.exit_code == 0, ran.output
    (root / "tiny" / "results").mkdir()
    out = root / "tiny" / "results" / "cpu.json"
    exported = cli("export", "--portable", "--out", str(out))
    assert exported.exit_code == 0, exported.output
    (root / "tiny" / "results" / "broken.json").write_text('{"format": "bench-export", "sweeps": [')
    document = json.loads(out.read_text())
    machine = document["sweeps"][0]["sweep"]["machine"]
    day = document["sweeps"][0]["sweep"]["started_at"][:10]

    listed = cli("study", "list", "--studies", str(root))
    assert listed.exit_code == 0, listed.output
    row = _row(listed.output)
    assert f"cpu.json: 4 runs, scale cpu, ran {day}, on {machine}" in row
    assert re.search(r"broken\.json: damaged: not JSON \(", row), row
    assert "in --db" not in listed.output

    held = cli("study", "list", "--studies", str(root), "--db", str(workdir / "bench.db"))
    assert held.exit_code == 0 and "cpu 4/4" in _row(held.output)
    conn = sqlite3.connect(workdir / "bench.db")
    conn.execute("DELETE FROM runs WHERE id IN (SELECT id FROM runs ORDER BY id LIMIT 2)")
    conn.commit()
    conn.close()
    left = cli("study", "list", "--studies", str(root), "--db", str(workdir / "bench.db"))
    assert "cpu 2/4 (2 to run)" in _row(left.output)


def _summary(tmp_path: Path, document: object) -> committed.Result:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    return committed.summary(path, "tiny")


def _export(sweeps: object) -> dict[str, object]:
    return {"format": "bench-export", "version": 1, "schema": 1, "sweeps": sweeps}


def test_a_damaged_or_hostile_file_is_a_one_line_note(tmp_path):
    assert _summary(tmp_path, [1, 2]).problem.startswith('damaged: not a bench export (no "format"')
    assert _summary(tmp_path, _export([7])).problem == "damaged: sweep 1 is not an exported sweep"
    assert _summary(tmp_path, _export({"a": 1})).problem == 'damaged: "sweeps" is not a list'
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert committed.summary(deep, "tiny").problem.startswith("damaged: ")
    large = tmp_path / "large.json"
    with open(large, "wb") as f:
        f.truncate(committed.MAX_BYTES + 1)  # sparse: nothing written, nothing read
    assert committed.summary(large, "tiny").problem == "not read: larger than 64 MiB"
    hostile = {
        "sweep": {
            "name": "study tiny/cpu: tiny",
            "started_at": "2026-01-02T03:04:05",
            "machine": "m\x1b[2J\n",
        },
        "runs": [{}, {}],
    }
    other = {"sweep": {"name": "study other/gpu: x", "started_at": 5, "machine": None}, "runs": [{}]}
    found = _summary(tmp_path, _export([hostile, other]))
    assert found.line() == "r.json: 3 runs, scale cpu, ran 2026-01-02, on m\\x1b[2J\\x0a"
    assert "\n" not in found.line() and "\x1b" not in found.line()


def test_the_shipped_studies_list_their_committed_results(cli):
    listed = cli("study", "list")
    assert listed.exit_code == 0, listed.output
    assert "cpu-ranking.json: 160 runs, scale cpu, ran 2026-11-27, on AMD EPYC x2, 24 GiB [f1f95aec]" in (
        _row(listed.output, "umons")
    )
    assert "cpu.json: 70 runs, scale cpu" in _row(listed.output, "msu")

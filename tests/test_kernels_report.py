"""`trace: kernels` through the whole harness with the fault worker's synthetic tracer: the trace
in result.json and kernels.json, the runs and kernels rows, `bench report --kernels`, the traced
mark in the results table, and `bench inspect`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import dbs

pytestmark = pytest.mark.slow

MATRIX = """
name: traced
settings: {framework: fault, dataset_size: 400, batch_size: 8, epochs: 2, warmup_steps: 3}
include:
  - {trace: kernels}
  - {trace: kernels, seed: 1}
  - {seed: 2}
"""


@pytest.fixture
def sweep(workdir: Path, write_matrix, cli, db_url, monkeypatch):
    """The sweep on each backend: the cli fixture's commands find it through BENCH_DB."""
    monkeypatch.setenv("BENCH_DB", db_url)
    result = cli("run", "--matrix", str(write_matrix(MATRIX)))
    assert result.exit_code == 0, result.output
    runs = dbs.query(db_url, "SELECT * FROM runs ORDER BY id")
    kernels = dbs.query(db_url, "SELECT * FROM kernels ORDER BY run_id, seq")
    return runs, kernels


def test_a_traced_run_stores_its_kernels_and_the_traced_region(sweep):
    runs, kernels = sweep
    traced = runs[0]
    assert traced["outcome"] == "ok" and traced["trace"] == "kernels"
    assert traced["trace_backend"] == "fault (synthetic)" and traced["trace_status"] == "ok"
    # The traced region is exactly the timed epochs: both of them, no warm-up.
    assert traced["min_epoch_seconds"] + traced["max_epoch_seconds"] == pytest.approx(traced["trace_seconds"])
    mine = [k for k in kernels if k["run_id"] == traced["id"]]
    assert [k["class"] for k in mine] == ["convolution", "gemm", "elementwise", "batched gemm"]
    assert [k["calls"] for k in mine] == [2, 2, 2, 2]  # one per traced epoch
    assert sum(k["share"] for k in mine) == pytest.approx(1.0)
    assert mine[1]["tile"] == "128x64_nn"
    on_disk = json.loads((Path(traced["run_dir"]) / "kernels.json").read_text())
    assert on_disk["epochs"] == 2 and len(on_disk["records"]) == 4


def test_an_untraced_run_has_no_trace(sweep):
    runs, kernels = sweep
    plain = runs[2]
    assert plain["trace"] is None and plain["trace_backend"] is None and plain["trace_status"] is None
    assert not [k for k in kernels if k["run_id"] == plain["id"]]
    assert not (Path(plain["run_dir"]) / "kernels.json").exists()


def test_report_kernels_puts_the_classes_side_by_side(sweep, cli):
    result = cli("report", "--kernels")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "time by class" in out and "GEMM and convolution kernels by tile shape" in out
    assert "fault seed=0" in out and "fault seed=1" in out  # the two traced runs, apart
    for cls in ("gemm", "batched gemm", "convolution", "memory copy", "other"):
        assert cls in out
    assert "include the profiler's overhead" in out
    csv = cli("report", "--kernels", "--format", "csv").output.splitlines()
    assert csv[0].startswith("group,framework,runs,class,tile,name")
    assert len(csv) == 1 + 2 * 4
    document = json.loads(cli("report", "--kernels", "--format", "json", "--where", "seed=1").output)
    assert [g["group"] for g in document["groups"]] == ["fault"]
    gemm = next(c for c in document["classes"] if c["class"] == "gemm")
    assert gemm["fault"]["share"] == pytest.approx(0.2)


def test_results_mark_traced_timings_and_inspect_shows_the_kernels(sweep, cli):
    runs, _ = sweep
    table = cli("report").output
    lines = {line.split()[0]: line for line in table.splitlines() if line[:1].isdigit()}
    assert " *" in lines[str(runs[0]["id"])] and " *" not in lines[str(runs[2]["id"])]
    assert "timings perturbed" in table
    text = cli("inspect", str(runs[0]["id"])).output
    assert "backend: fault (synthetic), status: ok" in text
    assert "batched gemm" in text and "maxwell_sgemmBatched_128x128_raggedMn_tn [128x128_tn]" in text


def test_kernels_is_a_report_of_its_own(sweep, cli):
    result = cli("report", "--kernels", "--crashes")
    assert result.exit_code != 0
    assert "--kernels is a report of its own" in result.output

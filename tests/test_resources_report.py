"""`bench report --resources`, the resources in `bench inspect`, and `bench timeline`, over one
small real sweep of the fault worker holding threads and memory (and one killed over its budget)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from tests import dbs
from tests.conftest import BACKENDS, new_database

pytestmark = pytest.mark.slow

MIB = 1 << 20
HOLD_THREADS = 3
HOLD_MB = 60
# threads 1 against the framework default, batch 1 against a mini-batch: both comparisons have
# something to compare. The oom run holds more than its budget; the last runs without a sampler.
MATRIX = f"""
name: resources
settings:
  framework: fault
  fault: hold
  hold_seconds: 0.6
  hold_memory_mb: {HOLD_MB}
  hold_threads: {HOLD_THREADS}
  sample_interval: 0.05
axes:
  threads: [1, 0]
  batch_size: [1, 8]
include:
  - {{framework: fault, fault: hold, hold_memory_mb: 200, hold_seconds: 5, memory_budget: 100MiB}}
  - {{framework: fault, fault: ok, sample_interval: 0}}
"""


@pytest.fixture(scope="module", params=BACKENDS)
def sweep(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The database of the sweep above, run once for the whole module on each backend."""
    folder = tmp_path_factory.mktemp("resources")
    (folder / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    db = new_database(request, folder)
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(folder / "m.yaml"), "--db", db])
    assert result.exit_code == 0, result.output
    assert "5 ok, 1 oom" in result.output
    return db


@pytest.fixture(scope="module")
def bench(sweep: str):
    def invoke(*args: str):
        return CliRunner().invoke(bench_cli, [*args, "--db", str(sweep)], catch_exceptions=False)

    return invoke


def runs(db: str | Path) -> dict[str, dict]:
    """The runs by what sets them apart: "t1/b8", "oom", "off"."""
    rows = dbs.query(db, "SELECT * FROM runs ORDER BY id")

    def name(r: dict) -> str:
        if r["outcome"] == "oom":
            return "oom"
        return "off" if r["sample_interval"] == 0 else f"t{r['threads']}/b{r['batch_size']}"

    return {name(r): r for r in rows}


def test_report_resources_json_has_the_summary(bench, sweep):
    result = bench("report", "--resources", "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.output)
    by_id = {r["id"]: r for r in doc["runs"]}
    assert len(by_id) == 6 and "rss_peak_bytes" in doc["units"]
    for name, run in runs(sweep).items():
        row = by_id[run["id"]]
        if name == "off":
            assert row["sampler_status"] == "off" and row["rss_peak_bytes"] is None
        elif name == "oom":
            assert row["outcome"] == "oom" and row["rss_peak_bytes"] > 100 * MIB
        else:
            # The main thread and the held pool; the held memory and the interpreter's own.
            assert row["threads_max"] == 1 + HOLD_THREADS
            assert row["threads_steady"] in (1, 1 + HOLD_THREADS)
            assert HOLD_MB * MIB <= row["rss_peak_bytes"] <= (HOLD_MB + 60) * MIB
            assert row["cpu_percent_max"] is not None and row["sampler_status"] == "ok"
            assert row["rss_peak_phase"] == "hold"


def test_report_resources_table_and_comparisons(bench):
    out = bench("report", "--resources").output
    assert "RSS peak MiB" in out and "threads steady" in out and "% of allowed" in out
    assert "GPU util %" not in out  # no GPU data on this machine: the columns are left out
    assert "multi-threading:" in out and "memory by batch size:" in out and "×1.00" in out
    doc = json.loads(bench("report", "--resources", "--format", "json").output)
    # threads=1 first, the default (0) last; at each batch size, each thread setting.
    threads = [(c["batch_size"], c["threads"]) for c in doc["comparisons"]["threads"]]
    assert threads == [(1, 1), (1, 0), (8, 1), (8, 0)]
    batch = [(c["threads"], c["batch_size"]) for c in doc["comparisons"]["batch"]]
    assert batch == [(1, 1), (1, 8), (0, 1), (0, 8)]
    first = doc["comparisons"]["batch"][0]
    assert first["vs_base"] == 1.0 and first["runs"] == 1 and first["rss_peak_bytes"] >= HOLD_MB * MIB


def test_report_resources_csv_and_markdown(bench):
    rows = list(csv.DictReader(io.StringIO(bench("report", "--resources", "--format", "csv").output)))
    assert len(rows) == 6 and {"rss_peak_bytes", "cpu_percent_mean", "threads_steady"} <= set(rows[0])
    sampled = [r for r in rows if r["sampler_status"] == "ok"]  # all but the run without a sampler
    assert len(sampled) == 5 and all(int(r["rss_peak_bytes"]) >= HOLD_MB * MIB for r in sampled)
    assert [r["rss_peak_bytes"] for r in rows if r["sampler_status"] == "off"] == [""]
    md = bench("report", "--resources", "--format", "markdown").output
    assert md.count("| framework |") == 3  # the runs and both comparisons


def test_group_by_and_its_errors(bench):
    doc = json.loads(bench("report", "--resources", "--group-by", "framework", "--format", "json").output)
    assert [(c["threads"], c["runs"]) for c in doc["comparisons"]["threads"]] == [(1, 2), (0, 2)]
    assert set(doc["comparisons"]["threads"][0]) >= {"framework", "cpu_percent_mean", "vs_base"}
    out = bench("report", "--resources", "--group-by", "framework").output
    assert "default" in out.split("multi-threading:")[1]
    bad = bench("report", "--resources", "--group-by", "colour")
    assert bad.exit_code == 1 and "colour is not a configuration field" in bad.output
    assert bench("report", "--resources", "--crashes").exit_code == 1
    assert bench("report", "--group-by", "framework").exit_code == 1


def test_a_sweep_with_nothing_to_compare(request, sweep, tmp_path):
    """A rerun of the unsampled run is a sweep of its own: one row, no comparisons, and why."""
    if sweep.startswith("sqlite"):
        db = str(tmp_path / "bench.db")
        source, copy = sqlite3.connect(sweep[len("sqlite:///") :]), sqlite3.connect(db)
        source.backup(copy)  # the WAL's pages too, which a copy of the file would miss
        source.close(), copy.close()
    else:
        db = request.getfixturevalue("pg_server").copy_database(sweep)
    runner = CliRunner()
    off = str(runs(db)["off"]["id"])
    assert runner.invoke(bench_cli, ["rerun", off, "--db", str(db)]).exit_code == 0
    out = runner.invoke(bench_cli, ["report", "--resources", "--db", str(db)]).output
    assert "rerun of run" in out and "no run of this sweep has resource samples" in out
    assert "multi-threading:" not in out and "memory by batch size:" not in out


def test_inspect_shows_resources_and_the_last_samples(bench, sweep):
    oom = runs(sweep)["oom"]
    out = bench("inspect", str(oom["id"])).output
    assert "resources (sidecar profiler" in out and "memory budget: 100.0 MiB" in out
    assert "resources per phase:" in out
    last = out.split("samples before it died")[1].split("\n\n")[0]
    assert "RSS MiB" in last and "threads" in last and last.rstrip().endswith("yes")
    doc = json.loads(bench("inspect", str(oom["id"]), "--format", "json").output)
    assert doc["phases"] and doc["last_samples"][-1]["final"] == 1
    assert len(doc["last_samples"]) <= 10


def test_inspect_without_samples_says_why(bench, sweep):
    out = bench("inspect", str(runs(sweep)["off"]["id"])).output
    assert "no samples: the sampler was off (sample_interval: 0)" in out


def test_timeline_exports(bench, sweep):
    run = runs(sweep)["t1/b1"]
    text = bench("timeline", str(run["id"]), "--format", "csv").output
    lines = text.splitlines()
    assert lines[0].startswith("run_id,seq,t,phase,") and len(lines) == run["samples_count"] + 1
    samples = json.loads(bench("timeline", str(run["id"]), "--format", "json").output)
    assert len(samples) == run["samples_count"] and samples[0]["run_id"] == run["id"]
    assert [s["seq"] for s in samples] == sorted(s["seq"] for s in samples)
    hold = json.loads(bench("timeline", str(run["id"]), "--format", "json", "--phase", "hold").output)
    assert hold and {s["phase"] for s in hold} == {"hold"}
    assert "RSS MiB" in bench("timeline", str(run["id"])).output


def test_timeline_of_a_run_without_samples(bench, sweep):
    run_id = str(runs(sweep)["off"]["id"])
    table = bench("timeline", run_id)
    assert table.exit_code == 0 and table.output.strip().count("\n") == 0
    assert "sampler was off" in table.output
    assert json.loads(bench("timeline", run_id, "--format", "json").output) == []
    assert bench("timeline", run_id, "--format", "csv").output.strip().startswith("run_id,seq,t,")


def test_timeline_of_an_unknown_run(bench):
    result = bench("timeline", "999")
    assert result.exit_code == 1
    assert result.output.startswith("error: no run 999 in ") and result.output.count("\n") == 1

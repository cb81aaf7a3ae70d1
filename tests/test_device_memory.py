"""The framework's own peak of device memory beside NVML's sampled peak (orchestrator/report/
notes/device_memory.py): read from the environment row's `extra`, shown by `bench report --resources` and
`bench inspect`, and a sampled peak below it marked (docs/gpu.md, third run: ResNet50 at batch 1
on an H200, NVML 1,676 MiB against torch.cuda's 4,700 MiB peak reservation).

The sweep is real (the fault worker, no GPU here); the GPU figures are then written into its rows
as the H200's runs recorded them, the way a shared database would hold them."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from orchestrator.report.notes import device_memory
from tests import dbs

MIB = 1 << 20
# The H200's figures (docs/gpu.md): batch 1 NVML 1,676 MiB, torch 4,700; batch 8 6,148 and 5,388.
NVML = {1: 1676 * MIB, 8: 6148 * MIB}
TORCH = {1: 4700 * MIB, 8: 5388 * MIB}


@pytest.mark.parametrize(
    "extra,expected",
    [
        ({"device_memory": {"source": "torch.cuda", "max_memory_reserved": 5 * MIB}}, 5 * MIB),
        (json.dumps({"device_memory": {"source": "jax memory_stats", "peak_bytes_in_use": 7}}), 7),
        ({"device_memory": {"max_memory_reserved": "5G"}}, None),
        ({"device_memory": {"max_memory_reserved": True}}, None),
        ({"device_memory": {"max_memory_reserved": -1}}, None),
        ({"device_memory": {"max_memory_reserved": 1 << 70}}, None),
        ({"device_memory": {"max_memory_reserved": 2.5e9}}, None),
        ({"device_memory": [1, 2]}, None),
        ("{not json", None),
        ("[" * 100_000, None),
        (None, None),
        ({}, None),
    ],
)
def test_the_framework_peak_is_a_plain_count_of_bytes_or_nothing(extra, expected):
    peak = device_memory.framework_peak(extra)
    assert (peak["bytes"] if peak else None) == expected


def test_the_source_is_shown_on_one_line_and_short():
    peak = device_memory.framework_peak(
        {"device_memory": {"source": "torch\x1b[2J\ncuda" + "x" * 500, "max_memory_reserved": 1}}
    )
    assert peak is not None
    assert "\n" not in peak["source"] and "\x1b" not in peak["source"] and len(peak["source"]) <= 40


def test_a_sampled_peak_below_the_frameworks_is_marked_and_no_other():
    assert device_memory.missed({"gpu_memory_peak_bytes": NVML[1], "gpu_framework_peak_bytes": TORCH[1]})
    assert not device_memory.missed({"gpu_memory_peak_bytes": NVML[8], "gpu_framework_peak_bytes": TORCH[8]})
    assert not device_memory.missed({"gpu_memory_peak_bytes": None, "gpu_framework_peak_bytes": TORCH[1]})
    assert not device_memory.missed({"gpu_memory_peak_bytes": NVML[1], "gpu_framework_peak_bytes": None})


MATRIX = """
name: device-memory
settings: {framework: fault, fault: ok}
axes:
  batch_size: [1, 8]
"""


@pytest.fixture
def sweep(tmp_path):
    (tmp_path / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(tmp_path / "m.yaml"), "--db", db])
    assert result.exit_code == 0, result.output
    for run in dbs.query(db, "SELECT id, batch_size FROM runs"):
        batch = run["batch_size"]
        dbs.execute(
            db,
            "UPDATE runs SET gpu_memory_peak_bytes = :nvml, samples_count = 10 WHERE id = :id",
            nvml=NVML[batch],
            id=run["id"],
        )
        memory = {"source": "torch.cuda", "max_memory_reserved": TORCH[batch], "memory_reserved": 460 * MIB}
        dbs.execute(
            db,
            "UPDATE environments SET extra = :extra WHERE run_id = :id",
            extra=json.dumps({"device_memory": memory}),
            id=run["id"],
        )
    return db


def bench(db: str, *args: str) -> str:
    result = CliRunner().invoke(bench_cli, [*args, "--db", db], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_resources_show_both_peaks_and_mark_the_missed_one(sweep):
    text = bench(sweep, "report", "--resources")
    assert "GPU fw peak MiB" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line[:1].isdigit()}
    first, second = rows["1"], rows["2"]
    assert "1,676 ^" in first and "4,700" in first
    assert "6,148" in second and "5,388" in second and "^" not in second
    assert device_memory.MISSED_NOTE in text
    # The batch comparison sets batch 1's sampled peak beside its own peak too, marked.
    batch = text[text.index("memory by batch size") :]
    assert "1,676 ^" in batch and "4,700" in batch


def test_csv_keeps_the_frameworks_peak_in_bytes(sweep):
    lines = bench(sweep, "report", "--resources", "--format", "csv").splitlines()
    header = lines[0].split(",")
    at = header.index("gpu_framework_peak_bytes")
    assert sorted(int(line.split(",")[at]) for line in lines[1:]) == sorted(TORCH.values())


def test_inspect_says_the_sampler_missed_the_peak(sweep):
    run = dbs.query(sweep, "SELECT id FROM runs WHERE batch_size = 1")[0]["id"]
    text = bench(sweep, "inspect", str(run))
    (line,) = [line for line in text.splitlines() if "the framework's own peak" in line]
    assert "4,700 MiB (torch.cuda, peak reserved)" in line and "1,676 MiB" in line and "unseen" in line
    other = dbs.query(sweep, "SELECT id FROM runs WHERE batch_size = 8")[0]["id"]
    (line,) = [line for line in bench(sweep, "inspect", str(other)).splitlines() if "own peak" in line]
    assert "5,388 MiB" in line and "unseen" not in line


def test_a_hostile_peak_in_a_shared_database_is_no_figure(sweep):
    dbs.execute(
        sweep, "UPDATE environments SET extra = :x", x='{"device_memory": {"max_memory_reserved": "9e99"}}'
    )
    text = bench(sweep, "report", "--resources")
    assert "^" not in text.split("memory by batch size")[0].replace(device_memory.MISSED_NOTE, "")
    assert device_memory.MISSED_NOTE not in text

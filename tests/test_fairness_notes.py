"""`bench report --table comparison` footnotes a framework's result where the run's own record
shows it was limited by the framework (orchestrator.report.notes.fairness, docs/fairness.md).

Real Paddle runs: Paddle's own default is one thread (FLAGS_paddle_num_threads), so a run with
`threads` unset on a machine of several cores gets the default-threads note, and one with
`threads` equal to the cores does not. The notes are read from what each run recorded, so a run
made with the setting changed gets none.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.report.notes import fairness

pytestmark = [pytest.mark.slow, pytest.mark.framework]

CORES = len(os.sched_getaffinity(0))
MATRIX = f"""
name: fairness
settings: {{min_time: 0, min_steps: 1,
            framework: paddle, model: small_cnn, dataset_size: 20, batch_size: 4, epochs: 1,
           warmup_steps: 1, image_size: 16, classes: 3, timeout: 600}}
axes: {{threads: [0, {CORES}]}}
"""


def bench(folder: Path, *args: str):
    from orchestrator.cli.main import cli

    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fairness")
    (folder / "m.yaml").write_text(MATRIX)
    ran = bench(folder, "run", "--matrix", "m.yaml")
    assert ran.exit_code == 0, ran.output
    return folder


def test_default_threads_note_follows_the_recorded_threads(folder):
    if CORES < 2:
        pytest.skip("one core: Paddle's default of one thread uses every core")
    text = bench(folder, "report", "--table", "comparison").output
    rows = [line for line in text.splitlines() if line.startswith("paddle")]
    assert len(rows) == 2, text
    # columns: framework, dataset (images), threads ("default" where unset), the cells
    by_threads = {line.split()[2]: line for line in rows}
    assert set(by_threads) == {"default", str(CORES)}, text
    note = next(line for line in text.splitlines() if "its own default" in line)
    number = note.split("]")[0] + "]"
    assert note.startswith("[") and f"paddle ran 1 thread on {CORES} cores" in note
    assert "docs/fairness.md" in note
    assert number in by_threads["default"] and number not in by_threads[str(CORES)]

    records = json.loads(bench(folder, "report", "--table", "comparison", "--format", "json").output)
    notes = {r["threads"]: r["fairness_notes"] or "" for r in records["rows"]}
    assert "default-threads" in notes[0] and "default-threads" not in notes[CORES]
    assert any("its own default" in n for n in records["notes"])
    table = bench(folder, "report", "--table", "comparison", "--format", "csv").output
    assert "fairness_notes" in next(csv.reader(io.StringIO(table)))


def test_no_note_without_a_record_or_off_the_cpu():
    summary = {"framework": "paddle", "device": "cpu", "ok_runs": 1, "threads": 0, "cpus": None}
    fact = {"threads": {"intra_op": 1}, "settings": {}, "cpu_count": 4}
    assert [n.key for n in fairness.notes_for(summary, fact)] == ["default-threads"]
    assert fairness.notes_for(summary, None) == []
    assert fairness.notes_for({**summary, "device": "cuda"}, fact) == []
    assert fairness.notes_for({**summary, "ok_runs": 0}, fact) == []
    assert fairness.notes_for({**summary, "threads": 1}, fact) == []  # asked for 1, ran 1
    assert fairness.notes_for({**summary, "cpus": "0"}, fact) == []  # one core of its own
    singa = {**summary, "framework": "singa"}
    texts = [n.text for n in fairness.notes_for(singa, {**fact, "threads": {"openmp": 4, "openblas": 1}})]
    assert len(texts) == 1 and "1 OpenBLAS thread (its dense layers)" in texts[0] and "OpenMP" not in texts[0]
    # threads asked for but not applied (Singa's OpenBLAS here): a note of its own
    asked = fairness.notes_for({**singa, "threads": 2}, {**fact, "threads": {"openmp": 2, "openblas": 1}})
    assert [n.key for n in asked] == ["threads-not-applied"] and "where 2 were asked for" in asked[0].text
    one = {**fact, "threads": {"openmp": 1, "openblas": 1}}
    assert fairness.notes_for({**singa, "threads": 1}, one) == []


def test_measured_gaps_apply_where_they_were_measured():
    fact = {"threads": {"intra_op": 2}, "settings": {}, "cpu_count": 2}
    row = {"framework": "paddle", "model": "resnet50", "image_size": 224, "device": "cpu", "ok_runs": 1}
    row.update(threads=2, cpus=None, task=None)
    far = 3.0  # the cell's multiple of the fastest framework's time, computed by the report
    assert [n.key for n in fairness.notes_for(row, fact, far)] == ["paddle-cpu-convolution"]
    assert fairness.notes_for(row, fact, 1.2) == []  # nothing to explain
    assert fairness.notes_for(row, fact, None) == []  # nothing to compare with
    assert fairness.notes_for({**row, "image_size": 112}, fact, far) == []  # not measured there
    small = [n.key for n in fairness.notes_for({**row, "image_size": 32}, fact, far)]
    assert small == ["paddle-cpu-convolution"]  # the quick matrix's size: measured there too
    assert fairness.notes_for({**row, "image_size": 32, "model": "vgg16"}, fact, far) == []
    assert fairness.notes_for({**row, "model": "small_cnn"}, fact, far) == []
    assert fairness.notes_for({**row, "task": "inference"}, fact, far) == []
    assert fairness.notes_for({**row, "framework": "mxnet"}, fact, far) == []
    for gap in fairness.GAPS:  # a cause in words, and where docs/fairness.md explains it; no figure
        note = fairness.notes_for(
            {**row, "framework": gap.framework, "model": gap.models[0], "image_size": gap.min_image_size},
            fact,
            far,
        )[0]
        assert note.text.startswith(gap.framework) and fairness.link(gap.section) in note.text
        assert not re.search(r"\d(\.\d+)?x", gap.cause), gap.cause
    pytorch = {**row, "framework": "pytorch"}
    nchw = {**fact, "settings": {"memory_format": "contiguous_format"}}
    assert [n.key for n in fairness.notes_for(pytorch, nchw)] == ["pytorch-nchw"]
    assert fairness.notes_for(pytorch, {**fact, "settings": {"memory_format": "channels_last"}}) == []
    assert fairness.notes_for({**pytorch, "image_size": 32}, nchw) == []  # NCHW is the default there


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_note_points_at_a_section_of_fairness_md():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "fairness.md").read_text()
    anchors = {anchor(h) for h in re.findall(r"^#+ (.+)$", doc, re.M)}
    row = {"framework": "singa", "model": "resnet50", "device": "cpu", "ok_runs": 1, "cpus": None}
    fact = {"threads": {"openblas": 1}, "settings": {"memory_format": "contiguous_format"}, "cpu_count": 2}
    texts = [fairness.link(gap.section) for gap in fairness.GAPS]
    for framework, threads in (("singa", 0), ("singa", 2), ("pytorch", 2)):
        summary = {**row, "framework": framework, "threads": threads, "image_size": 224}
        notes = fairness.notes_for(summary, fact, 3.0)
        texts += [n.text for n in notes]
    cited = {m for text in texts for m in re.findall(r"docs/fairness\.md#([\w-]+)", text)}
    expected = {"threads", "paddle", "singa", "jax", "pytorch", "the-quick-matrixs-spread"}
    assert cited >= expected, cited
    assert cited <= anchors, cited - anchors

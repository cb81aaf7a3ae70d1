"""`trace: kernels` on CPU in every real framework: each one's own profiler, through the harness.

One traced small_cnn run per framework (in its own environment, as `bench run` runs it): it ends ok
with its operators stored and classified, a GEMM and a convolution class among them, the shares
adding up to one, and the traced region equal to the timed epochs; `bench report --kernels` puts
the six side by side."""

from __future__ import annotations

import os
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli

pytestmark = [pytest.mark.slow, pytest.mark.framework]
FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax")
BACKENDS = {
    "pytorch": "torch.profiler",
    "tensorflow": "tf.profiler",
    "mxnet": "mxnet.profiler",
    "paddle": "paddle.profiler",
    "singa": "singa.graph-profiling",
    "jax": "jax.profiler",
}
MATRIX = """
name: traced-cpu
settings: {min_time: 0, min_steps: 1,
           model: small_cnn, image_size: 32, dataset_size: 64, batch_size: 8, epochs: 1, warmup_steps: 1,
           trace: kernels, timeout: 300}
axes:
  framework: [pytorch, tensorflow, mxnet, paddle, singa, jax]
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tmp_path_factory.mktemp("traced")
    (path / "m.yaml").write_text(MATRIX)
    cwd = os.getcwd()
    os.chdir(path)
    try:
        result = CliRunner().invoke(bench_cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
        report = CliRunner().invoke(bench_cli, ["report", "--kernels"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(path / "bench.db")
    conn.row_factory = sqlite3.Row
    runs = {r["framework"]: dict(r) for r in conn.execute("SELECT * FROM runs")}
    kernels = [
        dict(r) for r in conn.execute("SELECT k.*, r.framework FROM kernels k JOIN runs r ON r.id = k.run_id")
    ]
    conn.close()
    return runs, kernels, report


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_framework_traces_its_operators(traced, framework):
    runs, kernels, _ = traced
    run = runs[framework]
    assert run["outcome"] == "ok", (run["reason"], run["stderr_tail"])
    assert run["trace_backend"] == BACKENDS[framework] and run["trace_status"] == "ok"
    assert run["trace_seconds"] == pytest.approx(run["median_epoch_seconds"])
    mine = [k for k in kernels if k["framework"] == framework]
    classes = {k["class"] for k in mine}
    assert {"gemm", "convolution"} <= classes, sorted(classes)
    assert sum(k["share"] for k in mine) == pytest.approx(1.0)
    # A CNN on CPU: its convolutions are a large part of the time in every framework.
    assert sum(k["share"] for k in mine if k["class"] == "convolution") > 0.2
    # Operator time measured inside the traced region: more than nothing, and on two cores at
    # most about twice the region (operators of two threads overlap in time).
    total = sum(k["total_seconds"] for k in mine)
    assert 0.2 * run["trace_seconds"] < total < 2.5 * run["trace_seconds"]


def test_report_kernels_puts_the_six_side_by_side(traced):
    _, _, report = traced
    assert report.exit_code == 0, report.output
    header = next(line for line in report.output.splitlines() if line.startswith("class "))
    assert header.split() == ["class", *FRAMEWORKS]

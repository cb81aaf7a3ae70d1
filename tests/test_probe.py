"""`bench models`' build-and-count (orchestrator/launch/probe.py) goes through launch's one sequence
of a worker run, with the sampler off: the fault worker's interpreter, fast, no framework."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.launch.probe import probe_with
from orchestrator.launch.sidecar import SAMPLES_FILE


def test_a_probe_builds_in_a_worker_with_the_probe_task_and_no_sampler(tmp_path):
    row = probe_with(Path(sys.executable), "fault", "small_cnn", 10, 32, tmp_path)

    assert row["outcome"] == "ok" and row["reason"] is None, row
    assert row["framework_version"] == "fault" and row["python_version"] == sys.version.split()[0]
    run_dir = tmp_path / "fault-small_cnn"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["task"] == "probe" and spec["config"]["model"] == "small_cnn"
    assert json.loads((run_dir / "result.json").read_text())["task"] == "probe"
    assert not (run_dir / SAMPLES_FILE).exists()


def test_a_worker_without_its_framework_is_an_outcome_naming_the_exception(tmp_path):
    # The orchestrator's interpreter has no torch: the worker's import fails, and says so.
    row = probe_with(Path(sys.executable), "pytorch", "small_cnn", 10, 32, tmp_path)

    assert row["outcome"] == "unavailable" and row["parameters"] is None, row
    assert row["reason"].startswith("Unavailable: cannot import torch"), row

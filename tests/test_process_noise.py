"""benchmarks/harness/process_noise.py's arithmetic on runs with a known answer: the CV, the drift
shared by a round taken out, and the padded environment's size."""

from __future__ import annotations

import pytest

from benchmarks.harness import process_noise
from orchestrator.config.run_config import RunConfig
from orchestrator.launch.lifecycle import worker_env


def rows(*figures: float) -> list[dict[str, float]]:
    return [{"ms_per_image": f, "other_load": 0.0} for f in figures]


def test_a_drift_every_policy_shared_is_taken_out_of_the_net_spread():
    # Both policies slow by the same factor in round 2: a spread of the machine, not of a process.
    per = {"a": rows(10.0, 12.0, 10.0), "b": rows(10.0, 12.0, 10.0), "c": rows(10.0, 12.0, 10.0)}
    assert process_noise.cv([10.0, 12.0, 10.0]) == pytest.approx(0.1083, abs=1e-4)
    net = process_noise.net_of_rounds(per)
    assert net["a"] == pytest.approx([1.0, 1.0, 1.0])
    # One policy's own process slower in one round stays in its net spread alone.
    per["c"] = rows(10.0, 12.0, 11.0)
    net = process_noise.net_of_rounds(per)
    assert net["c"] == pytest.approx([1.0, 1.0, 1.1]) and net["a"] == pytest.approx([1.0, 1.0, 1.0])


def test_the_cv_interval_brackets_the_cv_and_is_seeded():
    figures = [3.2, 3.5, 3.3, 3.9, 3.4, 3.6, 3.1, 3.7]
    low, high = process_noise.cv_interval(figures, seed=1)
    assert low < process_noise.cv(figures) < high
    assert process_noise.cv_interval(figures, seed=1) == (low, high)


def test_the_padded_environment_has_the_fixed_size():
    config = RunConfig(framework="fault")
    extra = process_noise.padded_env(config, {"PYTHONHASHSEED": "0"})
    env = {**worker_env(config)[0], **extra}
    assert sum(len(k) + len(v) + 2 for k, v in env.items()) == process_noise.ENV_SIZE
    assert extra["PYTHONHASHSEED"] == "0"

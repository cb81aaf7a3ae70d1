"""execute's launch-policy hook (extra_env, prefix): what benchmarks/harness/process_noise.py uses to
start the same configuration under another environment or command. A real fault worker runs under
a real shell prefix that records what it was given, then execs the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.execute import execute

# Writes the environment and the command it was asked to run into the run's folder (its cwd), then
# becomes that command: the worker keeps the pid the sampler watches.
RECORDER = ["sh", "-c", 'env > seen_env.txt && printf "%s\\n" "$@" > seen_args.txt && exec "$@"', "recorder"]


def fault_config() -> RunConfig:
    return RunConfig(framework="fault", fault="ok", dataset_size=16, batch_size=8, epochs=1, warmup_steps=0)


def test_extra_env_and_prefix_reach_the_worker_and_its_recorded_command(tmp_path: Path):
    extra = {"PYTHONHASHSEED": "0", "BENCH_TEST_PAD": "x y"}
    rec = execute(fault_config(), tmp_path / "run", None, extra_env=extra, prefix=RECORDER)
    assert rec.outcome.outcome == "ok", rec.stderr_tail
    seen = dict(
        line.split("=", 1) for line in (rec.run_dir / "seen_env.txt").read_text().splitlines() if "=" in line
    )
    assert seen["PYTHONHASHSEED"] == "0" and seen["BENCH_TEST_PAD"] == "x y"
    args = (rec.run_dir / "seen_args.txt").read_text().split()
    assert args[1:] == ["-m", "workers", "--spec", "spec.json"]  # the worker's own command, after the prefix
    assert "PYTHONHASHSEED=0 BENCH_TEST_PAD='x y' sh -c" in rec.worker_command


def test_without_the_hook_the_command_is_the_workers_own(tmp_path: Path):
    rec = execute(fault_config(), tmp_path / "run", None)
    assert rec.outcome.outcome == "ok", rec.stderr_tail
    assert not (rec.run_dir / "seen_env.txt").exists()
    assert "PYTHONHASHSEED" not in rec.worker_command
    assert rec.worker_command.split(" && ", 1)[1].split()[-4:] == ["-m", "workers", "--spec", "spec.json"]
    assert " sh -c " not in rec.worker_command


def test_the_hook_is_refused_for_a_replicated_run(tmp_path: Path):
    config = RunConfig(framework="fault", fault="ok", replicas=2)
    with pytest.raises(ValueError, match="replicas"):
        execute(config, tmp_path / "run", None, prefix=["env"])

"""Ctrl-C while bench forks is held until the child is in hand, then raised where bench handles it.

A signal that lands while CPython runs its at-fork callbacks (a Popen with `preexec_fn` runs them)
is raised inside one of them, where the interpreter prints "Exception ignored" and drops it: a
sweep went on after its Ctrl-C. Every fork bench makes blocks the signals around it.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from orchestrator.launch import sidecar
from orchestrator.launch.sidecar import Sidecar, SidecarSettings


def test_ctrl_c_during_the_samplers_fork_is_held_then_raised_and_the_sampler_ends(tmp_path, monkeypatch):
    real = subprocess.Popen
    seen: dict[str, bool] = {}

    def popen(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands as the sampler is forked
        seen["held"] = signal.SIGINT in signal.sigpending()
        return real(*args, **kwargs)

    monkeypatch.setattr(sidecar.subprocess, "Popen", popen)
    car = Sidecar(SidecarSettings(0.1, None, "0"), tmp_path)
    with pytest.raises(KeyboardInterrupt):
        car.launch()
    assert seen.get("held"), "the signal was delivered during the fork, not held until its end"
    assert car.proc is not None, "the sampler was started, so bench knows of it"
    car.stop()  # what execute() does when it is stopped before the worker exists
    assert car.proc.returncode is not None


SLOW_START = (
    "import runpy, sys, time; time.sleep(1.5); sys.argv[0] = 'sampler'; "
    "runpy.run_module('profiler.sampler', run_name='__main__')"
)


def test_a_worker_that_ends_at_once_is_sampled_however_slow_the_sampler_starts(tmp_path, monkeypatch):
    """The worker starts only once the sampler says it is ready: on a loaded machine a fault run
    that failed at once used to end before the sampler's first sample, and had no timeline."""
    import json
    import sys
    import time

    car = Sidecar(SidecarSettings(0.05, None, None), tmp_path)
    slow = [sys.executable, "-c", SLOW_START, *car.command()[3:]]
    monkeypatch.setattr(car, "command", lambda: slow)
    car.launch()
    assert car.ready
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    car.start(worker.pid, time.time())
    worker.wait()
    car.stop()
    records = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert "missed" not in records[0], records[0]
    assert any(r["kind"] == "sample" for r in records)
    assert car.proc is not None and car.proc.returncode == 0

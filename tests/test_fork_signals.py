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

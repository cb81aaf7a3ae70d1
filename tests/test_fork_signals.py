"""Ctrl-C while bench forks is held until the child is in hand, then raised where bench handles it.

A signal that lands while CPython runs its at-fork callbacks (a Popen with `preexec_fn` runs them)
is raised inside one of them, where the interpreter prints "Exception ignored" and drops it: a
sweep went on after its Ctrl-C. Every fork bench makes blocks the signals around it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.launch.sidecar import Sidecar, SidecarSettings
from tests.conftest import default_sigint

REPO = Path(__file__).resolve().parent.parent


# Run in a fresh interpreter, as bench is: the test runner's own threads (a pytest-xdist worker's
# I/O thread) would take a process-wide Ctrl-C that bench's threads never take.
CTRL_C_DURING_FORK = """
import json, os, signal, subprocess, sys, threading
from pathlib import Path
from orchestrator.launch import capture, process, sidecar
from orchestrator.launch.sidecar import Sidecar, SidecarSettings

folder = Path(sys.argv[1])
if sys.argv[2] == "capture":  # a worker's output still being read, by bench's capture thread
    read_end, write_end = os.pipe()
    reader = capture.Capture({read_end: capture.BoundedLog(folder / "out.log")}, blocked=process._BLOCKED)
    assert reader.thread.is_alive()
real = subprocess.Popen
seen = {"threads": threading.active_count()}

def popen(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands as the sampler is forked
    seen["held"] = signal.SIGINT in signal.sigpending()
    return real(*args, **kwargs)

sidecar.subprocess.Popen = popen
car = Sidecar(SidecarSettings(0.1, None, "0"), folder)
try:
    car.launch()
    seen["raised"] = False
except KeyboardInterrupt:
    seen["raised"] = True
seen["known"] = car.proc is not None  # the sampler was started, so bench knows of it
if car.proc is not None:
    car.stop()  # what execute() does when it is stopped before the worker exists
    seen["ended"] = car.proc.returncode is not None
print(json.dumps(seen))
"""


@pytest.mark.parametrize("threads", ["alone", "capture"])
def test_ctrl_c_during_the_samplers_fork_is_held_then_raised_and_the_sampler_ends(tmp_path, threads):
    """Also with bench's capture thread alive: it blocks the signals bench handles, so the kernel
    gives the Ctrl-C to the main thread, which holds it until the fork is done."""
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_DURING_FORK, str(tmp_path), threads],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=default_sigint,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["threads"] == (2 if threads == "capture" else 1), seen
    assert seen["held"], "the signal was delivered during the fork, not held until its end"
    assert seen["raised"] and seen["known"] and seen["ended"], seen


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

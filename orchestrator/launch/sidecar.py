"""Start and stop the sidecar sampler (profiler/sampler.py) beside one worker.

The sampler runs from the orchestrator's interpreter, in a session of its own (Ctrl-C in the
terminal is the orchestrator's to handle) and dies with the orchestrator, like the worker.
"""

from __future__ import annotations

import os
import select
import signal
import site
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import profiler
from orchestrator.launch.orphans import TOKEN_VARIABLE
from orchestrator.launch.process import die_with_parent, signals_blocked
from profiler.sampler import READY as READY_LINE

SAMPLES_FILE = "samples.jsonl"
# After the worker has gone, the sampler takes its last sample and exits; this is plenty.
STOP_GRACE_SECONDS = 3.0
# How long the worker's start waits for the sampler to say it is ready (its imports, NVML): a
# fraction of a second on a quiet machine, seconds on a loaded one. A sampler that is not ready by
# then is not waited for: the run goes on, and the sampler starts watching when it can.
READY_SECONDS = 20.0


def profiler_pythonpath(inherited: str | None) -> str:
    """The PYTHONPATH for bench's interpreter running the sampler or the calibration (its
    environment is bench's own): in a checkout the repository goes first, so `-m profiler.*` finds
    the checkout's from a run folder; an installed profiler is in site-packages, on the path
    already, and site-packages is never put ahead of the standard library."""
    parent = Path(profiler.__file__).resolve().parent.parent
    sites = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    first = [] if parent in sites else [str(parent)]
    return os.pathsep.join(filter(None, [*first, inherited]))


@dataclass(frozen=True)
class SidecarSettings:
    interval: float
    memory_budget: int | None = None
    cpus: str | None = None  # the CPUs the run may use ("0-1"), whose other load is measured


class Sidecar:
    """One sampler process following one worker."""

    def __init__(self, settings: SidecarSettings, run_dir: Path) -> None:
        self.settings, self.run_dir = settings, run_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = False  # the sampler said it was ready before the worker started

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "profiler.sampler", "--out", SAMPLES_FILE, "--events", "events.jsonl"]
        cmd += ["--interval", repr(self.settings.interval)]
        if self.settings.memory_budget:
            cmd += ["--memory-budget", str(self.settings.memory_budget)]
        if self.settings.cpus:
            cmd += ["--cpus", self.settings.cpus]
        return cmd

    def launch(self, token: str | None = None) -> None:
        """Start the sampler before the worker, and wait until it says it is ready (its imports
        done), so that it watches from the worker's first moment; it then waits for the pid on stdin.

        ``token``: the run's marker, so that whatever ends the run's processes ends the sampler too.
        """
        env = dict(os.environ)
        if token:
            env[TOKEN_VARIABLE] = token
        env["PYTHONPATH"] = profiler_pythonpath(env.get("PYTHONPATH"))
        with open(self.run_dir / "sampler.log", "wb") as log, signals_blocked():
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.run_dir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self.ready = self._await_ready(self.proc)

    @staticmethod
    def _await_ready(proc: subprocess.Popen[bytes]) -> bool:
        """Read the sampler's one line of stdout ("ready"; nothing if it died starting), then close it."""
        stdout = proc.stdout
        if stdout is None:
            return False
        try:
            line = b""
            deadline = time.monotonic() + READY_SECONDS
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([stdout], [], [], left)[0]:
                    return False
                chunk = os.read(stdout.fileno(), len(READY_LINE))
                if not chunk:  # it ended before it was ready: the run goes on unwatched
                    return False
                line += chunk
            return line == READY_LINE
        finally:
            stdout.close()

    def start(self, pid: int, t0: float) -> None:
        """Point the waiting sampler at the worker."""
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(f"{pid} {t0!r}\n".encode())
            self.proc.stdin.close()
        except OSError:  # the sampler died during its start-up; the run goes on unwatched
            pass

    def stop(self) -> None:
        """Wait for the sampler's last sample, then make sure it is gone."""
        if self.proc is None:
            return
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()  # never started: EOF tells it there is nothing to watch
        try:
            self.proc.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

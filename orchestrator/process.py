"""Start a worker in its own process group and supervise it until it ends, one way or another.

The parent sleeps on the child's pidfd (no busy-waiting); a timeout or an interruption kills the
whole group, TERM then KILL after a grace period; survivors of a finished leader are killed too,
so nothing a run started is left running.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TERM_GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Finished:
    """How a worker process ended, as seen from outside."""

    returncode: int
    wall_seconds: float
    timed_out: bool = False
    interrupted: bool = False
    oom_kills: int = 0  # kernel OOM kills in our memory cgroup while the run lived


def die_with_parent() -> None:
    # If the orchestrator is SIGKILLed, the kernel kills the worker too instead of orphaning it.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _preexec(cpus: set[int] | None) -> Callable[[], None]:
    def child_setup() -> None:
        die_with_parent()
        if cpus:
            # Inherited by every process and thread the worker starts.
            os.sched_setaffinity(0, cpus)

    return child_setup


def _cgroup_oom_file() -> Path | None:
    candidates = [Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control")]
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if controllers == "":
                candidates.insert(0, Path("/sys/fs/cgroup") / rel.lstrip("/") / "memory.events")
            elif "memory" in controllers.split(","):
                candidates.insert(0, Path("/sys/fs/cgroup/memory") / rel.lstrip("/") / "memory.oom_control")
    except (OSError, ValueError):
        pass
    return next((p for p in candidates if p.is_file()), None)


def memory_limit() -> int | None:
    """The memory the run can have before the kernel's OOM killer acts: the cgroup's limit or RAM."""
    limits = []
    oom_file = _cgroup_oom_file()
    if oom_file is not None:
        name = "memory.max" if oom_file.name == "memory.events" else "memory.limit_in_bytes"
        try:
            limits.append(int((oom_file.parent / name).read_text().strip()))
        except (OSError, ValueError):  # "max": no limit
            pass
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def oom_kill_count() -> int | None:
    """The kernel's count of OOM kills in this cgroup, where readable."""
    path = _cgroup_oom_file()
    if path is None:
        return None
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _wait(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    """Sleep until the process exits or the time passes; True when it has exited."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        select.select([fd], [], [], max(seconds, 0.0))
    finally:
        os.close(fd)
    return proc.poll() is not None


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """TERM the whole group, then KILL it after the grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    if not _wait(proc, TERM_GRACE_SECONDS):
        _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()


def run_worker(
    command: list[str],
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    tick: Callable[[], None] | None = None,
    tick_seconds: float = 0.5,
    cpus: set[int] | None = None,
    on_start: Callable[[int, float], None] | None = None,
    on_exit: Callable[[], None] | None = None,
) -> Finished:
    """Run the worker to its end. KeyboardInterrupt is turned into ``interrupted``.

    ``on_start(pid, t0)`` is called as soon as the worker exists (the sidecar starts there), and
    ``on_exit()`` once the leader has exited, before the rest of its group is killed, so a
    watcher can take its last look at children that are still alive.
    """
    oom_before = oom_kill_count()
    start = time.monotonic()
    t0 = time.time()
    with open(cwd / "stdout.log", "wb") as out, open(cwd / "stderr.log", "wb") as err:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=_preexec(cpus),
        )
    timed_out = interrupted = False
    try:
        if on_start is not None:
            on_start(proc.pid, t0)
        while not _wait(proc, min(tick_seconds, max(0.0, start + timeout - time.monotonic()))):
            if time.monotonic() - start >= timeout:
                timed_out = True
                _terminate(proc)
                break
            if tick is not None:
                tick()
    except KeyboardInterrupt:
        interrupted = True
        _terminate(proc)
    if on_exit is not None:
        on_exit()
    # The leader is gone; anything it left behind in its group goes too.
    _kill_group(proc.pid, signal.SIGKILL)
    oom_after = oom_kill_count()
    oom_kills = (oom_after - oom_before) if oom_before is not None and oom_after is not None else 0
    return Finished(
        returncode=proc.returncode,
        wall_seconds=time.monotonic() - start,
        timed_out=timed_out,
        interrupted=interrupted,
        oom_kills=oom_kills,
    )

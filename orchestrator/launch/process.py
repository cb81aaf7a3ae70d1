"""Start a worker in its own process group and supervise it until it ends, one way or another.

The parent sleeps on the child's pidfd (no busy-waiting); a timeout or an interruption kills the
whole group, TERM then KILL after a grace period; survivors of a finished leader are killed too,
and so is every process carrying the run's marker (orchestrator/launch/orphans.py), so nothing a run
started is left running. Its stdout and stderr are kept bounded (orchestrator/launch/capture.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from orchestrator.launch import capture, orphans

TERM_GRACE_SECONDS = 5.0
PR_SET_PDEATHSIG = 1
# Signals whose default action ends bench: each stops the sweep as Ctrl-C does, so the run in
# flight is ended and recorded (SIGHUP: the terminal closed, the ssh connection dropped).
STOP_SIGNALS = (
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGXCPU,
)
_BLOCKED = (*STOP_SIGNALS, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised where Ctrl-C's KeyboardInterrupt would be; its text is the signal's name."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


@contextlib.contextmanager
def stop_signals_interrupt(only_unhandled: bool = False) -> Iterator[set[str]]:
    """While inside, every stop signal raises `Interrupted`; yields the names of those it took.

    Main thread only (elsewhere Python cannot take signals). A signal ignored stays ignored:
    `nohup bench run` means to survive the hangup. With ``only_unhandled``, a signal somebody else
    handles (the sweep, Ray in a task's process) is left to them.
    """
    if threading.current_thread() is not threading.main_thread():
        yield set()
        return
    wanted = [sig for sig in STOP_SIGNALS if _takes(signal.getsignal(sig), only_unhandled)]
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in wanted}
    try:
        yield {sig.name for sig, handler in previous.items() if handler != _raise_interrupted}
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _takes(current: object, only_unhandled: bool) -> bool:
    if current == signal.SIG_IGN:
        return False
    return not only_unhandled or current in (signal.SIG_DFL, _raise_interrupted)


def interrupt_name(exc: KeyboardInterrupt) -> str:
    """What stopped bench: a signal's name, or Ctrl-C."""
    return str(exc) if isinstance(exc, Interrupted) else "Ctrl-C"


@dataclass(frozen=True)
class Finished:
    """How a worker process ended, as seen from outside."""

    returncode: int
    wall_seconds: float
    timed_out: bool = False
    interrupted: bool = False
    oom_kills: int = 0  # kernel OOM kills in our memory cgroup while the run lived
    interrupted_by: str | None = None  # "Ctrl-C" or the signal's name
    ended_by: int | None = None  # a replica bench ended because this other replica (its index) failed
    exited_at: float | None = None  # the wall-clock time (time.time()) bench saw it exit


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
        # The parent blocks the stop signals around the fork (see _spawn); the worker must not.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _BLOCKED)
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
    """TERM the whole group, then KILL it after the grace period, or at once on a second interrupt."""
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        if not _wait(proc, TERM_GRACE_SECONDS):
            _kill_group(proc.pid, signal.SIGKILL)
    except KeyboardInterrupt:
        _kill_group(proc.pid, signal.SIGKILL)
    proc.wait()


def end_all(pgid: int, token: str) -> None:
    """The leader is gone: what it left in its group goes too, and whatever else carries the marker."""
    _kill_group(pgid, signal.SIGKILL)
    orphans.kill_marked(token)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Ctrl-C and the stop signals held back, pending, until the block ends.

    For every fork bench makes: a stop signal between the fork and Popen's return would leave a
    child nobody knows of; and one that lands while CPython runs its at-fork callbacks (a
    `preexec_fn` makes it run them) raises inside one of them, where the interpreter prints
    "Exception ignored" and drops it, so the sweep would go on as if no Ctrl-C had been pressed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _BLOCKED)


def _spawn(
    command: list[str], env: dict[str, str], cwd: Path, cpus: set[int] | None
) -> tuple[subprocess.Popen[bytes], capture.Capture]:
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_preexec(cpus),
    )
    assert proc.stdout is not None and proc.stderr is not None
    streams = {
        proc.stdout.fileno(): capture.BoundedLog(cwd / "stdout.log"),
        proc.stderr.fileno(): capture.BoundedLog(cwd / "stderr.log"),
    }
    return proc, capture.Capture(streams, blocked=_BLOCKED)


def _end(
    proc: subprocess.Popen[bytes],
    streams: capture.Capture,
    token: str,
    on_exit: Callable[[], None] | None,
) -> None:
    if proc.returncode is None:  # anything else went wrong here: the run must not outlive it
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
    if on_exit is not None:
        on_exit()
    end_all(proc.pid, token)
    streams.close()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


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
    token: str | None = None,
) -> Finished:
    """Run the worker to its end. Ctrl-C or a stop signal (a KeyboardInterrupt) is turned into
    ``interrupted``, and a second one during the grace period kills at once.

    ``on_start(pid, t0)`` is called as soon as the worker exists (the sidecar starts there), and
    ``on_exit()`` once the leader has exited, before the rest of its group is killed, so a
    watcher can take its last look at children that are still alive. ``token`` marks every
    process of the run (a fresh one if None); whatever carries it is killed at the end.
    """
    member = Member(
        command,
        env,
        cwd,
        cpus,
        on_start=on_start,
        on_exit=on_exit,
    )
    return run_workers([member], timeout, tick, tick_seconds, token)[0]


@dataclass
class Member:
    """One process of a run: the worker, or one replica of a data-parallel run."""

    command: list[str]
    env: Mapping[str, str]
    cwd: Path
    cpus: set[int] | None = None
    on_start: Callable[[int, float], None] | None = None
    on_exit: Callable[[], None] | None = None


def _failed(proc: subprocess.Popen[bytes]) -> bool:
    return proc.returncode is not None and proc.returncode != 0


def run_workers(
    members: list[Member],
    timeout: float,
    tick: Callable[[], None] | None = None,
    tick_seconds: float = 0.5,
    token: str | None = None,
) -> list[Finished]:
    """Run every member to its end, each in its own process group, and return how each ended.

    The members of a data-parallel run live and die together: the first that fails (a non-zero
    exit or a signal) ends the others (TERM, then KILL after the grace period), and each of those is
    ``ended_by`` the failed one's index; a member that exits 0 leaves the others running; at the
    timeout, or on Ctrl-C or a stop signal, all of them are ended. Nothing any member started is left.
    """
    first = members[0]
    token = token or first.env.get(orphans.TOKEN_VARIABLE) or orphans.new_token()
    oom_before = oom_kill_count()
    start = time.monotonic()
    t0 = time.time()
    timed_out: set[int] = set()  # the members still running at the timeout
    interrupted_by = None
    procs: list[tuple[subprocess.Popen[bytes], capture.Capture]] = []
    exited_at: dict[int, float] = {}
    ended_by: dict[int, int] = {}
    with stop_signals_interrupt(only_unhandled=True) as taken:
        try:
            for member in members:
                env = {**member.env, orphans.TOKEN_VARIABLE: token}
                with signals_blocked():
                    procs.append(_spawn(member.command, env, member.cwd, member.cpus))
                if member.on_start is not None:
                    member.on_start(procs[-1][0].pid, t0)
            while True:
                live = [i for i, (p, _) in enumerate(procs) if i not in exited_at]
                if not live:
                    break
                left = max(0.0, start + timeout - time.monotonic())
                gone = _wait_any([procs[i][0] for i in live], live, min(tick_seconds, left))
                seen = time.monotonic() - start
                for i in gone:  # those seen in one wake-up ended together
                    exited_at[i] = seen
                failed = [i for i in exited_at if _failed(procs[i][0]) and i not in ended_by]
                if failed:
                    culprit = min(failed, key=lambda i: (exited_at[i], procs[i][0].returncode >= 0))
                    for i in live:
                        if i not in exited_at:
                            ended_by[i] = culprit
                            _terminate(procs[i][0])
                            exited_at[i] = time.monotonic() - start
                    continue
                if time.monotonic() - start >= timeout:
                    running = [i for i in range(len(procs)) if i not in exited_at]
                    _terminate_all([procs[i][0] for i in running])
                    timed_out.update(running)
                    break
                if tick is not None:
                    tick()
        except KeyboardInterrupt as exc:
            if not procs:
                raise
            interrupted_by = interrupt_name(exc)
            _terminate_all([p for p, _ in procs])
        finally:
            for member, (proc, streams) in zip(members, procs, strict=False):  # procs: those spawned
                _end(proc, streams, token, member.on_exit)
    if interrupted_by in taken:  # nobody above handles it: once all is ended, it ends the command
        raise Interrupted(interrupted_by)
    oom_after = oom_kill_count()
    oom_kills = (oom_after - oom_before) if oom_before is not None and oom_after is not None else 0
    wall = time.monotonic() - start
    return [
        Finished(
            returncode=proc.returncode,
            wall_seconds=exited_at.get(i, wall),
            timed_out=i in timed_out,
            interrupted=interrupted_by is not None,
            oom_kills=oom_kills,
            interrupted_by=interrupted_by,
            ended_by=ended_by.get(i),
            exited_at=t0 + exited_at[i] if i in exited_at else None,
        )
        for i, (proc, _) in enumerate(procs)
    ]


def _wait_any(procs: list[subprocess.Popen[bytes]], indices: list[int], seconds: float) -> list[int]:
    """Sleep until one of the processes exits or the time passes; the indices of those that exited."""
    if len(procs) == 1:
        return indices if _wait(procs[0], seconds) else []
    fds = []
    try:
        for proc in procs:
            with contextlib.suppress(AttributeError, OSError):
                fds.append(os.pidfd_open(proc.pid))
        if len(fds) == len(procs):
            select.select(fds, [], [], max(seconds, 0.0))
        else:  # no pidfds here: poll
            time.sleep(min(max(seconds, 0.0), 0.05))
    finally:
        for fd in fds:
            os.close(fd)
    return [i for i, proc in zip(indices, procs, strict=True) if proc.poll() is not None]


def _terminate_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """TERM every group at once, then KILL those still there after one grace period."""
    if len(procs) == 1:
        _terminate(procs[0])
        return
    for proc in procs:
        _kill_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_SECONDS
    try:
        for proc in procs:
            if not _wait(proc, max(0.0, deadline - time.monotonic())):
                _kill_group(proc.pid, signal.SIGKILL)
    except KeyboardInterrupt:
        for proc in procs:
            _kill_group(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()

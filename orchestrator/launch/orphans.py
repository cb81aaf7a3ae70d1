"""Find and end every process a run started, wherever it went.

Killing the worker's process group misses a process that moved to a session of its own (a
daemonized helper, ``setsid``). Every process of a run carries a marker in its environment,
``BENCH_RUN_TOKEN=<random>``, which it inherits and which /proc/PID/environ shows for our own
uid: a scan of /proc finds them all. A pid is signalled through a pidfd opened *before* the
marker is checked again, so a pid reused in between is never killed.

What stays out of reach: a process that replaced its environment (an exec with a new one) and
left the group, or one of another user.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

TOKEN_VARIABLE = "BENCH_RUN_TOKEN"
# A process forking as fast as it is killed is chased this many scans, then left.
KILL_ROUNDS = 20


def new_token() -> str:
    return secrets.token_hex(16)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _carries(pid: int, needle: bytes) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, a zombie, or not ours
        return False
    return needle in environ.split(b"\0")


def _needle(token: str) -> bytes:
    return f"{TOKEN_VARIABLE}={token}".encode()


def marked(token: str) -> list[int]:
    """The live processes of our uid whose environment carries the run's marker."""
    needle, uid, me = _needle(token), os.getuid(), os.getpid()
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if _carries(int(entry.name), needle):
            found.append(int(entry.name))
    return found


def _kill_verified(pid: int, needle: bytes) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if not _carries(pid, needle):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def kill_marked(token: str) -> set[int]:
    """SIGKILL every process carrying the run's marker, until a scan finds no new one; their pids."""
    needle, killed = _needle(token), set[int]()
    for _ in range(KILL_ROUNDS):
        # One killed a moment ago may still show its environment while it exits: not new.
        found = [pid for pid in marked(token) if pid not in killed]
        if not found:
            break
        killed.update(pid for pid in found if _kill_verified(pid, needle))
    return killed


def kill_group_if_ours(pgid: int, token: str) -> bool:
    """SIGKILL the process group ``pgid`` if one of its members carries the run's marker (so the
    number is still that run's group), reaching members that dropped the marker; True if sent."""
    needle = _needle(token)
    for pid in marked(token):
        try:
            if os.getpgid(pid) == pgid and _carries(pid, needle):
                os.killpg(pgid, signal.SIGKILL)
                return True
        except OSError:
            continue
    return False

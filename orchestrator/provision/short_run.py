"""Run a short outside program (an interpreter's version check) and keep a bounded part of its output.

`subprocess.run(..., capture_output=True, timeout=...)` trusts the program: it keeps every byte
it prints (an interpreter that prints gigabytes grows bench with it), decodes strictly (a byte
that is not UTF-8 raises), and after a timeout waits for the pipes to close, which a grandchild
holding them open can make last forever. Here the program runs in a process group of its own;
each stream keeps at most ``limit`` bytes (the rest is read and dropped); at the deadline, or as
soon as the program has exited, its whole group is killed, so no descendant holds bench up.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass

OUTPUT_LIMIT = 1 << 20


@dataclass(frozen=True)
class ShortRun:
    returncode: int
    stdout: str
    stderr: str
    cut: bool  # more was printed than was kept


def run_short(cmd: list[str], timeout: float, limit: int = OUTPUT_LIMIT) -> ShortRun:
    """The program's exit status and the first ``limit`` bytes of each stream (UTF-8, errors
    replaced). Raises OSError if it cannot start, subprocess.TimeoutExpired past ``timeout``."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    kept = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    cut = False
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            for stream in kept:
                selector.register(stream, selectors.EVENT_READ)  # type: ignore[arg-type]
            while selector.get_map():
                if proc.poll() is not None:
                    _drain(selector, kept, limit)
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(cmd, timeout)
                for key, _ in selector.select(min(left, 0.2)):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    buffer = kept[key.fileobj]  # type: ignore[index]
                    room = max(0, limit - len(buffer))
                    buffer += chunk[:room]
                    cut = cut or len(chunk) > room
        # Both streams closed: the program is ending (or closed them and goes on: the deadline holds).
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        _kill_group(proc.pid)
        proc.wait()
        for stream in kept:
            stream.close()  # type: ignore[union-attr]
    stdout, stderr = (bytes(b).decode("utf-8", "replace") for b in kept.values())
    return ShortRun(proc.returncode, stdout, stderr, cut)


def _drain(selector: selectors.BaseSelector, kept: dict, limit: int) -> None:
    """What the exited program left in its pipes, without waiting on a descendant that holds them."""
    for key, _ in selector.select(0):
        chunk = os.read(key.fd, limit)
        buffer = kept[key.fileobj]
        buffer += chunk[: max(0, limit - len(buffer))]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

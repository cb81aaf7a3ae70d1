"""The worker's stdout and stderr, kept bounded on disk while the run writes them.

A worker that writes 10 GB must not fill the disk, and what explains how it ended is at the end
(a faulthandler dump, an out-of-memory line). So each stream's first ``HEAD_BYTES`` go to its log
as they come; after that the stream goes to tail segments of about ``TAIL_BYTES`` each, of which
only the newest two are kept: the last ``TAIL_BYTES`` are always on disk, even if bench is killed.
When the run ends (or the next bench finds a run a killed bench left), `finalize` appends a marker
line ``[bench: N bytes cut here]`` and the last ``TAIL_BYTES`` to the log, and removes the segments.

One thread reads both pipes, sleeping in poll(): no busy-waiting, and a worker that writes a lot
is slowed only by what the disk takes.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

HEAD_BYTES = 8 << 20
TAIL_BYTES = 8 << 20
CHUNK = 1 << 16
# A process the run started that escaped every kill may still hold a pipe: stop reading then.
DRAIN_SECONDS = 2.0
POLL_SECONDS = 0.5
MARKER = "[bench: {} bytes cut here]"

log = logging.getLogger(__name__)


def _segment_name(log_path: Path, offset: int) -> Path:
    return log_path.with_name(f"{log_path.name}.tail-{offset}")


def segments(log_path: Path) -> list[tuple[int, Path]]:
    """The tail segments of a log, by the stream offset each starts at, oldest first."""
    found = []
    for path in log_path.parent.glob(f"{log_path.name}.tail-*"):
        offset = path.name.rsplit("-", 1)[1]
        if offset.isdigit():
            found.append((int(offset), path))
    return sorted(found)


class BoundedLog:
    """One stream: its head in the log, its tail in rotating segments (unbuffered, so a killed
    bench loses nothing it had read)."""

    def __init__(self, path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.path, self.head, self.tail = path, head, tail
        self.file = open(path, "wb", buffering=0)  # noqa: SIM115  (closed by close())
        self.size = 0
        self.segment: BinaryIO | None = None
        self.kept: list[Path] = []

    def write(self, data: bytes) -> None:
        room = self.head - self.size
        if room > 0:
            self.file.write(data[:room])
        rest = data[room:] if room > 0 else data
        self.size += len(data)
        if rest:
            self._to_tail(rest, self.size - len(rest))

    def _to_tail(self, data: bytes, offset: int) -> None:
        if self.segment is None or self.segment.tell() >= self.tail:
            self._next_segment(offset)
        assert self.segment is not None
        self.segment.write(data)

    def _next_segment(self, offset: int) -> None:
        if self.segment is not None:
            self.segment.close()
        while len(self.kept) >= 2:  # the one before the newest still holds part of the last TAIL bytes
            self.kept.pop(0).unlink(missing_ok=True)
        path = _segment_name(self.path, offset)
        self.segment = open(path, "wb", buffering=0)  # noqa: SIM115
        self.kept.append(path)

    def close(self) -> None:
        self.file.close()
        if self.segment is not None:
            self.segment.close()
        finalize(self.path, self.tail)


def finalize(path: Path, tail: int = TAIL_BYTES) -> int:
    """Append what the segments hold of the stream's last ``tail`` bytes to the log, after the
    marker line, and remove them; returns how many bytes were cut (0: the log is whole)."""
    parts = segments(path)
    if not parts:
        return 0
    try:
        head = path.stat().st_size
        end = parts[-1][0] + parts[-1][1].stat().st_size
        keep_from = max(head, end - tail, parts[0][0])
        with open(path, "ab") as out:
            cut = keep_from - head
            if cut > 0:
                out.write(("\n" + MARKER.format(cut) + "\n").encode())
            for offset, part in parts:
                _copy_from(part, max(0, keep_from - offset), out)
    except OSError as exc:  # a log that cannot be completed is evidence lost, not a failed run
        log.warning("could not complete %s: %s", path, exc)
        return 0
    for _, part in parts:
        part.unlink(missing_ok=True)
    return cut


def _copy_from(path: Path, start: int, out: BinaryIO) -> None:
    with open(path, "rb") as f:
        f.seek(start)
        while chunk := f.read(1 << 20):
            out.write(chunk)


class Capture:
    """Reads the worker's stdout and stderr pipes into bounded logs until both close."""

    def __init__(self, streams: dict[int, BoundedLog], blocked: Iterable[int] = ()) -> None:
        """``blocked``: the signals bench handles, blocked in the reading thread so that the kernel
        delivers them to the main thread alone. Were this thread to take a Ctrl-C, Python would
        raise it in the main thread at once, even while the main thread holds the signals back
        around a fork (process.signals_blocked): a child nobody knows of."""
        self.streams = streams
        self.stop = threading.Event()
        self.blocked = set(blocked)
        self.thread = threading.Thread(target=self._run, name="bench-capture", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        if self.blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, self.blocked)
        with selectors.DefaultSelector() as selector:
            for fd in self.streams:
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ)
            open_fds = set(self.streams)
            while open_fds and not self.stop.is_set():
                for key, _ in selector.select(POLL_SECONDS):
                    fd = int(key.fd)
                    if not self._read(fd):
                        selector.unregister(fd)
                        open_fds.discard(fd)

    def _read(self, fd: int) -> bool:
        """False once the pipe is closed by every writer."""
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not data:
            return False
        try:
            self.streams[fd].write(data)
        except OSError as exc:  # disk full: drop the rest of the stream, keep the run going
            log.warning("could not write %s: %s", self.streams[fd].path, exc)
        return True

    def close(self, wait: float = DRAIN_SECONDS) -> None:
        """Wait for the pipes to close (every writer gone), at most ``wait`` seconds, then
        complete the logs."""
        self.thread.join(wait)
        self.stop.set()
        self.thread.join()
        for stream in self.streams.values():
            stream.close()

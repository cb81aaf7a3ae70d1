"""Progress over a sweep: one live line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from orchestrator.config import RunConfig
from orchestrator.terminal import safe, safe_line


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def _last_event(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 2048))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            return event
    return None


@dataclass
class _Running:
    label: str
    run_dir: Path
    start: float
    node: str | None


class Progress:
    """done/total, what runs where and what it is doing, elapsed time and ETA.

    The local executor runs one configuration at a time; the Ray executor several, each on a node
    (``node``), so the lines name the node and the ETA comes from the sweep's throughput.
    """

    def __init__(
        self, total: int, stream: TextIO | None = None, live: bool | None = None, follow: bool = False
    ) -> None:
        out = stream or sys.stderr
        self.stream: TextIO | None = out
        self.live = out.isatty() if live is None else live
        self.total, self.done, self.started = total, 0, 0
        self.start = time.monotonic()
        self.durations: list[float] = []
        self.follow = follow
        self._offsets: dict[Path, int] = {}
        self.running: dict[Path, _Running] = {}
        self.most_at_once = 0
        self.label = ""
        self.run_dir: Path | None = None
        self.run_start = self.start

    def _eta(self) -> str:
        if not self.durations:
            return "?"
        if self.most_at_once > 1:  # runs overlap: the rate of the sweep so far, not the mean run
            return _clock((time.monotonic() - self.start) / self.done * (self.total - self.done))
        mean = sum(self.durations) / len(self.durations)
        return _clock(mean * (self.total - self.done))

    def begin(
        self, config: RunConfig, run_dir: Path, node: str | None = None, since: float | None = None
    ) -> None:
        """``since``: when it started (time.time()), where that was before we learnt of it."""
        elapsed = max(0.0, time.time() - since) if since is not None else 0.0
        self.label, self.run_dir, self.run_start = config.label(), run_dir, time.monotonic() - elapsed
        self.running[run_dir] = _Running(self.label, run_dir, self.run_start, node)
        self.most_at_once = max(self.most_at_once, len(self.running))
        self.started += 1
        if not self.live:
            self._line(
                f"[{self.started}/{self.total}] {self.label}: running" + (f" on {node}" if node else "")
            )
        self.tick()

    def tick(self) -> None:
        if self.follow and self.run_dir is not None:
            self._echo_logs()
        if not self.live:
            return
        text = (
            f"[{self.done}/{self.total}] {_clock(time.monotonic() - self.start)} elapsed, "
            f"ETA {self._eta()} | {self._what()}"
        )
        width = shutil.get_terminal_size((100, 20)).columns
        # Our own sequence clears the line; the text (a phase name, a label) may send none.
        self._write("\r\x1b[2K" + safe_line(text)[: width - 1])

    def _what(self) -> str:
        if len(self.running) > 1 or any(r.node for r in self.running.values()):
            return f"{len(self.running)} running: " + ", ".join(
                f"{r.label} on {r.node}" for r in self.running.values()
            )
        where = ""
        event = _last_event(self.run_dir / "events.jsonl") if self.run_dir else None
        if event:
            where = event.get("phase") or event.get("event", "")
            if event.get("event") == "step":
                where = (
                    f"epoch {event.get('epoch')} step {event.get('step')}"
                    if event.get("epoch")
                    else f"warmup step {event.get('step')}"
                )
        return f"{self.label} {safe_line(where)[:80]}"

    def end(self, outcome: str, run_id: int, detail: str = "", run_dir: Path | None = None) -> None:
        if self.follow and self.run_dir is not None:
            self._echo_logs()
        key = run_dir if run_dir in self.running else next(reversed(self.running), None)
        entry = (
            self.running.pop(key) if key is not None else _Running(self.label, Path(), self.run_start, None)
        )
        self.done += 1
        seconds = time.monotonic() - entry.start
        self.durations.append(seconds)
        node = f" on {entry.node}" if entry.node else ""
        text = f"[{self.done}/{self.total}] {entry.label}: {outcome} in {seconds:.1f} s (run {run_id})"
        # An end line quotes the outcome's reason: a worker's exception, a line of its stderr.
        text = safe_line(text + node + detail)
        self._line(("\r\x1b[2K" if self.live else "") + text)

    def note(self, text: str) -> None:
        """A line of its own between runs (--wait-idle, --retry-disturbed), over the live line."""
        self._line(("\r\x1b[2K" if self.live else "") + safe_line(text))

    def _line(self, text: str) -> None:
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        """Progress is for a reader: a terminal that went away (SIGHUP, EIO) must not stop the sweep."""
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.stream = None

    def _echo_logs(self) -> None:
        """In the foreground (bench rerun), show what the worker printed as it prints it."""
        assert self.run_dir is not None
        for name in ("stdout.log", "stderr.log"):
            path = self.run_dir / name
            try:
                with open(path, "rb") as f:
                    f.seek(self._offsets.get(path, 0))
                    data = f.read()
                    self._offsets[path] = f.tell()
            except OSError:
                continue
            if data:  # the worker's output, escapes shown, not obeyed
                self._write(("\r\x1b[2K" if self.live else "") + safe(data.decode("utf-8", "replace")))

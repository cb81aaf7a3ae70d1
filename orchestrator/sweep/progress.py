"""Progress over a sweep: one live line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from orchestrator.config.run_config import RunConfig
from orchestrator.sweep.eta import Eta, History
from orchestrator.sweep.eta import clock as _clock
from orchestrator.text.terminal import safe, safe_line

_READ_AT_MOST = 1 << 20  # bytes of new events read per redraw; past that, only the newest
_TAIL = 64 << 10


@dataclass
class _Events:
    """The run's events file, read on from where the last redraw stopped: the newest phase event
    (which says how many steps the epoch has) and the newest event of all."""

    path: Path
    offset: int = 0
    partial: bytes = b""
    phase: dict[str, Any] = field(default_factory=dict)
    last: dict[str, Any] = field(default_factory=dict)

    def read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size - self.offset > _READ_AT_MOST:  # a flood of step events: skip to the end
                    self.offset, self.partial = size - _TAIL, b""
                    f.seek(self.offset)
                    f.readline()  # most likely the rest of a line cut in two
                else:
                    f.seek(self.offset)
                data = self.partial + f.read()
                self.offset = f.tell()
        except OSError:
            return
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            self._take(line)
        if len(self.partial) > _TAIL:  # no event is that long: bytes that will never parse
            self.partial = b""
        if self.partial:  # a last line whose newline is not there yet: kept, and read again
            self._take(self.partial)

    def _take(self, line: bytes) -> None:
        try:
            event = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        self.last = event
        if event.get("event") == "phase":
            self.phase = event


def _count(value: Any) -> int | None:
    """A number of steps or epochs from an event (the worker's text, so anything)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def where_in_run(events: _Events, config: RunConfig | None) -> str:
    """`warmup step 3/5` (`warmup step 7 (until steady, at most 55)` past warmup_steps),
    `epoch 2/3 step 46/120` (with `repeat 1/2` when there are repeats), or
    the phase; N is left out where the events do not say it."""
    event = events.last
    if event.get("event") != "step":
        where = event.get("phase") or event.get("event", "")
        return where if isinstance(where, str) else safe_line(where)
    step, epoch = _count(event.get("step")), _count(event.get("epoch"))
    steps = _count(events.phase.get("steps"))
    of_steps = "step" + (f" {step}" if step is not None else "") + (f"/{steps}" if steps else "")
    if not epoch:
        most = _count(events.phase.get("most"))
        if steps and step is not None and step > steps:  # past warmup_steps, until steady
            return f"warmup step {step} (until steady" + (f", at most {most})" if most else ")")
        return f"warmup {of_steps}"
    epochs = f"/{config.epochs}" if config is not None else ""
    repeat = _count(events.phase.get("repeat"))
    repeats = (
        f"repeat {repeat + 1}/{config.repeats} "
        if config is not None and config.repeats > 1 and repeat is not None
        else ""
    )
    return f"{repeats}epoch {epoch}{epochs} {of_steps}"


@dataclass
class _Running:
    label: str
    run_dir: Path
    start: float
    node: str | None
    config: RunConfig | None = None


class Progress:
    """done/total, what runs where and what it is doing, elapsed time and ETA.

    The local executor runs one configuration at a time; the Ray executor several, each on a node
    (``node``), so the lines name the node and the ETA comes from the sweep's throughput.
    """

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        live: bool | None = None,
        follow: bool = False,
        plan: Sequence[RunConfig] = (),
        history: History | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``plan``: the configurations to run, ``history``: what earlier runs took (eta.py); without
        them every run is one without history. ``clock``: seconds, monotonic (a test's own)."""
        out = stream or sys.stderr
        self.stream: TextIO | None = out
        self.live = out.isatty() if live is None else live
        self.total, self.done, self.started = total, 0, 0
        self.clock = clock
        self.start = clock()
        self.eta = Eta(total, plan, history)
        self._events: _Events | None = None
        self.durations: list[float] = []
        self.follow = follow
        self._offsets: dict[Path, int] = {}
        self.running: dict[Path, _Running] = {}
        self.most_at_once = 0
        self.label = ""
        self.run_dir: Path | None = None
        self.run_start = self.start

    def _eta(self) -> str:
        """Recomputed at every redraw: the time runs in flight have run so far counts."""
        now = self.clock()
        running = [(r.config, now - r.start) for r in self.running.values()]
        return self.eta.text(running, at_once=self.most_at_once)

    def begin(
        self, config: RunConfig, run_dir: Path, node: str | None = None, since: float | None = None
    ) -> None:
        """``since``: when it started (time.time()), where that was before we learnt of it."""
        elapsed = max(0.0, time.time() - since) if since is not None else 0.0
        self.label, self.run_dir, self.run_start = config.label(), run_dir, self.clock() - elapsed
        self.running[run_dir] = _Running(self.label, run_dir, self.run_start, node, config)
        self.eta.begin(config)
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
            f"[{self.done}/{self.total}] {_clock(self.clock() - self.start)} elapsed, "
            f"{self._eta()} | {self._what()}"
        )
        width = shutil.get_terminal_size((100, 20)).columns
        # Our own sequence clears the line; the text (a phase name, a label) may send none.
        self._write("\r\x1b[2K" + safe_line(text)[: width - 1])

    def _what(self) -> str:
        if len(self.running) > 1 or any(r.node for r in self.running.values()):
            return f"{len(self.running)} running: " + ", ".join(
                f"{r.label} on {r.node}" for r in self.running.values()
            )
        if self.run_dir is None:
            return self.label
        path = self.run_dir / "events.jsonl"
        if self._events is None or self._events.path != path:
            self._events = _Events(path)
        self._events.read()
        entry = self.running.get(self.run_dir)
        where = where_in_run(self._events, entry.config if entry else None)
        return f"{self.label} {safe_line(where)[:80]}"

    def end(self, outcome: str, run_id: int | str, detail: str = "", run_dir: Path | None = None) -> None:
        if self.follow and self.run_dir is not None:
            self._echo_logs()
        key = run_dir if run_dir in self.running else next(reversed(self.running), None)
        entry = (
            self.running.pop(key) if key is not None else _Running(self.label, Path(), self.run_start, None)
        )
        self.done += 1
        seconds = self.clock() - entry.start
        self.durations.append(seconds)
        self.eta.end(entry.config, outcome, seconds)
        node = f" on {entry.node}" if entry.node else ""
        which = f"run {run_id}" if isinstance(run_id, int) else run_id  # or why it has no id yet
        text = f"[{self.done}/{self.total}] {entry.label}: {outcome} in {seconds:.1f} s ({which})"
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

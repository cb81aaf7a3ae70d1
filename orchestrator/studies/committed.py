"""A study's committed results (`results/*.json`, files `bench export --portable` wrote), summed up
for `bench study list`: per file, how many runs, at which scale(s), when they ran, on what machine.

The files are read as `bench import` reads them (storage/transfer.read: size, JSON, format,
version, schema), then only the few fields the line needs, each checked for its type: a results
folder may hold a damaged or a hostile file, and that file is a one-line note in the study's row,
never a traceback and never the end of the listing. Nothing is imported into a database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.values import cut
from orchestrator.errors import BenchError
from orchestrator.storage import transfer
from orchestrator.text.terminal import safe_line

MAX_FILES = 100  # a study commits a file or two a scale
# A listing reads every file: the shipped ones are 1-2 MiB, and one far larger is not a study's
# results (bench import still reads one, up to transfer.MAX_BYTES).
MAX_BYTES = 64 << 20
# A study's sweep name: "study NAME/SCALE: MATRIX" (spec.StudyMatrix.sweep_name).
SWEEP_NAME = re.compile(r"study ([a-z0-9][a-z0-9_-]*)/([a-z0-9][a-z0-9_-]*): ")


@dataclass(frozen=True)
class Result:
    """One results file: what it holds, or why it could not be read (`problem`)."""

    file: str
    runs: int = 0
    scales: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()  # the days its sweeps started, YYYY-MM-DD
    machines: tuple[str, ...] = ()
    problem: str = ""

    def line(self) -> str:
        if self.problem:
            return f"{self.file}: {self.problem}"
        scales = ", ".join(self.scales) or "no study sweep"
        return (
            f"{self.file}: {self.runs} runs, scale {scales}, ran {', '.join(self.dates) or '?'}, "
            f"on {'; '.join(self.machines) or '?'}"
        )


def results(folder: Path, study: str) -> list[Result]:
    """Each file of the study's results/ folder, by name (none where it has no such folder)."""
    base = folder / "results"
    if not base.is_dir():
        return []
    files = sorted(base.glob("*.json"))
    found = [summary(p, study) for p in files[:MAX_FILES]]
    if len(files) > MAX_FILES:
        found.append(Result(f"{len(files) - MAX_FILES} more files", problem="not read"))
    return found


def summary(path: Path, study: str) -> Result:
    name = safe_line(path.name)
    try:
        if path.stat().st_size > MAX_BYTES:
            return Result(name, problem=f"not read: larger than {MAX_BYTES >> 20} MiB")
        document = transfer.read(path)
    except (BenchError, OSError, RecursionError) as exc:  # a deeply nested hostile file
        # transfer.read names the file first; the row names it already.
        text = str(exc).removeprefix(f"{path}: ")
        return Result(name, problem=f"damaged: {cut(text, 160)}")
    runs, scales, dates, machines = 0, set(), set(), set()
    for index, item in enumerate(document["sweeps"], start=1):
        sweep = item.get("sweep") if isinstance(item, Mapping) else None
        listed = item.get("runs") if isinstance(item, Mapping) else None
        if not isinstance(sweep, Mapping) or not isinstance(listed, list):
            return Result(name, problem=f"damaged: sweep {index} is not an exported sweep")
        runs += len(listed)
        scale = _scale(sweep.get("name"), study)
        if scale:
            scales.add(scale)
        started = sweep.get("started_at")
        if isinstance(started, str) and re.match(r"\d{4}-\d\d-\d\d", started):
            dates.add(started[:10])
        machine = sweep.get("machine")
        if isinstance(machine, str) and machine:
            machines.add(cut(machine, 80))
    return Result(name, runs, tuple(sorted(scales)), tuple(sorted(dates)), tuple(sorted(machines)))


def _scale(name: Any, study: str) -> str | None:
    """The scale a sweep of this study ran at, from its name; None for another study's or none."""
    if not isinstance(name, str):
        return None
    match = SWEEP_NAME.match(name)
    return match.group(2) if match and match.group(1) == study else None

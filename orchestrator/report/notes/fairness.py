"""Footnotes for `bench report --table comparison`: where a framework's result is known to be
limited by the framework (its defaults, its kernels), not by bench's port (docs/fairness.md).

A note is a rule: which framework, model and setting it explains, and the section of
docs/fairness.md that holds the explanation (linked, not copied). Setting notes are decided from
what the configuration's last run recorded (its `environments` row: the threads the framework
applied, its `settings`, the cores it saw), so a note follows the run, not the framework's name.
A note's figures are computed from the cells it annotates (tables/comparison.py prints them above it),
never written in the code; a cell more than UNEXPLAINED_ABOVE times the fastest framework's time
at the same settings that no note explains is marked unexplained.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import RECURRENT_MODELS
from orchestrator.config.values import cpu_set
from orchestrator.storage.db import Database
from workers import frameworks
from workers.models import CHANNELS_LAST_MIN_SIZE

DOC = "docs/fairness.md"
# A cell this many times the fastest framework's time, or more, needs an explanation.
UNEXPLAINED_ABOVE = 1.5


def link(section: str) -> str:
    """Where a section of docs/fairness.md is, as its heading's anchor (GitHub's rule)."""
    anchor = re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-")
    return f"{DOC}#{anchor}"


@dataclass(frozen=True)
class Note:
    key: str  # a short name, kept in CSV and JSON records
    text: str  # the footnote, with the link to where in docs/fairness.md the evidence is


def facts(db: Database, run_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """What each run recorded of its environment: threads applied, settings, cores seen."""
    ids = sorted(set(run_ids))
    e = db.environments
    out: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):
        query = sa.select(e.c.run_id, e.c.threads_applied, e.c.extra, e.c.cpu_count).where(
            e.c.run_id.in_(ids[start : start + 500])
        )
        for row in db.rows(query):
            extra = json_object(row["extra"])
            out[row["run_id"]] = {
                "threads": json_object(row["threads_applied"]),
                "settings": extra.get("settings") if isinstance(extra.get("settings"), dict) else {},
                "cpu_count": row["cpu_count"],
            }
    return out


def json_object(text: Any) -> dict[str, Any]:
    """A stored JSON object's dict; {} for anything else (a row any program wrote)."""
    try:
        value = json.loads(text) if text else None
    except (TypeError, ValueError, RecursionError):  # a row any program wrote
        return {}
    return value if isinstance(value, dict) else {}


def notes_for(summary: dict[str, Any], fact: dict[str, Any] | None, ratio: float | None = None) -> list[Note]:
    """The footnotes that apply to one configuration's summary, given its last run's facts and
    its multiple of the fastest framework's time (None where nothing compares with it)."""
    if fact is None or summary.get("device") != "cpu" or not summary.get("ok_runs"):
        return []
    notes = [note for rule in SETTING_RULES if (note := rule(summary, fact)) is not None]
    gap = _known_gap(summary, ratio)
    return notes + ([gap] if gap else [])


def _cores(summary: dict[str, Any], fact: dict[str, Any]) -> int | None:
    if summary.get("cpus"):
        return len(cpu_set(summary["cpus"]))
    count = fact.get("cpu_count")
    return count if isinstance(count, int) and count > 0 else None


# The compute pools each framework reports in threads_applied: (key, what the pool runs), from the
# one registry of what bench knows of each framework.
POOLS: dict[str, tuple[frameworks.Pool, ...]] = {f.name: f.pools for f in frameworks.FRAMEWORKS if f.pools}


def _threads(summary: dict[str, Any], fact: dict[str, Any]) -> Note | None:
    """A compute pool ran fewer threads than the cores (threads unset: the framework's default)
    or than the threads asked for (the framework did not apply them)."""
    cores = _cores(summary, fact)
    asked = summary.get("threads") or 0
    wanted = min(asked, cores) if asked and cores else (asked or cores)
    threads = fact.get("threads") or {}
    short = []
    for key, what, where in POOLS.get(summary["framework"], ()):
        value = threads.get(key)
        if wanted and isinstance(value, int) and 0 < value < wanted:
            short.append(f"{value} {what}{'s' if value > 1 else ''}{where}")
    if not short:
        return None
    ran = f"{summary['framework']} ran {' and '.join(short)}"
    if asked:
        return Note(
            "threads-not-applied",
            f"{ran} where {asked} were asked for: the framework did not apply them; {link('Threads')}",
        )
    return Note(
        "default-threads",
        f"{ran} on {cores} cores: its own default, as `threads` was not set; set `threads` to "
        f"compare frameworks on equal threads; {link('Threads')}",
    )


def _pytorch_nchw(summary: dict[str, Any], fact: dict[str, Any]) -> Note | None:
    """PyTorch on the CPU in NCHW where bench's default is channels_last (the run switched it)."""
    if summary["framework"] != "pytorch" or summary.get("model") in RECURRENT_MODELS:
        return None
    if (summary.get("image_size") or 0) < CHANNELS_LAST_MIN_SIZE:
        return None
    if (fact.get("settings") or {}).get("memory_format") != "contiguous_format":
        return None
    return Note(
        "pytorch-nchw",
        "pytorch ran its image batches and weights in NCHW (BENCH_TORCH_MEMORY_FORMAT="
        f"contiguous_format); bench's default on the CPU from {CHANNELS_LAST_MIN_SIZE} px is "
        f"channels_last, measured faster for ResNet50 and VGG16 there; {link('PyTorch')}",
    )


@dataclass(frozen=True)
class Gap:
    """A gap between frameworks measured and explained in docs/fairness.md (workers/frameworks.py's
    Gap, with the framework it is of): this framework, on the CPU, training these models at image
    sizes from min_image_size to max_image_size, was slow for this cause."""

    key: str
    framework: str
    models: tuple[str, ...]
    min_image_size: int
    cause: str
    section: str  # the heading in docs/fairness.md
    max_image_size: int = 1 << 30


# Each framework's measured gaps, read from the registry; a framework's own are in the order it
# lists them (the first that applies is the note).
GAPS: tuple[Gap, ...] = tuple(
    Gap(framework=f.name, **gap._asdict()) for f in frameworks.FRAMEWORKS for gap in f.gaps
)


def _known_gap(summary: dict[str, Any], ratio: float | None) -> Note | None:
    """The measured gap that explains this cell, where the cell is one to explain."""
    if ratio is None or ratio < UNEXPLAINED_ABOVE:
        return None
    for gap in GAPS:
        if (
            summary["framework"] == gap.framework
            and summary.get("model") in gap.models
            and gap.min_image_size <= (summary.get("image_size") or 0) <= gap.max_image_size
            and (summary.get("task") or "train") == "train"
        ):
            return Note(gap.key, f"{gap.framework}: {gap.cause}; {link(gap.section)}")
    return None


SETTING_RULES: tuple[Callable[[dict[str, Any], dict[str, Any]], Note | None], ...] = (
    _threads,
    _pytorch_nchw,
)

"""Footnotes for `bench report --table comparison`: where a framework's result is known to be
limited by the framework (its defaults, its kernels), not by bench's port (docs/fairness.md).

Each note is decided from what the configuration's last run recorded (its `environments` row:
the threads the framework applied, its `settings`, the cores it saw), so a note follows the run,
not the framework's name: a run that changed the setting gets no note.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orchestrator.config import RECURRENT_MODELS, cpu_set
from orchestrator.db import Database
from workers.adapters.pytorch import CHANNELS_LAST_MIN_SIZE

DOC = "docs/fairness.md"


@dataclass(frozen=True)
class Note:
    key: str  # a short name, kept in CSV and JSON records
    text: str  # the footnote, with where in docs/fairness.md the evidence is


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
            extra = _json(row["extra"])
            out[row["run_id"]] = {
                "threads": _json(row["threads_applied"]),
                "settings": extra.get("settings") if isinstance(extra.get("settings"), dict) else {},
                "cpu_count": row["cpu_count"],
            }
    return out


def _json(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else None
    except (TypeError, ValueError, RecursionError):  # a row any program wrote
        return {}
    return value if isinstance(value, dict) else {}


def notes_for(summary: dict[str, Any], fact: dict[str, Any] | None) -> list[Note]:
    """The footnotes that apply to one configuration's summary, given its last run's facts."""
    if fact is None or summary.get("device") != "cpu" or not summary.get("ok_runs"):
        return []
    return [note for rule in RULES if (note := rule(summary, fact)) is not None]


def _cores(summary: dict[str, Any], fact: dict[str, Any]) -> int | None:
    if summary.get("cpus"):
        return len(cpu_set(summary["cpus"]))
    count = fact.get("cpu_count")
    return count if isinstance(count, int) and count > 0 else None


# The compute pools each framework reports in threads_applied: (key, what the pool runs).
POOLS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "pytorch": (("intra_op", "intra-op thread", ""),),
    "tensorflow": (("intra_op_effective", "intra-op thread", ""),),
    "mxnet": (("intra_op", "OpenMP thread", ""),),
    "paddle": (("intra_op", "thread", ""),),
    "singa": (("openmp", "OpenMP thread", ""), ("openblas", "OpenBLAS thread", " (its dense layers)")),
}


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
            f'{ran} where {asked} were asked for: the framework did not apply them ({DOC}, "Threads")',
        )
    return Note(
        "default-threads",
        f"{ran} on {cores} cores: its own default, as `threads` was not set; set `threads` to "
        f'compare frameworks on equal threads ({DOC}, "Threads")',
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
        "channels_last, 1.1-1.3x faster for ResNet50 at 64-224 px and VGG16 at 224 px "
        f'({DOC}, "PyTorch")',
    )


@dataclass(frozen=True)
class Gap:
    """A gap measured and explained in docs/fairness.md: this framework, on the CPU, training
    these models at image sizes from min_image_size to max_image_size, was this many times the
    fastest framework."""

    key: str
    framework: str
    models: tuple[str, ...]
    min_image_size: int
    text: str
    max_image_size: int = 1 << 30


# Measured 2026-11-23 on a 2-vCPU AMD EPYC, threads 2, batch 32 at 224 px and 16 at 32 px
# (docs/fairness.md, "Gaps between frameworks"): the multiple of the fastest framework's time, and
# what the operator trace (`trace: kernels`) shows the extra time is spent on.
GAPS: tuple[Gap, ...] = (
    Gap(
        "paddle-cpu-convolution",
        "paddle",
        ("resnet50", "vgg16"),
        224,
        "paddle: 3.5x (ResNet50) and 4.3x (VGG16) the fastest framework's time at 224 px on the CPU; "
        "its convolutions, 87% of its operator time, take 4.4x MXNet's: Paddle's own CPU "
        "convolution kernels (with its oneDNN flags on it was 1.2x slower still; its own zoo "
        f'model is as slow) ({DOC}, "Paddle")',
    ),
    Gap(
        "singa-cpu-operators",
        "singa",
        ("resnet50", "vgg16"),
        224,
        "singa: 2.2x the fastest framework's time at 224 px on the CPU: its ReLU, addition and "
        "batch-norm operators take 4.7-4.8x MXNet's and its convolutions 1.5x "
        f'({DOC}, "Singa")',
    ),
    Gap(
        "jax-xla-cpu-convolution",
        "jax",
        ("resnet50", "vgg16"),
        224,
        "jax: 4.1x (ResNet50) and 3.3x (VGG16) the fastest framework's time at 224 px on the CPU: "
        "XLA's CPU convolutions take 4.7x MXNet's, and layout transposes around them 22% of its "
        f'operator time ({DOC}, "JAX")',
    ),
    Gap(
        "paddle-cpu-convolution",
        "paddle",
        ("resnet50",),
        1,
        "paddle: ResNet50 at 32 px, batch 16, 2 threads: 4.1x the fastest framework's time; its "
        "convolutions, 92% of its operator time, take 5.4x PyTorch's, and its own zoo ResNet50 is "
        f'as slow ({DOC}, "The quick matrix\'s spread")',
        max_image_size=63,
    ),
    Gap(
        "singa-cpu-operators",
        "singa",
        ("resnet50",),
        1,
        "singa: ResNet50 at 32 px, batch 16, 2 threads: 4.2x the fastest framework's time; half of "
        "its operator time is the elementwise multiplications of its SGD update, and its "
        f"convolutions take 2.5x PyTorch's ({DOC}, \"The quick matrix's spread\")",
        max_image_size=63,
    ),
)


def _known_gap(summary: dict[str, Any], fact: dict[str, Any]) -> Note | None:
    for gap in GAPS:
        if (
            summary["framework"] == gap.framework
            and summary.get("model") in gap.models
            and gap.min_image_size <= (summary.get("image_size") or 0) <= gap.max_image_size
            and (summary.get("task") or "train") == "train"
        ):
            return Note(gap.key, gap.text)
    return None


RULES: tuple[Callable[[dict[str, Any], dict[str, Any]], Note | None], ...] = (
    _threads,
    _pytorch_nchw,
    _known_gap,
)

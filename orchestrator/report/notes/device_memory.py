"""The framework's own high-water mark of device memory, set beside NVML's sampled peak.

The sidecar reads NVML every sample interval (0.1 s by default), so a peak shorter than that goes
unseen: on an H200, ResNet50 at batch 1 showed an NVML peak of 1,676 MiB while torch.cuda's
allocator had reserved 4,700 MiB for a moment during cuDNN's algorithm search (docs/gpu.md, third
run). The framework's allocator keeps its peak itself; the worker reports it once, after training,
and the database keeps it in the environment row's `extra` JSON under `device_memory`.

Everything here reads a row another program may have written: a value that is not a plain
non-negative integer is no figure, and the source text is shown only through safe_line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from orchestrator.report.notes.fairness import json_object
from orchestrator.storage.db import Database
from orchestrator.text.formats import mib
from orchestrator.text.terminal import safe_line

# The allocator's peak per framework, by the key its adapter reports: torch.cuda's peak
# reservation (what the caching allocator held from the driver), XLA's peak bytes in use.
PEAK_KEYS = (("max_memory_reserved", "peak reserved"), ("peak_bytes_in_use", "peak in use"))
LARGEST = 1 << 62  # no device has this much memory: a larger figure is not one
MISSED_MARK = " ^"
MISSED_NOTE = (
    "^ NVML's sampled GPU memory peak lies below the framework's own high-water mark (fw peak): "
    "a peak shorter than the sample interval, such as cuDNN's algorithm search, went unseen; "
    "the fw peak column holds the higher figure (docs/profiler.md)"
)


def framework_peak(extra: Any) -> dict[str, Any] | None:
    """{"bytes", "what", "source"} from an environment row's `extra`, or None where it holds none."""
    memory = (extra if isinstance(extra, dict) else json_object(extra)).get("device_memory")
    if not isinstance(memory, dict):
        return None
    for key, what in PEAK_KEYS:
        value = memory.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < LARGEST:
            source = memory.get("source")
            return {
                "bytes": value,
                "what": what,
                "source": safe_line(source)[:40] if isinstance(source, str) and source else "framework",
            }
    return None


def framework_peaks(db: Database, run_ids: Iterable[int]) -> dict[int, int]:
    """Each run's framework peak in bytes, for the runs that have one."""
    ids = list(run_ids)
    if not ids:
        return {}
    env = db.environments
    out = {}
    for row in db.rows(sa.select(env.c.run_id, env.c.extra).where(env.c.run_id.in_(ids))):
        peak = framework_peak(row["extra"])
        if peak is not None:
            out[row["run_id"]] = peak["bytes"]
    return out


def missed(row: dict[str, Any]) -> bool:
    """True where NVML's sampled peak is below the framework's own peak."""
    sampled, own = row.get("gpu_memory_peak_bytes"), row.get("gpu_framework_peak_bytes")
    return sampled is not None and own is not None and sampled < own


def nvml_cell(row: dict[str, Any]) -> str:
    return mib(row.get("gpu_memory_peak_bytes")) + (MISSED_MARK if missed(row) else "")


def inspect_text(run: dict[str, Any], peak: dict[str, Any] | None) -> str | None:
    """`bench inspect`'s line on the framework's peak, or None where the run has none."""
    if peak is None:
        return None
    text = f"  GPU, the framework's own peak: {mib(peak['bytes'])} MiB ({peak['source']}, {peak['what']})"
    sampled = run.get("gpu_memory_peak_bytes")
    if sampled is not None and sampled < peak["bytes"]:
        text += (
            f"; above NVML's sampled peak of {mib(sampled)} MiB: a peak shorter than the sample "
            "interval went unseen by the sampler"
        )
    return text

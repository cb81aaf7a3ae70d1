"""GPU energy per timed epoch and per image, from the sampler's NVML readings (docs/profiler.md).

The sampler records, per sample, the run's devices' energy counter (joules since first seen) or
their power draw (watts). An epoch's phase in the timeline ("epoch", its repeat and number) spans
its timed steps plus a little set-up, so the energy of an epoch is the mean power over the samples
of its phase times the epoch's own timed seconds:

- counter: (E_last - E_first) / (t_last - t_first) over the phase's samples (two at least);
- power: the trapezoidal integral of the readings over the same span, divided by it (one reading
  alone is taken as the mean).

Where there is no counter the result says why in words; a joule figure is never made up as 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from profiler.timeline import STEADY_PHASE, Timeline

NONE = "none: "  # the prefix of a source that is a reason instead


def source(timeline: Timeline, sampled: bool = True) -> str:
    """The run's energy source (as the sampler named it), or "none: <why not>"."""
    if not sampled or not timeline.found:
        return NONE + "the sampler was off (sample_interval: 0)"
    start = timeline.start or {}
    if not start or start.get("missed") or start.get("error"):
        return NONE + f"the sampler saw no run ({timeline.status})"
    energy = start.get("energy")
    if not energy:
        return NONE + "the sampler did not report an energy source"
    if energy.startswith(NONE):
        return energy
    if not any(s.get("gpu_energy") is not None or s.get("gpu_power") is not None for s in timeline.samples):
        return NONE + "the run's processes were never seen on a GPU (NVML listed none of them)"
    return energy


def _phase_samples(timeline: Timeline, repeat: int, epoch: int) -> list[dict[str, Any]]:
    return [
        s
        for s in timeline.samples
        if s.get("phase") == STEADY_PHASE
        and s.get("epoch") == epoch
        and (s.get("repeat") or 0) == repeat
        and not s.get("final")
    ]


def mean_watts(samples: Sequence[dict[str, Any]]) -> float | None:
    """Mean power over the samples: from the counter where it was read, else from power readings."""
    counted = [s for s in samples if s.get("gpu_energy") is not None]
    if len(counted) >= 2 and counted[-1]["t"] > counted[0]["t"]:
        first, last = counted[0], counted[-1]
        return (last["gpu_energy"] - first["gpu_energy"]) / (last["t"] - first["t"])
    powered = [s for s in samples if s.get("gpu_power") is not None]
    if not powered:
        return None
    if len(powered) == 1 or powered[-1]["t"] <= powered[0]["t"]:
        return float(powered[0]["gpu_power"])
    area = sum(
        (b["t"] - a["t"]) * (a["gpu_power"] + b["gpu_power"]) / 2
        for a, b in zip(powered, powered[1:], strict=False)
    )
    return area / (powered[-1]["t"] - powered[0]["t"])


def epoch_joules(timeline: Timeline, epochs: Sequence[dict[str, Any]]) -> list[float | None]:
    """Joules of each timed epoch (None where its phase had too few readings), in the given order."""
    out: list[float | None] = []
    for e in epochs:
        watts = mean_watts(_phase_samples(timeline, e.get("repeat") or 0, e["epoch"]))
        seconds = e.get("seconds")
        out.append(watts * seconds if watts is not None and seconds is not None else None)
    return out


def summary(timeline: Timeline, epochs: Sequence[dict[str, Any]], sampled: bool = True) -> dict[str, Any]:
    """The runs table's energy columns, and each epoch's joules (same order as ``epochs``)."""
    name = source(timeline, sampled)
    joules = epoch_joules(timeline, epochs) if not name.startswith(NONE) else [None] * len(epochs)
    per_image = [
        j / e["images"] for j, e in zip(joules, epochs, strict=True) if j is not None and e.get("images")
    ]
    present = [j for j in joules if j is not None]
    return {
        "gpu_energy_source": name,
        "gpu_joules_per_epoch": statistics.median(present) if present else None,
        "gpu_joules_per_image": statistics.median(per_image) if per_image else None,
        "epoch_joules": joules,
    }


def describe(run: dict[str, Any]) -> str:
    """The energy of a run in words, for `bench inspect` and the report's notes."""
    name = run.get("gpu_energy_source")
    if name is None:
        return "not recorded (the run predates energy measurement)"
    if name.startswith(NONE):
        return f"no GPU energy counter: {name[len(NONE) :]}"
    if run.get("gpu_joules_per_epoch") is None:
        return f"{name}, but no timed epoch had enough samples to measure (no figure)"
    per_image = run.get("gpu_joules_per_image")
    image = f", {per_image * 1000:.4g} mJ per image" if per_image is not None else ""
    return f"{run['gpu_joules_per_epoch']:.4g} J per epoch (median){image}; {name} (whole device)"

"""Read a run's samples file and summarise it: per run and per phase (docs/profiler.md).

Pure functions over the sampler's records, used by the orchestrator once the run has ended.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler import disturbance

# The phase whose samples describe steady training; summaries prefer it when the run reached it.
STEADY_PHASE = "epoch"
WARMUP_PHASE = "warmup"


@dataclass
class Timeline:
    """Everything the sampler left on disk for one run."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None  # set when the sampler killed the run over its memory budget
    found: bool = False  # whether a samples file existed at all

    @property
    def status(self) -> str:
        """ok, off, or why the timeline is short or missing (what there is, is kept)."""
        if not self.found:
            return "off"
        if self.start is None:
            return "failed: the sampler wrote nothing"
        if self.start.get("missed"):
            return f"missed: {self.start['missed']}"
        if self.start.get("error"):
            return f"failed: {self.start['error']}"
        if self.end is None:
            return f"died after {len(self.samples)} samples (the timeline up to then is kept)"
        return "ok"

    def last(self, count: int) -> list[dict[str, Any]]:
        return self.samples[-count:]


def read(path: Path) -> Timeline:
    """Every well-formed record; a line cut short by the sampler's death is skipped."""
    timeline = Timeline()
    try:
        handle = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return timeline
    timeline.found = True
    with handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "sample":
                timeline.samples.append(record)
            elif kind in ("start", "end", "budget"):
                setattr(timeline, kind, record)
    return timeline


def _steady(samples: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Samples of the timed epochs, or all but the final one when the run never reached them."""
    steady = [s for s in samples if s.get("phase") == STEADY_PHASE and not s.get("final")]
    return steady or [s for s in samples if not s.get("final")] or list(samples)


def _mean(values: Sequence[float | int | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


# The shortest span a CPU % maximum is taken over: one short sample's CPU % is coarse (CPU times
# count in 10 ms ticks, and a sampler held off its CPU takes its samples late and then close
# together). On the GPU machine one 0.09 s sample said 12,730 % on 16 CPUs after samples 4 ms
# apart; the sampler then stamped a sample apart from its CPU reading (profiler/sampler.py, Tree.measure),
# which most likely made that figure, as it made 936 % over a second on 2 CPUs here.
CPU_MAX_WINDOW = 1.0


def _cpu_spans(samples: Sequence[dict[str, Any]]) -> dict[int, float]:
    """Each sample's span in seconds (since the sample before it), by id(sample); the first
    sample's is the median span (it has no predecessor)."""
    spans: dict[int, float] = {}
    previous = None
    for sample in samples:
        t = sample.get("t")
        if isinstance(t, (int, float)) and isinstance(previous, (int, float)) and t > previous:
            spans[id(sample)] = float(t - previous)
        previous = t if isinstance(t, (int, float)) else previous
    if spans and samples and id(samples[0]) not in spans:
        spans[id(samples[0])] = statistics.median(spans.values())
    return spans


def _cpu_mean(subset: Sequence[dict[str, Any]], spans: dict[int, float]) -> float | None:
    """CPU % over the subset's time: each sample weighted by its span (unweighted where the
    samples carry no usable times), so a burst of closely spaced samples does not outweigh
    the rest."""
    pairs = [(s["cpu"], spans.get(id(s))) for s in subset if s.get("cpu") is not None]
    if not pairs:
        return None
    if any(span is None for _, span in pairs):
        return _mean([cpu for cpu, _ in pairs])
    total = sum(span for _, span in pairs)  # type: ignore[misc]
    return sum(cpu * span for cpu, span in pairs) / total  # type: ignore[operator]


def _cpu_max(subset: Sequence[dict[str, Any]], spans: dict[int, float]) -> float | None:
    """The highest CPU % over any CPU_MAX_WINDOW seconds of consecutive samples (the whole
    subset where it is shorter); unweighted where the samples carry no usable times."""
    pairs = [(s["cpu"], spans.get(id(s))) for s in subset if s.get("cpu") is not None]
    if not pairs:
        return None
    if any(span is None for _, span in pairs):
        return _max([cpu for cpu, _ in pairs])
    spans_ = [float(span) for _, span in pairs]  # type: ignore[arg-type]
    best, left, cpu_seconds, seconds = None, 0, 0.0, 0.0
    for right, span in enumerate(spans_):
        cpu_seconds += pairs[right][0] * span
        seconds += span
        while left < right and seconds - spans_[left] >= CPU_MAX_WINDOW:
            cpu_seconds -= pairs[left][0] * spans_[left]
            seconds -= spans_[left]
            left += 1
        if seconds >= CPU_MAX_WINDOW:
            value = cpu_seconds / seconds
            best = value if best is None else max(best, value)
    return best if best is not None else cpu_seconds / seconds  # shorter than one window


def _max(values: Sequence[float | int | None]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _mode(values: Sequence[int | None]) -> int | None:
    counts = Counter(v for v in values if v)
    if not counts:
        return None
    # The most frequent count; on a tie, the larger (threads a pool keeps, not a dip).
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def _share(cpu: float | None, cpus_allowed: int) -> float | None:
    return cpu / cpus_allowed if cpu is not None and cpus_allowed else None


def summarise(timeline: Timeline, cpus_allowed: int) -> dict[str, Any]:
    """The run's resource summary: the columns of the runs table that describe its resources."""
    samples = timeline.samples
    steady = _steady(samples)
    spans = _cpu_spans(samples)
    cpu_mean = _cpu_mean(steady, spans)
    peak_rss = _max([s.get("rss") for s in samples] + [(timeline.end or {}).get("peak_rss")])
    return {
        "samples_count": len(samples),
        "sampler_status": timeline.status,
        "sampler_cpu_seconds": (timeline.end or {}).get("cpu_seconds"),
        "cpu_percent_mean": cpu_mean,
        "cpu_percent_max": _cpu_max(samples, spans),
        "cpu_allowed": cpus_allowed,
        "cpu_percent_allowed": _share(cpu_mean, cpus_allowed),
        "threads_max": _max([s.get("threads") for s in samples]),
        "threads_steady": _mode([s.get("threads") for s in steady]),
        "rss_peak_bytes": peak_rss or None,
        "rss_mean_bytes": _mean([s.get("rss") for s in steady if s.get("procs")]),
        "uss_peak_bytes": _max([s.get("uss") for s in samples]),
        "gpu_memory_peak_bytes": _max([s.get("gpu_mem") for s in samples]),
        "gpu_util_mean": _mean([s.get("gpu_util") for s in steady]),
        "swap_peak_bytes": _max([s.get("swap") for s in samples]),
        **disturbance.summary(steady),
    }


def disturbed(timeline: Timeline) -> bool:
    """Whether the run's timed epochs were disturbed (False where that is unknown)."""
    return disturbance.summary(_steady(timeline.samples))["disturbed"] == 1


def compile_disturbance(timeline: Timeline, compile_seconds: float | None) -> dict[str, Any]:
    """Whether the run's compile figure is trustworthy: other load over its warm-up
    (profiler/disturbance.py, compile_summary)."""
    warmup = [s for s in timeline.samples if s.get("phase") == WARMUP_PHASE and not s.get("final")]
    steady = [s for s in timeline.samples if s.get("phase") == STEADY_PHASE and not s.get("final")]
    epochs = disturbance.summary(steady)  # what the steady step was timed beside
    baseline = None
    if epochs["other_cpu_percent_mean"] is not None:
        baseline = epochs["other_cpu_percent_mean"] + (epochs["steal_percent_mean"] or 0.0)
    return disturbance.compile_summary(warmup, compile_seconds, baseline)


def phases(timeline: Timeline, cpus_allowed: int) -> list[dict[str, Any]]:
    """One row per phase (each epoch and its evaluation apart), in the order the run went through them."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for sample in timeline.samples:
        key = (sample.get("phase") or "start", sample.get("repeat"), sample.get("epoch"))
        groups.setdefault(key, []).append(sample)
    rows = []
    spans = _cpu_spans(timeline.samples)
    for seq, ((phase, repeat, epoch), samples) in enumerate(groups.items()):
        live = [s for s in samples if s.get("procs")] or samples
        cpu_mean = _cpu_mean(samples, spans)
        rows.append(
            {
                "seq": seq,
                "phase": phase,
                "repeat": repeat,
                "epoch": epoch,
                "samples": len(samples),
                "first_t": samples[0].get("t"),
                "last_t": samples[-1].get("t"),
                "cpu_percent_mean": cpu_mean,
                "cpu_percent_max": _cpu_max(samples, spans),
                "cpu_percent_allowed": _share(cpu_mean, cpus_allowed),
                "threads_max": _max([s.get("threads") for s in samples]),
                "rss_mean_bytes": _mean([s.get("rss") for s in live]),
                "rss_peak_bytes": _max([s.get("rss") for s in samples]),
                "gpu_memory_peak_bytes": _max([s.get("gpu_mem") for s in samples]),
                "other_cpu_percent_mean": disturbance.summary(samples)["other_cpu_percent_mean"],
            }
        )
    return rows


def sample_rows(timeline: Timeline, cpus_allowed: int) -> list[dict[str, Any]]:
    """The samples as rows of the samples table (without the run id)."""
    rows = []
    for seq, s in enumerate(timeline.samples):
        cpu = s.get("cpu")
        rows.append(
            {
                "seq": seq,
                "t": s.get("t"),
                "phase": s.get("phase"),
                "repeat": s.get("repeat"),
                "epoch": s.get("epoch"),
                "cpu_percent": cpu,
                "cpu_percent_allowed": _share(cpu, cpus_allowed),
                "threads": s.get("threads"),
                "processes": s.get("procs"),
                "rss_bytes": s.get("rss"),
                "uss_bytes": s.get("uss"),
                "gpu_memory_bytes": s.get("gpu_mem"),
                "gpu_util": s.get("gpu_util"),
                "final": 1 if s.get("final") else 0,
                "gpu_energy_joules": s.get("gpu_energy"),
                "gpu_power_watts": s.get("gpu_power"),
                "swap_bytes": s.get("swap"),
                "other_cpu_percent": s.get("other"),
                "steal_percent": s.get("steal"),
            }
        )
    return rows

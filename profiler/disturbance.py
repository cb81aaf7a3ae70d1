"""Other load on the machine: the CPU time a run's CPUs spent on anything but the run (docs/profiler.md).

From two reads of /proc/stat, over the CPUs the run may use: the busy time of those CPUs, less the
CPU time of what bench itself ran there (the run's process tree, the sampler, the bench process),
is the "other" load; steal is the time the hypervisor gave those virtual CPUs to someone else.
Both are shares of the allowed CPUs' capacity, counted in the kernel's own ticks.

A run is *disturbed* when, over its timed epochs, the other load or the steal passed a threshold
(OTHER_LIMIT, STEAL_LIMIT; their reasoning and the quiet and busy figures they rest on are in
docs/profiler.md and docs/performance.md). Pure functions over the text of /proc/stat, so the
arithmetic is testable on fixed text; the sampler and `bench run --wait-idle` read the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import psutil

PROC_STAT = "/proc/stat"
TICK_SECONDS = 1.0 / os.sysconf("SC_CLK_TCK")

# Thresholds, in % of the allowed CPUs' capacity, mean over the timed epochs. One busy core beside
# a run on 2 CPUs is 50 %; quiet, a run read 0-2 % on the 2-vCPU development machine (the system's
# daemons and rounding; docs/performance.md). 15 % is seven times that and under a third of one
# busy core on 2 CPUs: a compile, a test suite or a second benchmark is seen, a cron job's blip is not.
OTHER_LIMIT = 15.0
# Steal is time the run could not have had at all; a few % is common on a shared cloud host.
STEAL_LIMIT = 10.0
# Fewer samples than this with a figure say too little (a run of a tenth of a second): unknown.
MIN_SAMPLES = 3


class CpuTicks(NamedTuple):
    """One CPU's counters from /proc/stat, in ticks: busy (user, nice, system, irq, softirq;
    guest time is already in user), idle (idle and iowait) and steal."""

    busy: int
    idle: int
    steal: int


def parse_stat(text: str) -> dict[int, CpuTicks]:
    """The per-CPU lines ("cpu0 ...") of /proc/stat; the total line and others are ignored.

    Fields past the fourth are absent on old kernels: missing ones count 0. A malformed line is
    skipped, so one odd line costs that CPU's figure, not the sample.
    """
    cpus: dict[int, CpuTicks] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            cpu = int(name[3:])
            values = [int(v) for v in fields[:8]] + [0] * (8 - len(fields[:8]))
        except ValueError:
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = values
        cpus[cpu] = CpuTicks(user + nice + system + irq + softirq, idle + iowait, steal)
    return cpus


def read_stat(path: str = PROC_STAT) -> dict[int, CpuTicks]:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return parse_stat(f.read())
    except OSError:
        return {}


class Share(NamedTuple):
    """Other load over an interval, in CPU seconds, and the capacity it is a share of."""

    other_seconds: float  # busy less bench's own; may be slightly negative (tick rounding)
    steal_seconds: float
    capacity_seconds: float  # every tick the allowed CPUs counted: CPUs × interval

    def other_percent(self) -> float | None:
        """% of the allowed CPUs' capacity (0 when rounding makes it negative)."""
        return _percent(max(self.other_seconds, 0.0), self.capacity_seconds)

    def steal_percent(self) -> float | None:
        return _percent(self.steal_seconds, self.capacity_seconds)


def _percent(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole > 0 else None


def share(
    before: Mapping[int, CpuTicks], after: Mapping[int, CpuTicks], cpus: Iterable[int], own_seconds: float
) -> Share | None:
    """The other load on ``cpus`` between two reads; ``own_seconds``: bench's CPU time in between.

    None when no allowed CPU is in both reads (a CPU taken offline) or no tick passed.
    """
    busy = idle = steal = 0
    for cpu in cpus:
        if cpu in before and cpu in after:
            busy += after[cpu].busy - before[cpu].busy
            idle += after[cpu].idle - before[cpu].idle
            steal += after[cpu].steal - before[cpu].steal
    capacity = (busy + idle + steal) * TICK_SECONDS
    if capacity <= 0:
        return None
    return Share(busy * TICK_SECONDS - own_seconds, steal * TICK_SECONDS, capacity)


def summary(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Other load and steal over the samples (the timed epochs'), and whether that is disturbed.

    Seconds are summed before dividing, so the per-sample rounding (a tick is 10 ms, a sample
    100 ms) evens out instead of adding up as it would in a mean of clamped percentages.
    """
    measured = [s for s in samples if isinstance(s.get("other_s"), (int, float)) and s.get("span_s")]
    empty = {
        "other_cpu_percent_mean": None,
        "steal_percent_mean": None,
        "disturbed": None,
        "disturbance": None,
    }
    if len(measured) < MIN_SAMPLES:
        return empty
    total = Share(
        sum(s["other_s"] for s in measured),
        sum(s.get("steal_s") or 0.0 for s in measured),
        sum(s["span_s"] for s in measured),
    )
    other, steal = total.other_percent(), total.steal_percent()
    reasons = []
    if other is not None and other > OTHER_LIMIT:
        reasons.append(f"other load {other:.0f}% of the allowed CPUs (limit {OTHER_LIMIT:g}%)")
    if steal is not None and steal > STEAL_LIMIT:
        reasons.append(f"steal {steal:.0f}% (limit {STEAL_LIMIT:g}%)")
    return {
        "other_cpu_percent_mean": other,
        "steal_percent_mean": steal,
        "disturbed": 1 if reasons else 0,
        "disturbance": "; ".join(reasons) or None,
    }


# The compile figure (compile_seconds: the warm-up's time less as many steady steps) is a difference,
# so other load during the warm-up lands in it whole: on a run using its CPUs fully, a warm-up of W
# wall seconds beside other load taking a share f of the CPUs' capacity ran up to W x f seconds
# longer than alone, and all of them count as compiling. That bound is the figure's own
# disturbance. Load only lengthens a warm-up, so it can have added no more than the figure itself:
# what it may account for is the smaller of the bound and the figure, and the figure is flagged
# where that passes COMPILE_SLACK_SECONDS and COMPILE_SHARE of the figure (or the other load or
# steal passed the epochs' limits). Quiet (0-2 % here) a warm-up of 120 s gives at most 2.4 s; the
# 10.7 % beside a 23 s test run that turned a compile of 0 s into 20.2 s in docs/fairness.md gives
# 12.8 s, flagged. A figure of 0 s (an eager framework) or one under the slack cannot be that
# load's: Paddle's GPT-2 warm-up of 10 minutes beside a steady 1.8 % bounds at 10.9 s, and was
# flagged, and run again, for a figure of 0 s before the bound was capped by the figure.
#
# Only load beyond the timed epochs' counts. The steady step that is subtracted was itself timed
# beside the timed epochs' load, so a load as steady through the warm-up as through the epochs
# slowed the warm-up's steps and the steady step alike, and cancels out of the difference, but for
# its share of the compiling itself (at most that share of the figure: under COMPILE_SHARE while
# the epochs stay under their own limit). The bound is the warm-up's wall time x its share of load
# above the epochs' share. JAX's traced GPT-2 (2026-11-27): about 1.9 % (other load and steal) over
# a 490-s warm-up beside the same in its epochs bounded at 9.5 s against a 28-s figure, and was
# flagged and run again for a load its steady step had carried too.
COMPILE_SLACK_SECONDS = 5.0
COMPILE_SHARE = 0.25


def compile_summary(
    samples: Sequence[Mapping[str, Any]], compile_seconds: float | None, baseline_percent: float | None = None
) -> dict[str, Any]:
    """The compile figure's disturbance, from the warm-up's samples (each with its ``t``) and the
    timed epochs' other load and steal (``baseline_percent``, of the CPUs' capacity; None: unknown,
    taken as none)."""
    found: dict[str, Any] = {
        "compile_other_cpu_percent": None,
        "compile_load_seconds": None,
        "compile_disturbed": None,
    }
    measured = [s for s in samples if isinstance(s.get("other_s"), (int, float)) and s.get("span_s")]
    times = [s["t"] for s in samples if isinstance(s.get("t"), (int, float))]
    if compile_seconds is None or len(measured) < MIN_SAMPLES or len(times) < 2:
        return found
    total = Share(
        sum(s["other_s"] for s in measured),
        sum(s.get("steal_s") or 0.0 for s in measured),
        sum(s["span_s"] for s in measured),
    )
    other, steal = total.other_percent() or 0.0, total.steal_percent() or 0.0
    wall = (max(times) - min(times)) * len(times) / (len(times) - 1)  # n samples span n intervals
    beyond = max(0.0, min(other + steal, 100.0) - max(0.0, baseline_percent or 0.0))
    load = round(wall * beyond / 100.0, 3)
    flagged = (
        other > OTHER_LIMIT
        or steal > STEAL_LIMIT
        or min(load, compile_seconds) > max(COMPILE_SLACK_SECONDS, COMPILE_SHARE * compile_seconds)
    )
    found.update(compile_other_cpu_percent=other, compile_load_seconds=load, compile_disturbed=int(flagged))
    return found


class OtherLoad:
    """What else ran on the run's CPUs since the last sample.

    Bench's own CPU time there is the run's tree (measured by Tree), this sampler, and the bench
    process that started it (its parent: it waits, reading the worker's pipes); all three are
    subtracted from the CPUs' busy time.
    """

    def __init__(self, cpus: str | None) -> None:
        self.cpus = parse_cpus(cpus) if cpus else os.sched_getaffinity(0)
        try:
            self.parent: psutil.Process | None = psutil.Process(os.getppid())
        except psutil.Error:
            self.parent = None
        self.stat: dict[int, CpuTicks] | None = None  # read at the first sample
        self.bench_seconds = 0.0

    def _bench_seconds(self) -> float:
        seconds = _own_cpu_seconds()
        if self.parent is not None:
            try:
                times = self.parent.cpu_times()
                seconds += times.user + times.system
            except psutil.Error:  # bench went away; what it used since is counted as other load
                self.parent = None
        return seconds

    def measure(self, tree_seconds: float) -> dict[str, Any]:
        """Other load and steal in % of the allowed CPUs' capacity, and the seconds behind them."""
        stat, bench = read_stat(), self._bench_seconds()
        before, own = self.stat, tree_seconds + bench - self.bench_seconds
        self.stat, self.bench_seconds = stat, bench
        # The first sample's tree CPU is all the worker used since it started, before any read of
        # /proc/stat: it only sets the baseline, so figures start with the second sample.
        found = share(before, stat, self.cpus, own) if before is not None else None
        if found is None:
            return {"other": None, "steal": None}
        return {
            "other": found.other_percent(),
            "steal": found.steal_percent(),
            "other_s": round(found.other_seconds, 4),
            "steal_s": round(found.steal_seconds, 4),
            "span_s": round(found.capacity_seconds, 4),
        }


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def parse_cpus(text: str) -> set[int]:
    """ "0-3,6" → {0, 1, 2, 3, 6} (the sampler's --cpus; bench wrote it)."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus

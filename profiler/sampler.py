"""The sidecar sampler: a process of its own that watches one worker's process tree from outside.

    python -m profiler.sampler --out samples.jsonl --events events.jsonl [--interval 0.1]
        [--memory-budget BYTES] [--pid PID --t0 EPOCH_SECONDS]

Without --pid it reads "PID T0" from its standard input: the orchestrator starts it first and
waits for the line "ready" on its standard output (its imports done, NVML opened) before it starts
the worker, so the sampler is watching from the worker's first moment even on a loaded machine,
where a worker that failed at once used to end before the sampler's first sample.

It runs in the orchestrator's environment (psutil and NVML never enter a framework's), samples on
a drift-corrected schedule until the worker exits, takes one last sample then, and appends every
record to the output as one flushed JSON line, so the timeline survives the worker's segfault, a
kernel OOM kill and the sampler's own death. Records (docs/profiler.md):

    {"kind": "start", ...}            what the sampler could see (NVML or why not; energy source), settings
    {"kind": "sample", "t": ..., ...} one sample: seconds since the worker started, phase, cpu, ...
    {"kind": "budget", ...}           the memory budget was crossed; the process tree was killed
    {"kind": "end", ...}              how many samples, and the sampler's own CPU time
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterable
from typing import IO, Any

import psutil

from profiler import disturbance, swap
from profiler.nvml import Gpu

# The process tree is found by scanning every process's parent (no cheaper way without
# CONFIG_PROC_CHILDREN): 1 to 2 ms for 70 processes, so it is rescanned at most this often.
# (Measured on a PyTorch worker at 0.1 s: half a second cost 4.5 ms of CPU a second.)
TREE_RESCAN_SECONDS = 1.0
# USS reads /proc/PID/smaps_rollup: 4.5 ms for a PyTorch worker, 20 times the rest of a sample.
USS_EVERY_SECONDS = 5.0
# How often a memory budget is checked between samples (a statm read per process).
WATCHDOG_SECONDS = 0.02
# The sampler yields the CPU to the run it watches: at the default priority its every wake-up
# preempted one of a multi-threaded worker's threads, and the others waited at their barrier.
NICE = 10
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class Stop(Exception):
    """The orchestrator asked the sampler to stop (SIGTERM)."""


# The worker writes the event stream: a buggy one may flood it or write one endless line.
EVENTS_READ_BYTES = 4 << 20
EVENT_LINE_BYTES = 64 << 10


class PhaseTail:
    """Follows the worker's event stream for its current phase, reading only what was appended."""

    def __init__(self, path: str | None) -> None:
        self.path, self.offset, self.partial = path, 0, b""
        self.phase: str | None = None
        self.epoch: int | None = None
        self.repeat: int | None = None

    def poll(self) -> None:
        if not self.path:
            return
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(EVENTS_READ_BYTES)  # the rest at the next poll: memory stays bounded
        except OSError:
            return
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > EVENT_LINE_BYTES:  # no event is that long: what it is does not matter
            self.partial = b""
        for line in lines:
            if b'"phase"' in line and len(line) <= EVENT_LINE_BYTES:  # step events never contain it
                self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            return
        if isinstance(event, dict) and event.get("event") == "phase":
            # Only what the samples' columns can hold goes on into them.
            phase, epoch, repeat = event.get("phase"), event.get("epoch"), event.get("repeat", self.repeat)
            self.phase = phase[:200] if isinstance(phase, str) else None
            self.epoch = epoch if type(epoch) is int else None
            self.repeat = repeat if type(repeat) is int else None


class Tree:
    """The worker and its descendants; CPU deltas per process between samples."""

    def __init__(self, pid: int, t0: float) -> None:
        self.root = psutil.Process(pid)
        self.procs: dict[int, psutil.Process] = {pid: self.root}
        self.cpu_seen: dict[int, float] = {}
        self.reaped = 0.0  # CPU seconds already counted of processes gone since the last sample
        self.last_scan = 0.0
        self.last_wall = t0

    def rescan(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_scan < TREE_RESCAN_SECONDS:
            return
        self.last_scan = now
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            children = []
        current = {self.root.pid: self.root}
        for child in children:
            # Keep the object already known, so psutil's per-process caches carry over.
            current[child.pid] = self.procs.get(child.pid, child)
        self.procs = current
        # Gone from /proc: reaped, its time now in its parent's children's time (measure).
        self.reaped += sum(cpu for pid, cpu in self.cpu_seen.items() if pid not in current)
        self.cpu_seen = {pid: cpu for pid, cpu in self.cpu_seen.items() if pid in current}

    def pids(self) -> set[int]:
        return set(self.procs)

    def measure(self) -> dict[str, Any]:
        """CPU % of one core since the last sample, threads and RSS over the live processes, and
        ``wall``, the time.time() right after the CPU times were read: the sample's time stamp.

        The CPU % is over the time between two such stamps, the very spans the timeline weights it
        by. The stamp used to be taken before this, apart from the clock this read: a sampler held
        off its CPU between the two (the run using both CPUs) made the next sample divide its CPU
        seconds by a few milliseconds while the timeline weighted the result by the stamps' 37 ms:
        20,998 % on 2 CPUs, and a CPU % maximum of 936 % over a second (JAX's ResNet50 here).
        """
        cpu_delta, threads, rss, alive = 0.0, 0, 0, 0
        gone: set[int] = set()
        # The CPU times first, each process's apart, and the clock right after them: what comes
        # later in a sample (status, threads, memory, the other load) may take the sampler long.
        # Each process's own time and its reaped children's: a child that lived and was waited
        # for between two rescans (a compiler inductor runs for each C++ kernel) was never seen,
        # and its time would have counted as other load; reaped, it is in its parent's. A child
        # seen alive and then reaped moves its time from its own figure into its parent's: what
        # was counted of it already (self.reaped) is taken off, so it is not counted twice.
        for pid, proc in list(self.procs.items()):
            try:
                times = proc.cpu_times()
            except psutil.Error:  # exited (or cannot be read) since the last scan: dropped
                gone.add(pid)
                continue
            cpu = times.user + times.system + times.children_user + times.children_system
            cpu_delta += cpu - self.cpu_seen.get(pid, 0.0)
            self.cpu_seen[pid] = cpu
        wall = time.time()
        self.reaped += sum(self.cpu_seen.get(pid, 0.0) for pid in gone)
        # Less than nothing where a reaped process's parent was not ours (adopted by init).
        cpu_delta, self.reaped = max(cpu_delta - self.reaped, 0.0), 0.0
        for pid, proc in list(self.procs.items()):
            if pid in gone:
                self.procs.pop(pid, None)
                self.cpu_seen.pop(pid, None)
                continue
            try:
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue  # its CPU counts; it holds no threads or memory any more
                    threads += proc.num_threads()
                    rss += proc.memory_info().rss
                    alive += 1
            except psutil.Error:  # exited since its CPU times were read: they count, it is dropped
                self.procs.pop(pid, None)
                self.reaped += self.cpu_seen.pop(pid, 0.0)
        elapsed = max(wall - self.last_wall, 1e-6)
        self.last_wall = wall
        return {
            "wall": wall,  # taken out by the sampler as the time stamp; not written
            "cpu_s": cpu_delta,  # taken out by the sampler for the other load; not written
            "cpu": round(100.0 * cpu_delta / elapsed, 2),
            "threads": threads,
            "rss": rss,
            "uss": None,
            "procs": alive,
        }

    def uss(self) -> int | None:
        """Unique set size over the live processes (smaps_rollup: the expensive read)."""
        total, seen = 0, 0
        for proc in list(self.procs.values()):
            try:
                total += proc.memory_full_info().uss
                seen += 1
            except psutil.Error:
                continue
        return total if seen else None

    def rss_fast(self) -> int:
        """Resident bytes of the known processes from statm: the watchdog's cheap check."""
        total = 0
        for pid in list(self.procs):
            try:
                with open(f"/proc/{pid}/statm", "rb") as f:
                    total += int(f.read().split()[1]) * PAGE_SIZE
            except (OSError, ValueError, IndexError):
                continue
        return total


class Sampler:
    def __init__(self, args: argparse.Namespace, out: IO[str], gpu: Gpu | None = None) -> None:
        self.args, self.out = args, out
        self.t0 = args.t0 if args.t0 is not None else time.time()
        self.tree = Tree(args.pid, self.t0)
        self.tail = PhaseTail(args.events)
        self.gpu = gpu if gpu is not None else Gpu()
        self.count = 0
        self.last_uss = -USS_EVERY_SECONDS
        self.rss_at_uss = 0
        self.peak_rss = 0
        self.killed = False
        self.has_swap = swap.machine_has_swap()
        self.other = disturbance.OtherLoad(args.cpus)

    def write(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.out.flush()

    def sample(self, final: bool = False) -> dict[str, Any]:
        self.tree.rescan(force=final or self.count == 0)
        self.tail.poll()
        record: dict[str, Any] = {"kind": "sample", "t": None}
        record.update(phase=self.tail.phase, epoch=self.tail.epoch, repeat=self.tail.repeat)
        record.update(self.tree.measure())
        record["t"] = round(record.pop("wall") - self.t0, 4)
        record.update(self.other.measure(record.pop("cpu_s")))
        now = time.monotonic()
        # USS now and then, and whenever RSS has grown a tenth since the last read, so its peak
        # is seen even where a read every sample would cost too much.
        if not final and (now - self.last_uss >= USS_EVERY_SECONDS or record["rss"] > 1.1 * self.rss_at_uss):
            record["uss"] = self.tree.uss()
            self.last_uss, self.rss_at_uss = now, record["rss"]
        record.update(self.gpu.measure(self.tree.pids()))
        record["swap"] = swap.tree_swap(self.tree.pids()) if self.has_swap else None
        if final:
            record["final"] = True
        self.peak_rss = max(self.peak_rss, record["rss"])
        self.count += 1
        self.write(record)
        return record

    def check_budget(self, rss: int | None = None) -> None:
        budget = self.args.memory_budget
        if not budget or self.killed:
            return
        rss = self.tree.rss_fast() if rss is None else rss
        self.peak_rss = max(self.peak_rss, rss)
        if rss <= budget:
            return
        self.tail.poll()
        self.write(
            {
                "kind": "budget",
                "t": round(time.time() - self.t0, 4),
                "budget": budget,
                "rss": rss,
                "phase": self.tail.phase,
                "epoch": self.tail.epoch,
                "pids": sorted(self.tree.pids()),
            }
        )
        self.killed = True
        kill_tree(self.args.pid, self.tree.pids())

    def loop(self, pidfd: int | None) -> None:
        interval = self.args.interval
        step = min(interval, WATCHDOG_SECONDS) if self.args.memory_budget else interval
        start = time.monotonic()
        next_sample = start
        while True:
            now = time.monotonic()
            if now >= next_sample:
                self.check_budget(self.sample()["rss"])
                # Drift correction: the schedule is start + k * interval; a late sample does
                # not push the later ones back, and missed ticks are skipped, not bunched.
                ticks = int((now - start) / interval) + 1
                next_sample = start + ticks * interval
            else:
                self.check_budget()
            wake = min(next_sample, time.monotonic() + step)
            if wait_exit(pidfd, self.args.pid, max(0.0, wake - time.monotonic())):
                return


def kill_tree(pid: int, pids: Iterable[int]) -> None:
    """SIGKILL the worker's process group and every process of its tree."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for other in pids:
        try:
            os.kill(other, signal.SIGKILL)
        except OSError:
            pass


def wait_exit(pidfd: int | None, pid: int, seconds: float) -> bool:
    """Sleep up to ``seconds``; True once the worker has exited (a zombie counts)."""
    if pidfd is not None:
        ready, _, _ = select.select([pidfd], [], [], seconds)
        return bool(ready)
    time.sleep(seconds)
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def own_cpu_seconds() -> float:
    """This process's whole CPU time, interpreter start-up and imports included."""
    times = os.times()
    return times.user + times.system


def _on_term(_signum: int, _frame: Any) -> None:
    raise Stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m profiler.sampler", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--pid",
        default="-",
        help="the worker's pid (its process group leader); '-' (the default): read 'PID T0' from stdin, "
        "so the sampler can start, and pay for its imports, before the worker exists",
    )
    parser.add_argument("--out", required=True, help="samples file (JSON lines, appended)")
    parser.add_argument("--events", default=None, help="the worker's event stream, for the phase")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--memory-budget", type=int, default=None, help="kill the tree above these bytes")
    parser.add_argument("--t0", type=float, default=None, help="the worker's start (time.time())")
    parser.add_argument(
        "--cpus", default=None, help="the CPUs the run may use (0-3,6), for the other load (default: ours)"
    )
    parser.add_argument("--nice", type=int, default=NICE, help="niceness to run at (0: the caller's)")
    return parser.parse_args(argv)


READY = b"ready\n"  # the one line of stdout, which orchestrator/launch/sidecar.py waits for


def _say_ready() -> None:
    """Tell the orchestrator, on stdout, that the worker may start; stdout then joins stderr (the
    log), since the orchestrator reads no more of it."""
    try:
        os.write(1, READY)
    except OSError:  # nobody listens (it stopped waiting, or stdout was closed)
        pass
    try:
        os.dup2(2, 1)
    except OSError:
        pass


def _target(args: argparse.Namespace) -> bool:
    """Fill in pid and t0 (from stdin when --pid is '-'); False when there is nothing to watch."""
    if args.pid == "-":
        _say_ready()
        line = sys.stdin.readline().split()
        if len(line) != 2:
            return False  # the orchestrator went away before starting the worker
        args.pid, args.t0 = int(line[0]), float(line[1])
    else:
        args.pid = int(args.pid)
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gpu = Gpu()  # before the worker exists: NVML's start-up is not taken from the worker's first moments
    if not _target(args):
        return 0
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the orchestrator's to handle
    if args.nice:
        os.nice(args.nice)
    with open(args.out, "a", encoding="utf-8") as out:
        try:
            sampler = Sampler(args, out, gpu)
        except psutil.NoSuchProcess:
            out.write(json.dumps({"kind": "start", "missed": "the worker had ended before the first sample"}))
            out.write("\n")
            return 0
        except psutil.Error as exc:
            out.write(json.dumps({"kind": "start", "error": f"cannot watch pid {args.pid}: {exc}"}) + "\n")
            return 1
        try:
            pidfd: int | None = os.pidfd_open(args.pid)
        except (AttributeError, OSError):
            pidfd = None
        sampler.write(
            {
                "kind": "start",
                "pid": args.pid,
                "interval": args.interval,
                "memory_budget": args.memory_budget,
                "gpu": sampler.gpu.status,
                "energy": sampler.gpu.energy,
                "swap": swap.SOURCE if sampler.has_swap else "none: the machine has no swap",
                "sampler_pid": os.getpid(),
                "cpus": sorted(sampler.other.cpus),
            }
        )
        try:
            sampler.loop(pidfd)
        except Stop:
            pass
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the last records are written whatever comes
        sampler.sample(final=True)
        sampler.write(
            {
                "kind": "end",
                "samples": sampler.count,
                "peak_rss": sampler.peak_rss,
                "cpu_seconds": round(own_cpu_seconds(), 4),
                "wall_seconds": round(time.time() - sampler.t0, 4),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

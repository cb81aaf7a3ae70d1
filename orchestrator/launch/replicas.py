"""A data-parallel run's replicas: how the machine is shared between them, where they meet, and
how their several endings make the run's one outcome (docs/distributed.md, "Data-parallel runs").

Each replica is a worker process of its own, in its own folder (replica 0 in the run's folder, as
a run of one process; replica k in ``replica-k/``), pinned to its share of the run's CPUs, with its
own sampler. They meet at a rendezvous address on the loopback interface, a port that was free
when it was chosen; one taken since is seen in a replica's stderr, and the run starts again on
another.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.config.values import cpu_set, format_cpus
from orchestrator.launch import outcomes
from orchestrator.launch.outcomes import Outcome
from orchestrator.launch.process import Finished
from profiler import timeline as timelines

HOST = "127.0.0.1"
PORT_TRIES = 3  # rendezvous ports tried before the run's failure stands
# What a framework's rendezvous says when its port was taken between our choice and its bind.
PORT_TAKEN = ("Address already in use", "EADDRINUSE", "address already in use")
# Failures bench saw end within this many seconds of the first (one tick of its watch) ended
# together as far as it can tell: among them a death by signal leads, since a replica that lost its
# collective's peer raises an error; it is not killed by one.
TOGETHER_SECONDS = 0.5


@dataclass(frozen=True)
class Plan:
    """How a run's replicas share the machine."""

    count: int
    cpus: tuple[frozenset[int], ...]  # each replica's CPUs, in rank order
    threads: int  # each replica's thread count (the thread variables and the framework's pools)


def folder(run_dir: Path, rank: int) -> Path:
    """Where replica ``rank`` keeps its spec, events, result, logs and samples."""
    return run_dir if rank == 0 else run_dir / f"replica-{rank}"


def plan(config: RunConfig, available: set[int]) -> tuple[Plan | None, str | None]:
    """Split the run's CPUs (its `cpus`, else every CPU bench may use) into one equal, contiguous
    share per replica; None and the reason where the machine cannot honour the request."""
    count = config.replica_count
    pool = sorted(cpu_set(config.cpus) if config.cpus else available)
    where = f"cpus {config.cpus}" if config.cpus else "this machine"
    if count > len(pool):
        return None, (
            f"replicas {count} need a CPU each, and {where} offers {len(pool)} ({format_cpus(set(pool))}):"
            " more replicas need more CPUs, or nodes (--executor ray)"
        )
    share = len(pool) // count
    threads = config.threads or share
    if threads > share:
        return None, (
            f"replicas {count} of threads {threads} need {count * threads} CPUs, and {where} offers"
            f" {len(pool)} ({format_cpus(set(pool))}); threads 0 gives each replica its share"
        )
    cpus = tuple(frozenset(pool[k * share : (k + 1) * share]) for k in range(count))
    return Plan(count, cpus, threads), None


def free_ports(count: int) -> list[int]:
    """``count`` different ports that nothing listens on now (each asked of the kernel while the
    ones before it are still held, so no two are the same)."""
    held = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


def rendezvous_for(count: int, host: str = HOST) -> dict[str, Any]:
    """Ports free on this machine: one endpoint a replica for the frameworks that want each one's
    (Paddle's, TensorFlow's), replica 0's the framework's rendezvous; and bench's own channel
    (workers/coordination.py)."""
    endpoints = [f"{host}:{port}" for port in free_ports(count + 1)]
    control = endpoints.pop()
    return {"count": count, "address": endpoints[0], "control": control, "endpoints": endpoints}


def clear(run_dir: Path) -> None:
    """An attempt's files gone, so that the next attempt's are the run's."""
    for path in sorted(run_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def port_was_taken(stderrs: list[str]) -> bool:
    """Whether a replica failed because its rendezvous port was taken by somebody else."""
    return any(mark in text for text in stderrs for mark in PORT_TAKEN)


def combine(config: RunConfig, ended: list[tuple[Outcome, Finished]]) -> tuple[Outcome, int]:
    """The run's outcome from its replicas', and the replica whose evidence stands for the run.

    Interrupted, if bench was stopped. A timeout, if any replica was still running at the timeout
    (a collective that never completed: the others wait in it forever); the reason names those
    still running and those that had ended. Else the first replica that failed on its own (not
    ended by bench), its outcome and evidence, the reason naming it. Else ok, replica 0's.
    """
    count = len(ended)
    if any(fin.interrupted for _, fin in ended):
        return ended[0][0], 0
    running = [k for k, (_, fin) in enumerate(ended) if fin.timed_out]
    if running:
        lead = running[0]
        gone = [k for k in range(count) if k not in running]
        reason = (
            f"replica{'s' if len(running) > 1 else ''} {_names(running)} of {count} still running at the"
            f" timeout of {config.timeout:g} s"
        )
        if gone:
            how = ", ".join(f"{k} {ended[k][0].outcome}" for k in gone)
            reason += f", waiting on a collective the others had left (ended: {how})"
        return replace(ended[lead][0], reason=reason), lead
    failed = [k for k, (out, fin) in enumerate(ended) if out.outcome != "ok" and fin.ended_by is None]
    if failed:
        lead = failed[first_failure([ended[k][1] for k in failed])]
        out = ended[lead][0]
        stopped = [k for k, (_, fin) in enumerate(ended) if fin.ended_by == lead]
        reason = f"replica {lead} of {count}: {out.reason or out.outcome}"
        if stopped:
            reason += f" (bench then ended replica{'s' if len(stopped) > 1 else ''} {_names(stopped)})"
        return replace(out, reason=reason), lead
    return ended[0][0], 0


def first_failure(failures: list[Finished]) -> int:
    """Which of the replicas that failed on their own failed first (its index in ``failures``).

    By the wall-clock time bench saw each exit (``exited_at``: replicas on other nodes started at
    other times, so their own wall times do not order them), or their wall times where a time is
    missing. Those that ended within TOGETHER_SECONDS of the first ended together: among them one
    that died by a signal leads, then the earliest.
    """
    stamps = [f.exited_at for f in failures]
    ends = [s for s in stamps if s is not None]
    if len(ends) < len(failures):
        ends = [f.wall_seconds for f in failures]
    first = min(ends)
    together = [k for k, end in enumerate(ends) if end - first <= TOGETHER_SECONDS]
    return min(together, key=lambda k: (failures[k].returncode >= 0, ends[k]))


def stopped_row(rank: int, run_dir: Path, culprit: int, wall: float, node: str | None) -> dict[str, Any]:
    """The row of a replica whose node's task bench cancelled because replica ``culprit`` failed:
    what its folder holds, where this machine can read it."""
    return {
        "replica": rank,
        "node": node,
        "outcome": "stopped",
        "reason": f"ended by bench: replica {culprit} failed (its Ray task was cancelled)",
        "ended_by": culprit,
        "wall_seconds": wall,
        "run_folder": "." if rank == 0 else folder(run_dir, rank).name,
        "stderr_tail": outcomes.read_tail(folder(run_dir, rank) / "stderr.log", 4000),
    }


def _names(ranks: list[int]) -> str:
    text = [str(k) for k in ranks]
    return text[0] if len(text) == 1 else ", ".join(text[:-1]) + " and " + text[-1]


def row(
    rank: int,
    run_dir: Path,
    cpus: frozenset[int],
    threads: int,
    outcome: Outcome,
    finished: Finished,
    timeline: timelines.Timeline,
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """One replica's row of the replicas table."""
    where = folder(run_dir, rank)
    stopped = finished.ended_by is not None
    result = outcome.result if outcome.outcome == "ok" and outcome.result else {}
    own = [e for e in result.get("epochs", []) if isinstance(e, dict) and _positive(e.get("seconds"))]
    median = _median([e["seconds"] for e in own])
    rate = _median([e["replica_images"] / e["seconds"] for e in own if _positive(e.get("replica_images"))])
    resources = timelines.summarise(timeline, len(cpus))
    start = next((e for e in events if e.get("event") == "start"), {})
    pid = start.get("pid")
    return {
        "replica": rank,
        "cpus": format_cpus(set(cpus)),
        "threads": threads,
        "pid": pid if type(pid) is int and 0 < pid < 1 << 31 else None,
        "outcome": "stopped" if stopped else outcome.outcome,
        "reason": f"ended by bench: replica {finished.ended_by} failed" if stopped else outcome.reason,
        "ended_by": finished.ended_by,
        "exit_code": finished.returncode,
        "signal_name": outcome.signal_name,
        "wall_seconds": finished.wall_seconds,
        "median_epoch_seconds": median,
        "images_per_second": rate,
        "cpu_percent_mean": resources["cpu_percent_mean"],
        "rss_peak_bytes": resources["rss_peak_bytes"],
        "threads_max": resources["threads_max"],
        "other_cpu_percent_mean": resources.get("other_cpu_percent_mean"),
        "run_folder": "." if rank == 0 else where.name,
        "stderr_tail": outcomes.read_tail(where / "stderr.log", 4000),
    }


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    half = len(ordered) // 2
    if not ordered:
        return None
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def _positive(value: Any) -> bool:
    return type(value) in (int, float) and value > 0 and value == value and value != float("inf")

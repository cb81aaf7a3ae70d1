"""A data-parallel run on this machine: its replicas started together, each in its folder on its
share of the CPUs, watched together, their endings made the run's record (docs/distributed.md,
"Data-parallel runs"). The pieces a replica needs (its start, its ending, the run's record) serve the
Ray executor too, which runs each replica on its own node (executors/ray_task.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.launch import outcomes, replicas, tracing
from orchestrator.launch.execute import (
    Interpreter,
    gather,
    on_started,
    shell_command,
    sidecar_for,
    worker_env,
    write_spec,
)
from orchestrator.launch.process import Finished, Member, run_workers
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.launch.sidecar import SAMPLES_FILE, Sidecar
from profiler import timeline as timelines


def launch_replicas(
    config: RunConfig,
    run_dir: Path,
    interpreter: Interpreter,
    sample: bool,
    tick: Callable[[], None] | None,
    data_file: Path | None,
    on_worker_start: Callable[[int], None] | None,
    token: str,
) -> RunRecord:
    """A data-parallel run: its replicas started together, each in its folder on its share of the
    CPUs, watched together (process.run_workers), their outcomes made the run's
    (launch/replicas.py). A rendezvous port taken meanwhile starts the run again on another."""
    run_dir.mkdir(parents=True)
    python, where = interpreter()
    available = os.sched_getaffinity(0)
    plan, problem = replicas.plan(config, available)
    if python is None or plan is None:
        outcome = outcomes.Outcome(
            "unavailable" if python is None else "skipped", reason=where if python is None else problem
        )
        write_spec(run_dir, config, data_file)
        env, threads = worker_env(config)
        cmd = [str(python or f"<{config.framework} python>"), "-m", "workers", "--spec", "spec.json"]
        rec = gather(
            config, outcome, run_dir, now(), None, shell_command(run_dir, env, threads, cmd), threads
        )
        rec.cpus_allowed = len(available)
        return rec
    for attempt in range(replicas.PORT_TRIES):
        if attempt:
            clear(run_dir)
        rec, taken = _replicated(
            config, run_dir, python, plan, sample, tick, data_file, on_worker_start, token
        )
        if not taken:
            break
    return rec


def clear(run_dir: Path) -> None:
    """An attempt's files gone, so that the next attempt's are the run's."""
    for path in sorted(run_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


@dataclass
class ReplicaStart:
    """One replica about to start: its process, its sampler, the command that reproduces it."""

    member: Member
    sidecar: Sidecar | None
    command: str
    cpus: frozenset[int]
    threads: int


def replica_start(
    config: RunConfig,
    run_dir: Path,
    python: Path,
    rank: int,
    rendezvous: dict[str, Any],
    cpus: frozenset[int],
    threads: int,
    sample: bool = True,
    data_file: Path | None = None,
    on_worker_start: Callable[[int], None] | None = None,
) -> ReplicaStart:
    """Replica ``rank``'s folder and spec, environment, command and sampler. ``rendezvous``: the
    replica count, the framework's address, every replica's endpoint and bench's channel."""
    where = replicas.folder(run_dir, rank)
    where.mkdir(parents=True, exist_ok=True)
    write_spec(where, config, data_file, replica={"rank": rank, "threads": threads, **rendezvous})
    env, variables = worker_env(config, threads)
    cmd = [str(python), "-m", "workers", "--spec", "spec.json"]
    cmd, _ = tracing.wrap(config, cmd, env) if rank == 0 else (cmd, None)
    sidecar = sidecar_for(config, where, set(cpus)) if sample else None
    started = on_started(sidecar, on_worker_start)
    member = Member(cmd, env, where, set(cpus), on_start=started, on_exit=sidecar.stop if sidecar else None)
    return ReplicaStart(member, sidecar, shell_command(where, env, variables, cmd), cpus, threads)


def run_replicas(
    config: RunConfig,
    starts: list[ReplicaStart],
    token: str,
    tick: Callable[[], None] | None = None,
) -> list[Finished]:
    """These replicas (all of the run's, or a node's one) run together to their end."""
    try:
        for start in starts:
            if start.sidecar:
                start.sidecar.launch(token)
        return run_workers([s.member for s in starts], config.timeout, tick=tick, token=token)
    except BaseException:
        for start in starts:
            if start.sidecar:
                start.sidecar.stop()
        raise


def replica_end(
    config: RunConfig, run_dir: Path, rank: int, start: ReplicaStart, finished: Finished
) -> tuple[outcomes.Outcome, dict[str, Any]]:
    """How replica ``rank`` ended, and its row of the replicas table."""
    where = replicas.folder(run_dir, rank)
    timeline = timelines.read(where / SAMPLES_FILE)
    outcome = outcomes.classify(finished, where, config.timeout, timeline)
    events = outcomes.read_events(where / "events.jsonl")
    return outcome, replicas.row(
        rank, run_dir, start.cpus, start.threads, outcome, finished, timeline, events
    )


def replicated_record(
    config: RunConfig,
    run_dir: Path,
    ended: list[tuple[outcomes.Outcome, Finished]],
    rows: list[dict[str, Any]],
    started_at: str,
    command: str,
    cpus: int,
    threads: int,
) -> RunRecord:
    """The run's record from its replicas' endings (replicas.combine): the lead replica's evidence,
    replica 0's epochs, every replica's row."""
    outcome, lead = replicas.combine(config, ended)
    rec = gather(config, outcome, replicas.folder(run_dir, lead), started_at, ended[lead][1], command, {})
    rec.run_dir = run_dir
    rec.wall_seconds = max(f.wall_seconds for _, f in ended)
    rec.timeline = timelines.read(run_dir / SAMPLES_FILE)
    rec.cpus_allowed = cpus
    rec.thread_env = worker_env(config, threads)[1]
    rec.trace = tracing.collect(config, run_dir, ended[0][0].result, None)
    rec.replicas = rows
    return rec


def rendezvous_for(count: int, host: str = replicas.HOST) -> dict[str, Any]:
    """Ports free on this machine: one endpoint a replica for the frameworks that want each one's
    (Paddle's, TensorFlow's), replica 0's the framework's rendezvous; and bench's own channel
    (workers/coordination.py)."""
    endpoints = [f"{host}:{port}" for port in replicas.free_ports(count + 1)]
    control = endpoints.pop()
    return {"count": count, "address": endpoints[0], "control": control, "endpoints": endpoints}


def _replicated(
    config: RunConfig,
    run_dir: Path,
    python: Path,
    plan: replicas.Plan,
    sample: bool,
    tick: Callable[[], None] | None,
    data_file: Path | None,
    on_worker_start: Callable[[int], None] | None,
    token: str,
) -> tuple[RunRecord, bool]:
    """One attempt at the replicated run on this machine; the record, and whether the rendezvous
    port was taken."""
    rendezvous = rendezvous_for(plan.count)
    starts = [
        replica_start(
            config,
            run_dir,
            python,
            rank,
            rendezvous,
            plan.cpus[rank],
            plan.threads,
            sample,
            data_file,
            on_worker_start if rank == 0 else None,
        )
        for rank in range(plan.count)
    ]
    started_at = now()
    ends = run_replicas(config, starts, token, tick)
    ended, rows = [], []
    for rank, (start, finished) in enumerate(zip(starts, ends, strict=True)):
        outcome, row = replica_end(config, run_dir, rank, start, finished)
        ended.append((outcome, finished))
        rows.append(row)
    command = " & ".join(s.command for s in starts)
    rec = replicated_record(
        config, run_dir, ended, rows, started_at, command, len(plan.cpus[0]), plan.threads
    )
    taken = rec.outcome.outcome != "ok" and replicas.port_was_taken([r["stderr_tail"] for r in rows])
    return rec, taken

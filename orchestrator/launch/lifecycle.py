"""The one lifecycle of a run's worker processes: start → watch → end → gather.

A run is one worker process, or a data-parallel run's N replicas (launch/replicas.py), each a member
of the same sequence: **start** (its folder's spec.json, its environment, its command, under nsys
where the settings ask, its sampler), **watch** (the members run together in their own process
groups, process.run_workers), **end** (each member's outcome classified from what it left), and
**gather** (the run's RunRecord: one member's evidence as it is, or N members' combined by
replicas.combine). launch/execute.py runs a configuration on this machine through it; the Ray task
(executors/ray_task.py) runs one replica a node through the same steps.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config.checks import resolved_timing
from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL, RunConfig
from orchestrator.config.values import format_cpus
from orchestrator.launch import outcomes, replicas, tracing
from orchestrator.launch.process import Finished, Member, run_workers
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.launch.sidecar import SAMPLES_FILE, Sidecar, SidecarSettings
from orchestrator.provision import worker_tree
from profiler import timeline as timelines

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Inherited variables that would make the framework's interpreter see the orchestrator's packages.
DROPPED_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


def workers_path() -> Path:
    """The folder on the worker's PYTHONPATH: a copy of bench's `workers` package and nothing else
    of bench (orchestrator/provision/worker_tree.py)."""
    return worker_tree.materialise()


def worker_env(config: RunConfig, threads: int | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The worker's environment, and the thread variables it was given (``threads``: a replica's,
    in place of the configuration's)."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_VARIABLES}
    env["PYTHONPATH"] = str(workers_path())
    env["PYTHONUNBUFFERED"] = "1"
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # so device indices agree with NVML's
    count = config.threads if threads is None else threads
    if count > 0:
        for name in THREAD_VARIABLES:
            env[name] = str(count)
    return env, {k: env[k] for k in THREAD_VARIABLES if k in env}


def worker_config(config: RunConfig) -> dict[str, Any]:
    """Every setting, with min_time and min_steps resolved: the worker applies no defaults."""
    settings = config.to_dict()
    settings["min_time"], settings["min_steps"] = resolved_timing(config)
    return settings


def write_spec(
    run_dir: Path,
    config: RunConfig,
    data_file: Path | None = None,
    task: str = "train",
    replica: dict[str, Any] | None = None,
) -> Path:
    """``replica``: a data-parallel run's replica, its rank, the replica count and the rendezvous."""
    spec = {
        "spec_version": 1,
        "task": task,
        "config_hash": config.config_hash,
        "events_path": "events.jsonl",
        "result_path": "result.json",
        "config": worker_config(config),
        "data_file": str(data_file) if data_file else None,
    }
    if replica is not None:
        spec["replica"] = replica
    path = run_dir / "spec.json"
    path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return path


def shell_command(
    run_dir: Path,
    env: dict[str, str],
    threads: dict[str, str],
    cmd: list[str],
    extra_env: Mapping[str, str] | None = None,
) -> str:
    """The command that reproduces the worker's run, as the runs table stores it (``extra_env``:
    the variables a launch policy added, named so the command still reproduces the run)."""
    assignments = [f"PYTHONPATH={shlex.quote(env['PYTHONPATH'])}"]
    assignments += [f"{k}={v}" for k, v in threads.items()]
    assignments += [f"{k}={shlex.quote(v)}" for k, v in (extra_env or {}).items()]
    return f"cd {shlex.quote(str(run_dir))} && {' '.join(assignments)} {shlex.join(cmd)}"


def sidecar_for(config: RunConfig, run_dir: Path, cpus: set[int] | None = None) -> Sidecar | None:
    """``cpus``: those the run is pinned to; unpinned, it may use all of bench's."""
    interval = DEFAULT_SAMPLE_INTERVAL if config.sample_interval is None else config.sample_interval
    if interval <= 0:
        return None
    allowed = format_cpus(cpus or os.sched_getaffinity(0))
    return Sidecar(SidecarSettings(interval, config.memory_budget, allowed), run_dir)


# -- start ------------------------------------------------------------------------------------------


@dataclass
class Start:
    """One member about to start: its process, its sampler, the command that reproduces it."""

    member: Member
    sidecar: Sidecar | None
    command: str
    thread_env: dict[str, str]  # the thread variables it was given
    trace_note: str | None  # why nsys is not used, where the settings asked for it
    cpus: frozenset[int] | None = None  # those it is pinned to (None: unpinned)
    threads: int | None = None  # a replica's thread count (None: the configuration's)


@dataclass(frozen=True)
class Options:
    """How a member starts: the spec's task, a replica's place, the sampler, nsys, the data file."""

    task: str = "train"
    replica: dict[str, Any] | None = None  # its rank, the replica count and the rendezvous
    threads: int | None = None  # a replica's thread count, in place of the configuration's
    sample: bool = True  # False: no sampler, whatever the settings say
    trace: bool = True  # False: never under nsys (a replica other than 0, a run that cannot start)
    data_file: Path | None = None
    # A launch policy's (execute's extra_env and prefix): variables added to the environment, and a
    # command the worker runs under, outside nsys.
    extra_env: Mapping[str, str] = field(default_factory=dict)
    prefix: tuple[str, ...] = ()


def start(
    config: RunConfig,
    where: Path,
    python: Path | None,
    cpus: frozenset[int] | None,
    options: Options,
    on_worker_start: Callable[[int], None] | None = None,
) -> Start:
    """A member's spec.json written in ``where``, its environment, command and sampler; nothing runs
    yet. ``python`` None: the interpreter is missing, the command names it for the record."""
    write_spec(where, config, options.data_file, options.task, options.replica)
    env, variables = worker_env(config, options.threads)
    env.update(options.extra_env)
    cmd = [str(python or f"<{config.framework} python>"), "-m", "workers", "--spec", "spec.json"]
    cmd, note = tracing.wrap(config, cmd, env) if options.trace else (cmd, None)
    cmd = [*options.prefix, *cmd]
    pinned = set(cpus) if cpus is not None else None
    sidecar = sidecar_for(config, where, pinned) if options.sample else None
    on_exit = sidecar.stop if sidecar else None
    member = Member(cmd, env, where, pinned, on_start=_on_start(sidecar, on_worker_start), on_exit=on_exit)
    command = shell_command(where, env, variables, cmd, options.extra_env)
    return Start(member, sidecar, command, variables, note, cpus, options.threads)


def _on_start(
    sidecar: Sidecar | None, on_worker_start: Callable[[int], None] | None
) -> Callable[[int, float], None] | None:
    if on_worker_start is None:
        return sidecar.start if sidecar else None

    def started(pid: int, t0: float) -> None:
        on_worker_start(pid)
        if sidecar:
            sidecar.start(pid, t0)

    return started


# -- watch and end ----------------------------------------------------------------------------------


def watch(
    config: RunConfig, starts: list[Start], token: str, tick: Callable[[], None] | None = None
) -> list[Finished]:
    """These members (a run's one, all its replicas, or a node's one) run together to their end,
    each sampler beside its member from the member's start."""
    try:
        for one in starts:
            if one.sidecar:
                one.sidecar.launch(token)
        return run_workers([s.member for s in starts], config.timeout, tick=tick, token=token)
    except BaseException:
        for one in starts:
            if one.sidecar:  # stopped before the worker existed: the waiting sampler is told so
                one.sidecar.stop()
        raise


def end(config: RunConfig, where: Path, finished: Finished) -> tuple[outcomes.Outcome, timelines.Timeline]:
    """How the member in ``where`` ended, and its samples."""
    timeline = timelines.read(where / SAMPLES_FILE)
    return outcomes.classify(finished, where, config.timeout, timeline), timeline


# -- gather -----------------------------------------------------------------------------------------


def gather(
    config: RunConfig,
    outcome: outcomes.Outcome,
    run_dir: Path,
    started: str,
    finished: Finished | None,
    command: str,
    threads: dict[str, str],
) -> RunRecord:
    """The record of what the worker in ``run_dir`` left: its events, epochs and stderr's tail."""
    events = outcomes.read_events(run_dir / "events.jsonl")
    if outcome.result and outcome.outcome == "ok":
        # A train result has its epochs (outcomes checks it); a probe's (bench models) has none.
        epochs = list(outcome.result.get("epochs", []))
    else:
        # A partial run's epochs come from its event stream: only those that can be stored.
        epochs = outcomes.unique_epochs(
            [e for e in events if e.get("event") == "epoch_end" and not outcomes.epoch_problem(e)]
        )
    return RunRecord(
        config=config,
        outcome=outcome,
        run_dir=run_dir,
        started_at=started,
        ended_at=now(),
        wall_seconds=finished.wall_seconds if finished else 0.0,
        worker_command=command,
        epochs=epochs,
        events=events,
        stderr_tail=outcomes.read_tail(run_dir / "stderr.log", 4000),
        thread_env=threads,
    )


@dataclass
class Ending:
    """How one member ended: its outcome, its process's end and its samples (None: never started)."""

    outcome: outcomes.Outcome
    finished: Finished | None = None
    timeline: timelines.Timeline | None = None


def record(
    config: RunConfig, run_dir: Path, one: Start, ending: Ending, started: str, cpus_allowed: int
) -> RunRecord:
    """A run of one member: its record, with its samples, its CPUs and its trace."""
    rec = gather(config, ending.outcome, run_dir, started, ending.finished, one.command, one.thread_env)
    rec.timeline = ending.timeline if ending.timeline is not None else timelines.Timeline()
    rec.cpus_allowed = cpus_allowed
    rec.trace = tracing.collect(config, run_dir, ending.outcome.result, one.trace_note)
    return rec


# -- a data-parallel run's members ------------------------------------------------------------------


def start_replica(
    config: RunConfig,
    run_dir: Path,
    python: Path,
    rank: int,
    rendezvous: dict[str, Any],
    share: tuple[frozenset[int], int],
    sample: bool = True,
    data_file: Path | None = None,
    on_worker_start: Callable[[int], None] | None = None,
) -> Start:
    """Replica ``rank`` started in its folder on its ``share`` (its CPUs, its thread count);
    ``rendezvous``: the replica count, the framework's address, every endpoint and bench's channel."""
    cpus, threads = share
    where = replicas.folder(run_dir, rank)
    where.mkdir(parents=True, exist_ok=True)
    replica = {"rank": rank, "threads": threads, **rendezvous}
    options = Options(replica=replica, threads=threads, sample=sample, trace=rank == 0, data_file=data_file)
    return start(config, where, python, cpus, options, on_worker_start)


def end_replica(
    config: RunConfig, run_dir: Path, rank: int, one: Start, finished: Finished
) -> tuple[outcomes.Outcome, dict[str, Any]]:
    """How replica ``rank`` ended, and its row of the replicas table."""
    where = replicas.folder(run_dir, rank)
    outcome, timeline = end(config, where, finished)
    events = outcomes.read_events(where / "events.jsonl")
    assert one.cpus is not None and one.threads is not None  # a replica is always pinned
    return outcome, replicas.row(rank, run_dir, one.cpus, one.threads, outcome, finished, timeline, events)


def record_replicas(
    config: RunConfig,
    run_dir: Path,
    ended: list[tuple[outcomes.Outcome, Finished]],
    rows: list[dict[str, Any]],
    started_at: str,
    command: str,
    share: tuple[int, int],
) -> RunRecord:
    """The run's record from its replicas' endings (replicas.combine): the lead replica's evidence,
    replica 0's epochs, every replica's row. ``share``: each replica's CPU count and thread count."""
    cpus, threads = share
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

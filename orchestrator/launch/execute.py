"""Run one configuration in its own process and environment, and gather everything it left."""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config import samples
from orchestrator.config.checks import resolved_timing
from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL, RunConfig
from orchestrator.config.values import cpu_set, format_cpus
from orchestrator.launch import orphans, outcomes, replicas, tracing
from orchestrator.launch.process import Finished, Member, run_worker, run_workers
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.launch.sidecar import SAMPLES_FILE, Sidecar, SidecarSettings
from orchestrator.provision import envs
from profiler import timeline as timelines

WORKERS_PARENT = Path(__file__).resolve().parents[2]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Inherited variables that would make the framework's interpreter see the orchestrator's packages.
DROPPED_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


def workers_path() -> Path:
    """A directory whose only importable content that matters is the `workers` package.

    In a checkout that is the repository; in an installed bench it would be site-packages,
    whose numpy and friends must not leak into a framework's environment, so a directory
    holding just a link to the package is used instead.
    """
    if (WORKERS_PARENT / "pyproject.toml").exists():
        return WORKERS_PARENT
    link_dir = Path(tempfile.gettempdir()) / f"bench-workers-{os.getuid()}"
    link = link_dir / "workers"
    if not link.exists():
        link_dir.mkdir(parents=True, exist_ok=True)
        link.symlink_to(WORKERS_PARENT / "workers", target_is_directory=True)
    return link_dir


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


def _shell_command(run_dir: Path, env: dict[str, str], threads: dict[str, str], cmd: list[str]) -> str:
    assignments = [f"PYTHONPATH={shlex.quote(env['PYTHONPATH'])}"]
    assignments += [f"{k}={v}" for k, v in threads.items()]
    return f"cd {shlex.quote(str(run_dir))} && {' '.join(assignments)} {shlex.join(cmd)}"


def execute(
    config: RunConfig,
    run_dir: Path,
    env_root: str | None,
    tick: Callable[[], None] | None = None,
    data_file: Path | None = None,
    on_worker_start: Callable[[int], None] | None = None,
    token: str | None = None,
) -> RunRecord:
    """Run one configuration to its end, in its framework's environment; always returns a record,
    whatever happened.

    ``on_worker_start(pid)`` learns the worker's pid (its process group) as soon as it exists.
    ``token`` marks every process of the run, the sampler's included (orchestrator/launch/orphans.py).
    """
    return launch(
        config,
        run_dir,
        lambda: envs.python_for(config.framework, env_root),
        tick=tick,
        data_file=data_file,
        on_worker_start=on_worker_start,
        token=token,
    )


# The interpreter that runs the worker, or None and why there is none (envs.python_for's answer).
Interpreter = Callable[[], tuple[Path | None, str]]


def launch(
    config: RunConfig,
    run_dir: Path,
    interpreter: Interpreter,
    task: str = "train",
    sample: bool = True,
    tick: Callable[[], None] | None = None,
    data_file: Path | None = None,
    on_worker_start: Callable[[int], None] | None = None,
    token: str | None = None,
) -> RunRecord:
    """The one sequence of a worker's run: its folder and spec.json, its interpreter and
    environment, the worker run in its own process group (beside the sampler, under nsys where the
    settings ask), its outcome classified, everything it left gathered into a record.

    ``task`` is the spec's: train, or probe (`bench models`: build the model, count its
    parameters). ``sample`` False keeps the sampler off whatever the settings say.
    """
    token = token or orphans.new_token()
    if config.replica_count > 1:
        return launch_replicas(config, run_dir, interpreter, sample, tick, data_file, on_worker_start, token)
    run_dir.mkdir(parents=True)
    write_spec(run_dir, config, data_file, task)
    python, where = interpreter()
    env, threads = worker_env(config)
    cmd = [str(python or f"<{config.framework} python>"), "-m", "workers", "--spec", "spec.json"]
    cpus, cpus_allowed, cpus_problem = allowed_cpus(config)
    cmd, trace_note = tracing.wrap(config, cmd, env) if python else (cmd, None)
    started = now()
    finished = None
    timeline = timelines.Timeline()
    if python is None or cpus_problem:
        outcome = outcomes.Outcome("unavailable", reason=cpus_problem or where)
    else:
        sidecar = sidecar_for(config, run_dir, cpus) if sample else None
        finished = _run(config, cmd, env, run_dir, cpus, sidecar, tick, on_worker_start, token)
        timeline = timelines.read(run_dir / SAMPLES_FILE)
        outcome = outcomes.classify(finished, run_dir, config.timeout, timeline)
    rec = gather(
        config, outcome, run_dir, started, finished, _shell_command(run_dir, env, threads, cmd), threads
    )
    rec.timeline = timeline
    rec.cpus_allowed = cpus_allowed
    rec.trace = tracing.collect(config, run_dir, outcome.result, trace_note)
    return rec


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
            config, outcome, run_dir, now(), None, _shell_command(run_dir, env, threads, cmd), threads
        )
        rec.cpus_allowed = len(available)
        return rec
    for attempt in range(replicas.PORT_TRIES):
        if attempt:
            _clear(run_dir)
        rec, taken = _replicated(
            config, run_dir, python, plan, sample, tick, data_file, on_worker_start, token
        )
        if not taken:
            break
    return rec


def _clear(run_dir: Path) -> None:
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
    started = _started(sidecar, on_worker_start)
    member = Member(cmd, env, where, set(cpus), on_start=started, on_exit=sidecar.stop if sidecar else None)
    return ReplicaStart(member, sidecar, _shell_command(where, env, variables, cmd), cpus, threads)


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


def _run(
    config: RunConfig,
    cmd: list[str],
    env: dict[str, str],
    run_dir: Path,
    cpus: set[int] | None,
    sidecar: Sidecar | None,
    tick: Callable[[], None] | None,
    on_worker_start: Callable[[int], None] | None,
    token: str,
) -> Finished:
    """The worker run to its end, the sampler (if any) beside it from the worker's start."""
    try:
        if sidecar:
            sidecar.launch(token)
        return run_worker(
            cmd,
            env,
            run_dir,
            config.timeout,
            tick=tick,
            cpus=cpus,
            on_start=_started(sidecar, on_worker_start),
            on_exit=sidecar.stop if sidecar else None,
            token=token,
        )
    except BaseException:
        if sidecar:  # stopped before the worker existed: the waiting sampler is told so
            sidecar.stop()
        raise


def _started(
    sidecar: Sidecar | None, on_worker_start: Callable[[int], None] | None
) -> Callable[[int, float], None] | None:
    if on_worker_start is None:
        return sidecar.start if sidecar else None

    def started(pid: int, t0: float) -> None:
        on_worker_start(pid)
        if sidecar:
            sidecar.start(pid, t0)

    return started


def allowed_cpus(config: RunConfig) -> tuple[set[int] | None, int, str | None]:
    """The CPUs to pin the run to, how many it may use, and why it cannot run if it cannot."""
    available = os.sched_getaffinity(0)
    if config.cpus is None:
        return None, len(available), None
    wanted = cpu_set(config.cpus)
    missing = wanted - available
    if missing:
        return (
            None,
            len(wanted),
            (
                f"cpus {config.cpus}: CPU {format_cpus(missing)} is not available to bench on this machine "
                f"(available: {format_cpus(available)})"
            ),
        )
    return wanted, len(wanted), None


def sidecar_for(config: RunConfig, run_dir: Path, cpus: set[int] | None = None) -> Sidecar | None:
    """``cpus``: those the run is pinned to; unpinned, it may use all of bench's."""
    interval = DEFAULT_SAMPLE_INTERVAL if config.sample_interval is None else config.sample_interval
    if interval <= 0:
        return None
    allowed = format_cpus(cpus or os.sched_getaffinity(0))
    return Sidecar(SidecarSettings(interval, config.memory_budget, allowed), run_dir)


def gather(
    config: RunConfig,
    outcome: outcomes.Outcome,
    run_dir: Path,
    started: str,
    finished: Finished | None,
    command: str,
    threads: dict[str, str],
) -> RunRecord:
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


def where_it_died(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last phase, epoch and completed step the event stream shows."""
    phase = epoch = step = None
    for event in events:
        if event.get("event") == "phase":
            phase, step = event.get("phase"), None
            epoch = event.get("epoch", epoch)
        elif event.get("event") == "step":
            epoch, step = event.get("epoch"), event.get("step")
    # The worker wrote these: only what the columns can hold is kept.
    return {
        "last_phase": phase[:200] if isinstance(phase, str) else None,
        "last_epoch": _small_int(epoch),
        "last_step": _small_int(step),
    }


def _small_int(value: Any) -> int | None:
    return value if type(value) is int and abs(value) < 1 << 62 else None


def summarise(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """Timing over the timed epochs (all repeats, extra ones included: samples.run_summary); loss
    and accuracy of the last configured epoch (an extra one is not evaluated)."""
    row = samples.run_summary(epochs)
    if not row:
        return {}
    configured = [e for e in epochs if not e.get("extra")] or epochs
    last = configured[-1]
    row.update(
        steps_per_epoch=last.get("steps"),
        final_train_loss=last.get("train_loss"),
        final_val_accuracy=last.get("val_accuracy"),
    )
    return row

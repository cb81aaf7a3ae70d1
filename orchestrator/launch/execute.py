"""Run one configuration in its own process and environment, and gather everything it left."""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.config.checks import resolved_timing
from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL, RunConfig
from orchestrator.config.values import cpu_set, format_cpus
from orchestrator.launch import orphans, outcomes, tracing
from orchestrator.launch.process import Finished, run_worker
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


def shell_command(run_dir: Path, env: dict[str, str], threads: dict[str, str], cmd: list[str]) -> str:
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
    if config.replica_count > 1:  # a data-parallel run: launch/replicated.py (it builds on this module)
        from orchestrator.launch import replicated

        return replicated.launch_replicas(
            config, run_dir, interpreter, sample, tick, data_file, on_worker_start, token
        )
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
        config, outcome, run_dir, started, finished, shell_command(run_dir, env, threads, cmd), threads
    )
    rec.timeline = timeline
    rec.cpus_allowed = cpus_allowed
    rec.trace = tracing.collect(config, run_dir, outcome.result, trace_note)
    return rec


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
            on_start=on_started(sidecar, on_worker_start),
            on_exit=sidecar.stop if sidecar else None,
            token=token,
        )
    except BaseException:
        if sidecar:  # stopped before the worker existed: the waiting sampler is told so
            sidecar.stop()
        raise


def on_started(
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

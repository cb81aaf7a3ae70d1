"""Run one configuration on this machine, in its own processes and environment, and gather
everything it left: a run of one worker, or a data-parallel run's replicas, through the one
lifecycle (launch/lifecycle.py: start → watch → end → gather)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.config.run_config import RunConfig
from orchestrator.config.values import cpu_set, format_cpus
from orchestrator.launch import lifecycle, orphans, outcomes, replicas
from orchestrator.launch.lifecycle import Ending, Options
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.provision import envs
from workers import releases


def execute(
    config: RunConfig,
    run_dir: Path,
    env_root: str | None,
    tick: Callable[[], None] | None = None,
    data_file: Path | None = None,
    on_worker_start: Callable[[int], None] | None = None,
    token: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> RunRecord:
    """Run one configuration to its end, in its framework's environment; always returns a record,
    whatever happened.

    ``on_worker_start(pid)`` learns the worker's pid (its process group) as soon as it exists.
    ``token`` marks every process of the run, the sampler's included (orchestrator/launch/orphans.py).
    ``extra_env`` and ``prefix``: variables added to the worker's environment and a command the
    worker is started under (``setarch -R``), for benchmarks of launch policies
    (benchmarks/harness/process_noise.py); a run of one worker only.
    """
    return launch(
        config,
        run_dir,
        lambda: envs.python_for(config.framework, env_root, config.version),
        tick=tick,
        data_file=data_file,
        on_worker_start=on_worker_start,
        token=token,
        extra_env=extra_env,
        prefix=prefix,
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
    extra_env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> RunRecord:
    """A worker's run: its folder and spec.json, its interpreter and environment, the worker run in
    its own process group (beside the sampler, under nsys where the settings ask), its outcome
    classified, everything it left gathered into a record.

    ``task`` is the spec's: train, or probe (`bench models`: build the model, count its
    parameters). ``sample`` False keeps the sampler off whatever the settings say. ``extra_env``,
    ``prefix``: as execute's.
    """
    if config.replica_count > 1 and (extra_env or prefix):
        # Replicas are started by their own path (start_replica); a policy silently left off
        # them would be measured as if applied.
        raise ValueError("extra_env and prefix apply to a run of one worker, not to replicas")
    token = token or orphans.new_token()
    run_dir.mkdir(parents=True)
    found = interpreter()
    python, where = found
    # A release the adapter does not serve needs no environment to be refused: nothing starts.
    refused = releases.unsupported(config.framework, config.version)
    if config.replica_count > 1 and refused is None:
        return _launch_replicas(config, run_dir, found, sample, tick, data_file, on_worker_start, token)
    cpus, cpus_allowed, cpus_problem = allowed_cpus(config)
    pinned = frozenset(cpus) if cpus is not None else None
    runs = python is not None and cpus_problem is None and refused is None
    # What cannot run has no sampler; its command is still nsys's where the settings ask for it.
    options = Options(
        task=task,
        sample=sample and runs,
        trace=python is not None,
        data_file=data_file,
        extra_env=dict(extra_env or {}),
        prefix=tuple(prefix),
    )
    one = lifecycle.start(config, run_dir, python, pinned, options, on_worker_start)
    started = now()
    if refused:
        ending = Ending(outcomes.Outcome("unsupported", reason=refused))
    elif not runs:
        ending = Ending(outcomes.Outcome("unavailable", reason=cpus_problem or where))
    else:
        (finished,) = lifecycle.watch(config, [one], token, tick)
        outcome, timeline = lifecycle.end(config, run_dir, finished)
        ending = Ending(outcome, finished, timeline)
    return lifecycle.record(config, run_dir, one, ending, started, cpus_allowed)


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


# -- a data-parallel run on this machine (docs/distributed.md, "Data-parallel runs") ---------------


def _launch_replicas(
    config: RunConfig,
    run_dir: Path,
    found: tuple[Path | None, str],
    sample: bool,
    tick: Callable[[], None] | None,
    data_file: Path | None,
    on_worker_start: Callable[[int], None] | None,
    token: str,
) -> RunRecord:
    """A data-parallel run: its replicas started together, each in its folder on its share of the
    CPUs, watched together, their outcomes made the run's (launch/replicas.py). A rendezvous port
    taken meanwhile starts the run again on another. ``found``: the interpreter, or None and why."""
    python, where = found
    available = os.sched_getaffinity(0)
    plan, problem = replicas.plan(config, available)
    if python is None or plan is None:
        outcome = outcomes.Outcome(
            "unavailable" if python is None else "skipped", reason=where if python is None else problem
        )
        options = Options(sample=False, trace=False, data_file=data_file)
        one = lifecycle.start(config, run_dir, python, None, options)
        return lifecycle.record(config, run_dir, one, Ending(outcome), now(), len(available))
    for attempt in range(replicas.PORT_TRIES):
        if attempt:
            replicas.clear(run_dir)
        rec, taken = _attempt(config, run_dir, python, plan, sample, tick, data_file, on_worker_start, token)
        if not taken:
            break
    return rec


def _attempt(
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
    rendezvous = replicas.rendezvous_for(plan.count)
    starts = [
        lifecycle.start_replica(
            config,
            run_dir,
            python,
            rank,
            rendezvous,
            (plan.cpus[rank], plan.threads),
            sample,
            data_file,
            on_worker_start if rank == 0 else None,
        )
        for rank in range(plan.count)
    ]
    started_at = now()
    ends = lifecycle.watch(config, starts, token, tick)
    ended, rows = [], []
    for rank, (one, finished) in enumerate(zip(starts, ends, strict=True)):
        outcome, row = lifecycle.end_replica(config, run_dir, rank, one, finished)
        ended.append((outcome, finished))
        rows.append(row)
    command = " & ".join(s.command for s in starts)
    share = (len(plan.cpus[0]), plan.threads)
    rec = lifecycle.record_replicas(config, run_dir, ended, rows, started_at, command, share)
    taken = rec.outcome.outcome != "ok" and replicas.port_was_taken([r["stderr_tail"] for r in rows])
    return rec, taken

"""Run a list of configurations one after another, recording each the moment it ends."""

from __future__ import annotations

import logging
import signal
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import sqlalchemy as sa

from orchestrator import record
from orchestrator.config import RunConfig
from orchestrator.db import Database
from orchestrator.execute import RunRecord, run_dir_for
from orchestrator.executors import Executor, Job, LocalExecutor
from orchestrator.outcomes import RUN_AGAIN_ON_RESUME
from orchestrator.progress import Progress

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    sweep_id: int
    outcomes: dict[int, str] = field(default_factory=dict)  # run id -> outcome
    skipped: int = 0
    interrupted: bool = False


def finished_hashes(db: Database, sweep_id: int) -> set[str]:
    """Configurations of a sweep that already have a finished run (not interrupted, no cluster fault)."""
    runs = db.runs
    query = sa.select(runs.c.config_hash).where(
        runs.c.sweep_id == sweep_id, runs.c.outcome.not_in(RUN_AGAIN_ON_RESUME)
    )
    return {row["config_hash"] for row in db.rows(query)}


def latest_sweep(db: Database, name: str) -> dict | None:
    sweeps = db.sweeps
    query = (
        sa.select(sweeps)
        .where(sweeps.c.name == name, sweeps.c.kind == "matrix")
        .order_by(sweeps.c.id.desc())
        .limit(1)
    )
    return next(db.rows(query), None)


def _raise_interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_configs(
    db: Database,
    sweep_id: int,
    configs: Sequence[RunConfig],
    runs_root: Path,
    env_root: str | None,
    progress: Progress,
    first_index: int = 1,
    data_files: Mapping[str, Path] | None = None,
    executor: Executor | None = None,
) -> SweepResult:
    """Run each configuration and record it as it ends; Ctrl-C or SIGTERM stops the sweep, and
    what was running is recorded `interrupted`. Local by default; any executor, one way to record."""
    executor = executor or LocalExecutor(env_root)
    result = SweepResult(sweep_id)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = "interrupted"
    root = runs_root / f"sweep-{sweep_id}"
    jobs = (
        Job(config, run_dir_for(root, index, config), (data_files or {}).get(config.config_hash))
        for index, config in enumerate(configs, start=first_index)
    )
    runs = executor.run(jobs, progress)
    try:
        try:
            _record_all(db, sweep_id, runs, progress, result)
        except KeyboardInterrupt:
            # Here, not in the executor: while a run was being recorded, or between runs. The
            # executor is told, stops what it still runs and yields those runs as interrupted.
            result.interrupted = True
            _record_all(db, sweep_id, _stopped(runs), progress, result)
        status = "interrupted" if result.interrupted else "finished"
    except KeyboardInterrupt:  # a second one while the stopped runs were recorded
        result.interrupted = True
    finally:
        runs.close()  # an executor stops whatever it still runs
        record.end_sweep(db, sweep_id, status)
        signal.signal(signal.SIGTERM, previous)
    return result


def _record_all(
    db: Database, sweep_id: int, runs: Iterator[RunRecord], progress: Progress, result: SweepResult
) -> None:
    for rec in runs:
        run_id = record.record_run(db, sweep_id, rec)
        result.outcomes[run_id] = rec.outcome.outcome
        progress.end(rec.outcome.outcome, run_id, _detail(rec.outcome), rec.run_dir)
        if rec.outcome.outcome == "interrupted":
            result.interrupted = True


def _stopped(runs: Generator[RunRecord, None, None]) -> Iterator[RunRecord]:
    """What an executor yields once interrupted: the runs it stopped (none for the local one,
    which was between runs)."""
    try:
        rec = runs.throw(KeyboardInterrupt())
    except (KeyboardInterrupt, StopIteration):
        return
    yield rec
    yield from runs


def _detail(outcome) -> str:
    if outcome.outcome == "ok":
        return ""
    return f": {outcome.reason}" if outcome.reason else ""

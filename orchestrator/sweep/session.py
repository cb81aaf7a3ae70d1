"""A command's sweep from start to end: opened new or reopened to resume, run, closed.

`bench run`, `bench rerun` and `bench train` differ only in what they hand to ``run_sweep`` (a
``Plan``): the name and kind the sweep is recorded under, its configurations, the earlier sweep to
continue, whether the backstop and --retry-disturbed apply, and how progress shows. What happens
then is the same for all three: the estimate read from earlier runs, the sweep row written (or the
earlier one marked running again), what a killed bench left in flight reaped (run.run_configs),
each configuration run and recorded as it ends, and the sweep closed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import RunConfig
from orchestrator.executors.base import Executor
from orchestrator.executors.local import LocalExecutor
from orchestrator.launch import calibration
from orchestrator.launch.outcomes import RUN_AGAIN_ON_RESUME
from orchestrator.launch.process import interrupt_name, stop_signals_interrupt
from orchestrator.storage.db import Database
from orchestrator.sweep import recording
from orchestrator.sweep.eta import History
from orchestrator.sweep.folders import runs_root
from orchestrator.sweep.progress import Progress
from orchestrator.sweep.run import SweepResult, run_configs, walls_of


@dataclass
class Earlier:
    """The sweep a --resume continues, and the configurations it already finished."""

    sweep: dict[str, Any]
    done: set[str]


@dataclass
class Plan:
    """What one command asks of its sweep."""

    name: str  # sweeps.name: the matrix's name, "rerun of run N", "train"
    kind: str  # sweeps.kind: matrix, rerun, train
    configs: list[RunConfig]  # every configuration, those an earlier sweep finished included
    db_url: str  # as given: the run folders go beside a SQLite file (folders.runs_root)
    runs_dir: str | None  # --runs-dir
    env_dir: str | None
    data_files: Mapping[str, Path] = field(default_factory=dict)
    matrix_path: str | None = None
    matrix_hash: str | None = None
    resume: bool = False  # --resume was asked for: continue ``earlier`` if there is one
    earlier: Earlier | None = None
    backstop: bool = False  # a batch past a configuration's oom wall is recorded skipped, not run
    retry_disturbed: int = 0
    follow: bool = False  # Progress's follow: one run, its lines as they come
    calibrate: bool = False  # time the calibration's fixed work before and after (local executor)

    @property
    def todo(self) -> list[RunConfig]:
        done = self.earlier.done if self.earlier else set()
        return [c for c in self.configs if c.config_hash not in done]


def latest_sweep(db: Database, name: str) -> dict | None:
    """The newest sweep of a matrix by this name (kind matrix: a rerun or train is never resumed)."""
    sweeps = db.sweeps
    query = (
        sa.select(sweeps)
        .where(sweeps.c.name == name, sweeps.c.kind == "matrix")
        .order_by(sweeps.c.id.desc())
        .limit(1)
    )
    return next(db.rows(query), None)


def finished_hashes(
    db: Database, sweep_id: int, backstop: bool = True, redo_disturbed: bool = False
) -> set[str]:
    """Configurations of a sweep that already have a finished run (not interrupted, no cluster fault).

    Without the backstop, a configuration the backstop skipped is not finished: it runs.
    ``redo_disturbed`` (--resume with --retry-disturbed): nor is one whose latest finished run was
    flagged disturbed (its timed epochs, or its compile figure); it runs again, its earlier rows
    kept (reports take the latest).
    """
    runs = db.runs
    unfinished = [*RUN_AGAIN_ON_RESUME] if backstop else [*RUN_AGAIN_ON_RESUME, "skipped"]
    query = (
        sa.select(runs.c.config_hash, runs.c.disturbed, runs.c.compile_disturbed)
        .where(runs.c.sweep_id == sweep_id, runs.c.outcome.not_in(unfinished))
        .order_by(runs.c.id)
    )
    latest: dict[str, Any] = {}
    for row in db.rows(query):  # by id: the last one of a configuration stays
        latest[row["config_hash"]] = row["disturbed"] == 1 or row["compile_disturbed"] == 1
    if redo_disturbed:
        return {h for h, disturbed in latest.items() if not disturbed}
    return set(latest)


def earlier_sweep(db: Database, name: str, backstop: bool, redo_disturbed: bool = False) -> Earlier | None:
    """The sweep --resume would continue, with what it finished; None if the matrix has none."""
    sweep = latest_sweep(db, name)
    if sweep is None:
        return None
    return Earlier(sweep, finished_hashes(db, sweep["id"], backstop=backstop, redo_disturbed=redo_disturbed))


def run_sweep(
    db: Database, plan: Plan, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> SweepResult:
    """Open (or reopen) the plan's sweep, run what it has still to run, and close it; ``say``
    takes the notes about resuming (the CLI's standard error). The executor is closed here,
    whatever happens."""
    runner = executor or LocalExecutor(plan.env_dir)
    try:
        root = runs_root(plan.db_url, plan.runs_dir)  # before anything is recorded
        todo = plan.todo
        history = History.from_db(db, todo)  # before the sweep is recorded: it may take seconds
        say = say or (lambda _line: None)
        sweep_id = _open(db, plan, say)
        # On this machine only: a Ray sweep's runs ran on other nodes, which a calibration here
        # says nothing of.
        calibrate = plan.calibrate and bool(todo) and runner.name == "local"
        if calibrate and not _calibrate(db, sweep_id, "start", say):
            recording.end_sweep(db, sweep_id, "interrupted")  # nothing ran: nothing else to record
            return SweepResult(sweep_id, interrupted=True, skipped=len(plan.configs) - len(todo))
        progress = Progress(len(todo), follow=plan.follow, plan=todo, history=history)
        result = run_configs(
            db,
            sweep_id,
            todo,
            root,
            plan.env_dir,
            progress,
            first_index=len(plan.configs) - len(todo) + 1,
            data_files=plan.data_files,
            executor=runner,
            walls=walls_of(db, sweep_id) if plan.backstop else None,
            retry_disturbed=plan.retry_disturbed,
        )
        if calibrate and not result.interrupted:
            _calibrate(db, sweep_id, "end", say)
    finally:
        runner.close()
    result.skipped = len(plan.configs) - len(todo)
    return result


def _calibrate(db: Database, sweep_id: int, at: str, say: Callable[[str], None]) -> bool:
    """Take the calibration (profiler/calibration.py, about a second), record it, say it; False
    where a stop signal (Ctrl-C, SIGTERM, ...) came meanwhile: nothing is recorded then."""
    try:
        with stop_signals_interrupt():
            figures = calibration.take()
    except KeyboardInterrupt as exc:
        say(f"calibration at the {at}: stopped ({interrupt_name(exc)})")
        return False
    recording.store_calibration(db, sweep_id, at, figures)
    if "error" in figures:
        say(f"calibration at the {at}: none ({figures['error']})")
    else:
        say(f"calibration at the {at}: {calibration.describe(figures)}")
    return True


def _open(db: Database, plan: Plan, say: Callable[[str], None]) -> int:
    """The sweep's id: the earlier one marked running again, or a new row."""
    if plan.resume and plan.earlier is None:
        say(f"no earlier sweep named {plan.name!r}: starting a new one")
    if plan.earlier is None:
        total = len(plan.configs)
        return recording.start_sweep(db, plan.name, plan.kind, total, plan.matrix_path, plan.matrix_hash)
    sweep = plan.earlier.sweep
    if sweep["matrix_hash"] != plan.matrix_hash:
        say(
            f"note: {plan.matrix_path} changed since sweep {sweep['id']}; "
            "configurations are matched by their settings"
        )
    recording.reopen_sweep(db, sweep["id"], len(plan.configs))
    return sweep["id"]

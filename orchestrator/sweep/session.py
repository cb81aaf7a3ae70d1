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
from orchestrator.config.values import shown
from orchestrator.errors import DatabaseError
from orchestrator.executors.base import Executor
from orchestrator.executors.local import LocalExecutor
from orchestrator.launch import calibration
from orchestrator.launch.outcomes import RUN_AGAIN_ON_RESUME
from orchestrator.launch.process import interrupt_name, stop_signals_interrupt
from orchestrator.storage.db import Database
from orchestrator.sweep import liveruns, recording
from orchestrator.sweep.catch_up import AWAY, Patience, catch_up_sweep, patiently
from orchestrator.sweep.eta import History
from orchestrator.sweep.folders import runs_root, sweep_folder
from orchestrator.sweep.order import Slot, interleaved, new_seed
from orchestrator.sweep.progress import Progress
from orchestrator.sweep.run import SweepResult, run_configs, walls_of


@dataclass
class Earlier:
    """The sweep a --resume continues, and the runs it already finished: by configuration hash, the
    indices of its finished runs (one, 0, for a configuration that runs once)."""

    sweep: dict[str, Any]
    done: dict[str, set[int]]
    caught_up: int = 0  # finished runs whose records its folder held, imported first


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
    def order_seed(self) -> int | None:
        """The seed that orders the runs: the resumed sweep's, if it recorded one (a stored value is
        outside input: anything but a column's integer is refused in one line)."""
        seed = self.earlier.sweep.get("order_seed") if self.earlier else None
        if seed is not None and (type(seed) is not int or not 0 <= seed < 2**63):
            sweep = self.earlier.sweep["id"] if self.earlier else "?"
            raise DatabaseError(f"sweep {sweep}: order_seed: expected an integer >= 0, got {shown(seed)}")
        return seed

    def todo(self, seed: int) -> list[Slot[RunConfig]]:
        """The runs still to run, in the sweep's order (sweep/order.py)."""
        done = self.earlier.done if self.earlier else {}
        return interleaved(self.configs, runs_of, hash_of, seed, done)

    @property
    def planned(self) -> int:
        """Runs the whole sweep asks for, finished ones included."""
        return sum(c.runs for c in {c.config_hash: c for c in self.configs}.values())


def runs_of(config: RunConfig) -> int:
    return config.runs


def hash_of(config: RunConfig) -> str:
    return config.config_hash


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


def finished_runs(
    db: Database, sweep_id: int, backstop: bool = True, redo_disturbed: bool = False
) -> dict[str, set[int]]:
    """The runs of a sweep that already finished (not interrupted, no cluster fault): by
    configuration hash, the indices of its finished runs.

    Without the backstop, a run the backstop skipped is not finished: it runs. ``redo_disturbed``
    (--resume with --retry-disturbed): nor is one whose latest finished attempt was flagged
    disturbed (its timed epochs, or its compile figure); it runs again, its earlier rows kept
    (reports take the latest attempt of each run).
    """
    runs = db.runs
    unfinished = [*RUN_AGAIN_ON_RESUME] if backstop else [*RUN_AGAIN_ON_RESUME, "skipped"]
    query = (
        sa.select(runs.c.config_hash, runs.c.run_index, runs.c.disturbed, runs.c.compile_disturbed)
        .where(runs.c.sweep_id == sweep_id, runs.c.outcome.not_in(unfinished))
        .order_by(runs.c.id)
    )
    latest: dict[tuple[str, int], bool] = {}
    for row in db.rows(query):  # by id: the last attempt of a run stays
        index = row["run_index"] if type(row["run_index"]) is int else 0  # NULL: before runs: N
        latest[(row["config_hash"], index)] = row["disturbed"] == 1 or row["compile_disturbed"] == 1
    done: dict[str, set[int]] = {}
    for (config_hash, index), disturbed in latest.items():
        if not (redo_disturbed and disturbed):
            done.setdefault(config_hash, set()).add(index)
    return done


def earlier_sweep(
    db: Database, name: str, backstop: bool, redo_disturbed: bool = False, runs_root: Path | None = None
) -> Earlier | None:
    """The sweep --resume would continue, with what it finished; None if the matrix has none.

    With ``runs_root`` (a resume that will run, not a dry run), the records in the sweep's folder
    that the database lacks are imported first (catch_up.py: a bench killed between a run's end
    and its row, a database that was away), so a finished run is never run again; before that, a
    run a killed bench left whose worker had finished is adopted (sweep/adopt.py)."""
    sweep = latest_sweep(db, name)
    if sweep is None:
        return None
    if runs_root:
        # A run whose worker finished before its bench was killed gets its record first (adopt.py).
        liveruns.adopt_finished(db, sweep["id"], liveruns.state_dir())
    caught_up = catch_up_sweep(db, sweep["id"], sweep_folder(runs_root, sweep["id"])) if runs_root else []
    done = finished_runs(db, sweep["id"], backstop=backstop, redo_disturbed=redo_disturbed)
    return Earlier(sweep, done, len(caught_up))


def run_sweep(
    db: Database, plan: Plan, executor: Executor | None = None, say: Callable[[str], None] | None = None
) -> SweepResult:
    """Open (or reopen) the plan's sweep, run what it has still to run, and close it; ``say``
    takes the notes about resuming (the CLI's standard error). The executor is closed here,
    whatever happens."""
    runner = executor or LocalExecutor(plan.env_dir)
    try:
        root = runs_root(plan.db_url, plan.runs_dir)  # before anything is recorded
        seed = plan.order_seed if plan.order_seed is not None else new_seed()
        slots = plan.todo(seed)
        todo = [slot.config for slot in slots]
        history = History.from_db(db, todo)  # before the sweep is recorded: it may take seconds
        say = say or (lambda _line: None)
        sweep_id = _open(db, plan, say, seed)
        # On this machine only: a Ray sweep's runs ran on other nodes, which a calibration here
        # says nothing of.
        calibrate = plan.calibrate and bool(todo) and runner.name == "local"
        if calibrate and not _calibrate(db, sweep_id, "start", say):
            recording.end_sweep(db, sweep_id, "interrupted")  # nothing ran: nothing else to record
            return SweepResult(sweep_id, interrupted=True, skipped=plan.planned - len(slots))
        progress = Progress(len(todo), follow=plan.follow, plan=todo, history=history)
        result = run_configs(
            db,
            sweep_id,
            slots,
            root,
            plan.env_dir,
            progress,
            first_index=plan.planned - len(slots) + 1,
            data_files=plan.data_files,
            executor=runner,
            walls=walls_of(db, sweep_id) if plan.backstop else None,
            retry_disturbed=plan.retry_disturbed,
        )
        if calibrate and not result.interrupted:
            # With records pending the database is known to be away: one try, not another wait.
            _calibrate(db, sweep_id, "end", say, Patience(0.0) if result.pending else None)
    finally:
        runner.close()
    result.skipped = plan.planned - len(slots)
    return result


def _calibrate(
    db: Database, sweep_id: int, at: str, say: Callable[[str], None], patience: Patience | None = None
) -> bool:
    """Take the calibration (profiler/calibration.py, about a second), record it, say it; False
    where a stop signal (Ctrl-C, SIGTERM, ...) came meanwhile: nothing is recorded then."""
    try:
        with stop_signals_interrupt():
            figures = calibration.take()
    except KeyboardInterrupt as exc:
        say(f"calibration at the {at}: stopped ({interrupt_name(exc)})")
        return False
    try:
        patiently(lambda: recording.store_calibration(db, sweep_id, at, figures), "the calibration", patience)
    except AWAY as exc:  # the database away at the sweep's end: the runs' records matter, not this
        say(f"calibration at the {at}: not recorded ({str(exc).splitlines()[0][:200]})")
        return True
    if "error" in figures:
        say(f"calibration at the {at}: none ({figures['error']})")
    else:
        say(f"calibration at the {at}: {calibration.describe(figures)}")
    return True


def _open(db: Database, plan: Plan, say: Callable[[str], None], seed: int) -> int:
    """The sweep's id: the earlier one marked running again, or a new row; either records the seed
    that orders its runs."""
    if plan.resume and plan.earlier is None:
        say(f"no earlier sweep named {plan.name!r}: starting a new one")
    if plan.earlier is None:
        total = len(plan.configs)
        return recording.start_sweep(
            db, plan.name, plan.kind, total, plan.matrix_path, plan.matrix_hash, order_seed=seed
        )
    sweep = plan.earlier.sweep
    if plan.earlier.caught_up:
        say(
            f"sweep {sweep['id']}: {plan.earlier.caught_up} finished run(s) imported "
            "from their folders' records"
        )
    if sweep["matrix_hash"] != plan.matrix_hash:
        say(
            f"note: {plan.matrix_path} changed since sweep {sweep['id']}; "
            "configurations are matched by their settings"
        )
    recording.reopen_sweep(db, sweep["id"], len(plan.configs), order_seed=seed)
    return sweep["id"]

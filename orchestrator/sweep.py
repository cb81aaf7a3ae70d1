"""Run a list of configurations one after another, recording each the moment it ends."""

from __future__ import annotations

import hashlib
import json
import logging
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import sqlalchemy as sa

from orchestrator import record
from orchestrator.config import RunConfig
from orchestrator.db import Database
from orchestrator.execute import RunRecord, execute, now, run_dir_for
from orchestrator.outcomes import Outcome
from orchestrator.progress import Progress

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    sweep_id: int
    outcomes: dict[int, str] = field(default_factory=dict)  # run id -> outcome
    skipped: int = 0
    interrupted: bool = False


def finished_hashes(db: Database, sweep_id: int, backstop: bool = True) -> set[str]:
    """Configurations of a sweep that already have a finished (not interrupted) run.

    Without the backstop, a configuration the backstop skipped is not finished: it runs.
    """
    runs = db.runs
    unfinished = ["interrupted"] if backstop else ["interrupted", "skipped"]
    query = sa.select(runs.c.config_hash).where(
        runs.c.sweep_id == sweep_id, runs.c.outcome.not_in(unfinished)
    )
    return {row["config_hash"] for row in db.rows(query)}


def wall_key(config: RunConfig) -> str:
    """What a configuration is apart from its batch size: runs sharing it hit the same memory wall."""
    settings = {k: v for k, v in config.to_dict().items() if k != "batch_size"}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def walls_of(db: Database, sweep_id: int) -> dict[str, int]:
    """The smallest batch at which each configuration ran out of memory in a sweep (for --resume)."""
    runs = db.runs
    query = sa.select(runs.c.config_json, runs.c.batch_size).where(
        runs.c.sweep_id == sweep_id, runs.c.outcome == "oom"
    )
    walls: dict[str, int] = {}
    for row in db.rows(query):
        _hit_wall(walls, RunConfig(**json.loads(row["config_json"])))
    return walls


def _hit_wall(walls: dict[str, int], config: RunConfig) -> None:
    key = wall_key(config)
    walls[key] = min(walls.get(key, config.batch_size), config.batch_size)


def skipped_record(config: RunConfig, run_dir: Path, wall: int) -> RunRecord:
    """The record of a configuration the backstop did not run: it would run out of memory too."""
    run_dir.mkdir(parents=True)
    started = now()
    reason = f"oom at batch {wall}"
    return RunRecord(
        config=config,
        outcome=Outcome("skipped", reason=reason),
        run_dir=run_dir,
        started_at=started,
        ended_at=started,
        wall_seconds=0.0,
        worker_command=f"(not run: {reason}; bench run --no-backstop runs it)",
    )


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
    walls: dict[str, int] | None = None,
) -> SweepResult:
    """Run each configuration; Ctrl-C or SIGTERM stops the sweep after recording the current run.

    With ``walls`` (the backstop; {} to start a sweep), a configuration that ran out of memory at
    batch b makes the same configuration at a larger batch `skipped`, not run; None turns it off.
    """
    result = SweepResult(sweep_id)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = "finished"
    try:
        for index, config in enumerate(configs, start=first_index):
            run_dir = run_dir_for(runs_root / f"sweep-{sweep_id}", index, config)
            progress.begin(config, run_dir)
            data_file = (data_files or {}).get(config.config_hash)
            wall = walls.get(wall_key(config)) if walls is not None else None
            if wall is not None and config.batch_size > wall:
                rec = skipped_record(config, run_dir, wall)
            else:
                rec = execute(config, run_dir, env_root, tick=progress.tick, data_file=data_file)
            if walls is not None and rec.outcome.outcome == "oom":
                _hit_wall(walls, config)
            run_id = record.record_run(db, sweep_id, rec)
            result.outcomes[run_id] = rec.outcome.outcome
            progress.end(rec.outcome.outcome, run_id, _detail(rec.outcome))
            if rec.outcome.outcome == "interrupted":
                result.interrupted = True
                status = "interrupted"
                break
    except KeyboardInterrupt:
        # Between runs: nothing is running, nothing half-written.
        result.interrupted = True
        status = "interrupted"
    finally:
        record.end_sweep(db, sweep_id, status)
        signal.signal(signal.SIGTERM, previous)
    return result


def _detail(outcome) -> str:
    if outcome.outcome == "ok":
        return ""
    return f": {outcome.reason}" if outcome.reason else ""

"""Adoption: the record of a run whose worker finished but whose bench was killed before it wrote it.

Between the worker's exit and record.json (sweep/record_file.py) bench reads the worker's result,
its events, its logs and its samples; a bench SIGKILLed there leaves a folder holding all of that
and no record. The run finished: running it again would cost its whole time for nothing. So the
next bench that finds it (a resumed sweep before it decides what to run, or liveruns' recovery of
what a killed bench left in flight) builds its record from the folder, as the sweep would have,
with the outcome its result says, writes record.json and imports it like any record.

What cannot be had is the worker's exit status (bench was not there to see it): the run's reason
says so (``ADOPTED``) and its exit code is empty. A folder whose worker did not finish (no result,
or one bench refuses: the result is outside input, read as outcomes.read_result reads every
result) is not adopted: the run is `interrupted`, and run again. A data-parallel run is not adopted
either (its replicas' endings make its outcome, and only the killed bench saw them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import BenchError
from orchestrator.launch import capture, outcomes, tracing
from orchestrator.launch.execute import allowed_cpus
from orchestrator.launch.lifecycle import gather, worker_env
from orchestrator.launch.run_record import RunRecord
from orchestrator.launch.sidecar import SAMPLES_FILE
from orchestrator.storage.db import Database
from orchestrator.sweep import catch_up, record_file, recording
from profiler import timeline as timelines

RESULT_FILE = "result.json"
ADOPTED = "adopted after bench was killed: exit status not seen"
log = logging.getLogger(__name__)


def adopt(
    db: Database,
    sweep: Mapping[str, Any],
    config: RunConfig,
    run_dir: Path,
    started: tuple[str, float],
    run_index: int = 0,
) -> record_file.Record | None:
    """The run's record, written into ``run_dir`` from what it holds, where its worker finished;
    None where it did not (or the folder holds a record already, or cannot take one). ``sweep``:
    the sweep's row; ``started``: when the killed bench started the run (its timestamp, and the
    same as seconds since the epoch)."""
    if config.replica_count > 1 or (run_dir / record_file.RECORD_FILE).exists():
        return None
    result, _problem = outcomes.read_result(run_dir / RESULT_FILE)
    if result is None:
        return None
    rec = _run_record(config, run_dir, result, started)
    rec.run_index = run_index
    record = record_file.build(db, sweep, rec)
    try:
        record_file.write(run_dir, record)
    except OSError as exc:
        log.warning(
            "%s: finished, but not adopted: no %s written (%s)", run_dir, record_file.RECORD_FILE, exc
        )
        return None
    log.warning("%s: its worker had finished: %s", run_dir, ADOPTED)
    return record


def _run_record(
    config: RunConfig, run_dir: Path, result: dict[str, Any], started: tuple[str, float]
) -> RunRecord:
    """What the sweep would have gathered at the worker's end, less what only its bench saw."""
    for name in ("stdout.log", "stderr.log"):
        capture.finalize(run_dir / name)
    outcome = outcomes.from_result(result, None)
    outcome.reason = f"{outcome.reason}; {ADOPTED}" if outcome.reason else ADOPTED
    command = f"({ADOPTED}; its folder is {run_dir})"
    rec = gather(config, outcome, run_dir, started[0], None, command, worker_env(config)[1])
    # The result was renamed into place as the worker ended: its time is the run's end.
    ended = _mtime(run_dir / RESULT_FILE)
    rec.ended_at = datetime.fromtimestamp(ended, UTC).isoformat(timespec="seconds")
    rec.wall_seconds = max(0.0, ended - started[1])
    rec.timeline = timelines.read(run_dir / SAMPLES_FILE)
    rec.cpus_allowed = allowed_cpus(config)[1]
    rec.trace = tracing.collect(config, run_dir, result, None)
    return rec


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()


# -- what a run a dead bench left in flight becomes (liveruns.py hands each over) --------------------


def settle(db: Database, data: dict[str, Any], reason: str, adopt: bool = False) -> bool:
    """Store the run a bench left in flight (``data``: its state file, liveruns.parse); False if the
    database holds it already. A run whose record was written is imported as it ended; with
    ``adopt``, so is one whose worker finished; any other is recorded `interrupted` with its
    folder's evidence."""
    run_dir, sweep_id = Path(data["run_dir"]), data["sweep_id"]
    if recorded(db, data):
        return False
    if adopt:
        adopt_run(db, data)
    if (run_dir / record_file.RECORD_FILE).is_file():
        # Killed after the record was written: the run finished, and its record says how.
        try:
            record = record_file.read(run_dir / record_file.RECORD_FILE, db)
        except record_file.RecordError as exc:
            log.warning("%s; recording the run interrupted instead", exc)
        else:
            return catch_up.import_record(db, record, sweep_id).added
    _sweep_row(db, data)
    for name in ("stdout.log", "stderr.log"):
        capture.finalize(run_dir / name)
    stderr = outcomes.read_tail(run_dir / "stderr.log")
    outcome = outcomes.Outcome("interrupted", reason=reason, traceback=outcomes.fatal_traceback(stderr))
    command = f"(in flight when bench stopped; its folder is {run_dir})"
    rec = gather(data["config"], outcome, run_dir, data["started_at"], None, command, {})
    rec.wall_seconds = max(0.0, _last_change(run_dir) - data["started"])
    rec.timeline = timelines.read(run_dir / SAMPLES_FILE)
    rec.run_index = data.get("run_index", 0)
    recording.store_run(db, sweep_id, rec)
    return True


def recorded(db: Database, data: dict[str, Any]) -> bool:
    """Whether the database holds a row of the run in flight ``data`` names."""
    runs = db.runs
    query = sa.select(runs.c.id).where(runs.c.sweep_id == data["sweep_id"], runs.c.run_dir == data["run_dir"])
    return next(db.rows(query), None) is not None


def adopt_run(db: Database, data: dict[str, Any]) -> bool:
    """The record of the run in flight ``data`` names written from its folder, where its worker
    finished; whether it was."""
    started = (data["started_at"], data["started"])
    run_dir, index = Path(data["run_dir"]), data.get("run_index", 0)
    return adopt(db, _sweep_row(db, data), data["config"], run_dir, started, index) is not None


def _sweep_row(db: Database, data: dict[str, Any]) -> dict[str, Any]:
    """The sweep the run's file names, as the database holds it; BenchError if that is another."""
    sweep_id = data["sweep_id"]
    sweep = next(db.rows(sa.select(db.sweeps).where(db.sweeps.c.id == sweep_id)), None)
    if sweep is None or str(sweep["started_at"]) > data["started_at"]:
        raise BenchError(f"sweep {sweep_id} of {db.public_url} is not the one this run belonged to")
    return sweep


def _last_change(run_dir: Path) -> float:
    try:
        return max((p.stat().st_mtime for p in run_dir.iterdir()), default=0.0)
    except OSError:
        return 0.0

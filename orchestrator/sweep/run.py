"""Run a list of configurations one after another, recording each the moment it ends."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.checks import config_from_stored
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import BenchError
from orchestrator.executors.base import Executor, Job
from orchestrator.executors.local import LocalExecutor
from orchestrator.launch.outcomes import Outcome
from orchestrator.launch.process import interrupt_name, stop_signals_interrupt
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.storage.db import Database
from orchestrator.sweep import liveruns, record_file, recording
from orchestrator.sweep.catch_up import AWAY, Patience, Pending, import_record, patiently
from orchestrator.sweep.folders import retry_folder, run_folder, sweep_folder
from orchestrator.sweep.order import Slot
from orchestrator.sweep.progress import Progress

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    sweep_id: int
    outcomes: dict[int, str] = field(default_factory=dict)  # run id -> outcome
    skipped: int = 0
    interrupted: bool = False
    # Runs whose record the database has not taken yet: their folders hold them (catch_up.py).
    pending: dict[Path, str] = field(default_factory=dict)  # run folder -> outcome
    pending_why: str = ""  # the database's last answer


def wall_key(config: RunConfig) -> str:
    """What a configuration is apart from its batch size: runs sharing it hit the same memory wall."""
    settings = {k: v for k, v in config.to_dict().items() if k != "batch_size"}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def walls_of(db: Database, sweep_id: int) -> dict[str, int]:
    """The smallest batch at which each configuration ran out of memory in a sweep (for --resume)."""
    runs = db.runs
    query = sa.select(runs.c.id, runs.c.config_json).where(
        runs.c.sweep_id == sweep_id, runs.c.outcome == "oom"
    )
    walls: dict[str, int] = {}
    for row in db.rows(query):
        where = f"{db.where}: run {row['id']}: config_json"
        _hit_wall(walls, config_from_stored(row["config_json"], where))
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


def run_configs(
    db: Database,
    sweep_id: int,
    configs: Sequence[RunConfig | Slot[RunConfig]],
    runs_root: Path,
    env_root: str | None,
    progress: Progress,
    first_index: int = 1,
    data_files: Mapping[str, Path] | None = None,
    executor: Executor | None = None,
    walls: dict[str, int] | None = None,
    retry_disturbed: int = 0,
) -> SweepResult:
    """Run each configuration (or each Slot: one of a configuration's several runs, in the sweep's
    order, sweep/order.py) and record it as it ends; Ctrl-C or a stop signal (SIGTERM, SIGHUP,
    ...: orchestrator/launch/process.py) stops the sweep, and what was running is recorded `interrupted`.
    Local by default; any executor, one way to record.

    With ``walls`` (the backstop; {} to start a sweep), a configuration that ran out of memory at
    batch b makes the same configuration at a larger batch `skipped`, not run; None turns it off.
    A job an executor took before the wall was known (Ray runs several at once) still runs.

    With ``retry_disturbed`` N, a run flagged disturbed (profiler/disturbance.py) is run again, up
    to N more times, each attempt its own row (reports take a configuration's latest attempt).

    First, what benches that were killed left in flight is ended and recorded (liveruns.py).
    """
    executor = executor or LocalExecutor(env_root)
    result = SweepResult(sweep_id)
    with stop_signals_interrupt():
        pending = Pending(db, sweep_id)  # $BENCH_DB_RETRY_SECONDS checked before anything runs
        sweep = _sweep_row(db, sweep_id)
        folder = liveruns.state_dir()
        ledger = liveruns.Ledger(db, sweep_id, folder)
        status, stopped = "interrupted", "the sweep was interrupted (Ctrl-C)"
        root = sweep_folder(runs_root, sweep_id)
        retries: deque[Job] = deque()
        jobs = _with_retries(
            (
                Job(
                    slot.config,
                    run_folder(root, index, slot.config, slot.run),
                    (data_files or {}).get(slot.config.config_hash),
                    run_index=slot.run,
                )
                for index, slot in enumerate(map(_slot, configs), start=first_index)
            ),
            retries,
        )
        # Only the local executor's runs are on this machine: a Ray task's are the reaper's.
        sink = _Sink(db, sweep_id, progress, result, walls, ledger if executor.name == "local" else None)
        sink.sweep, sink.pending = sweep, pending
        sink.retry = _Retry(retry_disturbed, retries, data_files or {})
        runs = executor.run(sink.backstopped(jobs), progress)
        try:
            try:
                liveruns.reap_stale(db, sweep_id, folder)
                sink.store_all(runs)
            except KeyboardInterrupt as exc:
                # Here, not in the executor: while a run was being recorded, or between runs. The
                # executor is told, stops what it still runs and yields those runs as interrupted.
                result.interrupted = True
                stopped = f"the sweep was interrupted ({interrupt_name(exc)})"
                sink.store_all(_stopped(runs))
            status = "interrupted" if result.interrupted else "finished"
        except KeyboardInterrupt:  # a second one while the stopped runs were recorded
            result.interrupted = True
        except Exception as exc:  # the database went away, a bug: the unrecorded run says which
            stopped = f"the sweep stopped on an error ({type(exc).__name__}: {str(exc)[:300]})"
            raise
        finally:
            runs.close()  # an executor stops whatever it still runs
            ledger.close(f"{stopped} before this run was recorded")
            sink.catch_up()
            _end_sweep(db, sweep_id, status, patient=not result.pending)
    return result


def _sweep_row(db: Database, sweep_id: int) -> dict:
    """The sweep's row, as each run's record carries it (record_file.SWEEP_KEYS)."""
    return next(db.rows(sa.select(db.sweeps).where(db.sweeps.c.id == sweep_id)))


def _end_sweep(db: Database, sweep_id: int, status: str, patient: bool) -> None:
    """The sweep closed; where the database is away, left running (a warning): --resume reopens it."""
    try:
        patiently(
            lambda: recording.end_sweep(db, sweep_id, status),
            "closing the sweep",
            None if patient else Patience(0.0),
        )
    except AWAY as exc:
        log.warning("sweep %d not closed in the database (%s)", sweep_id, str(exc).splitlines()[0][:200])


# A test's hook (never set by bench): "kill" SIGKILLs bench the moment a run's record is written,
# before the database is touched; "pause:SECONDS" waits there; "kill-before-record" SIGKILLs it
# once the worker has ended, before its record is written (sweep/adopt.py adopts that run).
AFTER_RECORD_HOOK = "BENCH_TEST_HOOK_AFTER_RECORD"
BEFORE_RECORD = "kill-before-record"


def _after_record_hook(point: str = "after-record") -> None:
    hook = os.environ.get(AFTER_RECORD_HOOK, "")
    if point == "before-record":
        if hook == BEFORE_RECORD:
            os.kill(os.getpid(), signal.SIGKILL)
    elif hook == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif hook.startswith("pause:"):
        time.sleep(float(hook[len("pause:") :]))


class DiskFull(BenchError):
    """The file system under the run folders is full: the sweep stops, what was written is kept."""


@dataclass
class _Sink:
    """Where every run's record goes, whoever ran it; the backstop's walls move as oom runs land."""

    db: Database
    sweep_id: int
    progress: Progress
    result: SweepResult
    walls: dict[str, int] | None
    ledger: liveruns.Ledger | None = None
    retry: _Retry | None = None
    # Each job's run index by its folder: an executor's record names its folder, not its job.
    indices: dict[Path, int] = field(default_factory=dict)
    sweep: dict = field(default_factory=dict)  # the sweep's row, for each record
    pending: Pending | None = None

    def store_all(self, runs: Iterator[RunRecord]) -> None:
        for rec in runs:
            self.store(rec)

    def store(self, rec: RunRecord) -> None:
        rec.run_index = self.indices.pop(rec.run_dir, rec.run_index)
        _after_record_hook("before-record")
        record = record_file.build(self.db, self.sweep, rec)
        try:
            record_file.write(rec.run_dir, record)
        except OSError as exc:
            if exc.errno in record_file.DISK_FULL:
                self._disk_full(rec, exc)  # stops the sweep
            # Another failure (a Ray run's folder this machine cannot make): the database alone
            # holds the run, as before records existed.
            log.warning("%s: no %s written (%s)", rec.run_dir, record_file.RECORD_FILE, exc.strerror or exc)
        # The folder holds the record now: a bench killed from here on leaves it for --resume.
        if self.ledger is not None:
            self.ledger.done(rec.run_dir)
        _after_record_hook()
        self.result.pending[rec.run_dir] = rec.outcome.outcome
        stored = self._imported(self._pending().store(record))
        run_id: int | str = stored.get(rec.run_dir, "record pending: the database is away")
        disturbed = recording.disturbed_by(rec)
        detail = (_detail(rec.outcome) or _samples(rec)) + (f" (disturbed: {disturbed})" if disturbed else "")
        self.progress.end(rec.outcome.outcome, run_id, detail, rec.run_dir)
        if disturbed and self.retry is not None:
            self.retry.again(rec, self.progress)
        if rec.outcome.outcome == "interrupted":
            self.result.interrupted = True
        if self.walls is not None and rec.outcome.outcome == "oom":
            _hit_wall(self.walls, rec.config)

    def _pending(self) -> Pending:
        if self.pending is None:
            self.pending = Pending(self.db, self.sweep_id)
        return self.pending

    def _imported(self, done: list) -> dict[Path, int]:
        """Each imported record's run id by its folder; the result's pending and outcomes moved."""
        ids = {}
        for record, imported in done:
            run_dir = Path(record.rows["runs"]["run_dir"])
            self.result.pending.pop(run_dir, None)
            self.result.outcomes[imported.run_id] = imported.outcome
            ids[run_dir] = imported.run_id
        self.result.pending_why = self._pending().why if self.result.pending else ""
        return ids

    def catch_up(self) -> None:
        """The sweep's end: what is pending imported, waiting up to the bound once more."""
        if self.pending is not None and self.pending.records:
            self._imported(self.pending.flush())

    def _disk_full(self, rec: RunRecord, exc: OSError) -> None:
        """A record the full disk cannot take: the run is stored straight into the database, its
        outcome saying why, and the sweep stops (every run after would fail the same way)."""
        reason = (
            f"the disk under the run folders is full ({exc.strerror or exc}: {rec.run_dir}): "
            "what was written is kept"
        )
        out = rec.outcome
        out.reason = f"{reason}; {out.reason}" if out.reason else reason
        if out.outcome == "ok":
            out.outcome = "error"  # its folder is not its complete record
        record = record_file.build(self.db, self.sweep, rec)
        run_id = patiently(lambda: import_record(self.db, record, self.sweep_id), "storing a run").run_id
        if self.ledger is not None:
            self.ledger.done(rec.run_dir)
        self.result.outcomes[run_id] = out.outcome
        self.progress.end(out.outcome, run_id, f": {out.reason}", rec.run_dir)
        raise DiskFull(f"the sweep stopped: {reason}; free space and finish it with `bench run --resume`")

    def backstopped(self, jobs: Iterator[Job]) -> Iterator[Job]:
        """The jobs, less those past their configuration's wall: those are recorded skipped here,
        as the executor asks for its next job (in the driver, between the records it yields)."""
        for job in jobs:
            self.indices[job.run_dir] = job.run_index
            wall = self.walls.get(wall_key(job.config)) if self.walls is not None else None
            if wall is not None and job.config.batch_size > wall:
                self.progress.begin(job.config, job.run_dir)
                self.store(skipped_record(job.config, job.run_dir, wall))
                continue
            yield self.ledger.open(job) if self.ledger is not None else job


@dataclass
class _Retry:
    """--retry-disturbed: each configuration's attempts so far, and the queue of those to run again."""

    most: int
    queue: deque[Job]
    data_files: Mapping[str, Path]
    attempts: dict[tuple[str, int], int] = field(default_factory=dict)  # by configuration and run

    def again(self, rec: RunRecord, progress: Progress) -> None:
        which = (rec.config.config_hash, rec.run_index)
        done = self.attempts.get(which, 0)
        if done >= self.most:
            if self.most:
                progress.note(
                    f"{rec.config.label()}: still disturbed after {done} retries (--retry-disturbed)"
                )
            return
        self.attempts[which] = done + 1
        run_dir = retry_folder(rec.run_dir, done + 1)
        data_file = self.data_files.get(rec.config.config_hash)
        self.queue.append(Job(rec.config, run_dir, data_file, run_index=rec.run_index))
        progress.total += 1
        progress.note(f"{rec.config.label()}: disturbed; running it again ({done + 1} of {self.most})")


def _slot(item: RunConfig | Slot[RunConfig]) -> Slot[RunConfig]:
    return item if isinstance(item, Slot) else Slot(item, 0)


def _with_retries(jobs: Iterator[Job], retries: deque[Job]) -> Iterator[Job]:
    """The jobs, each followed by its retries as the sink queues them (it records a run before the
    executor asks for the next job)."""
    for job in jobs:
        yield job
        while retries:
            yield retries.popleft()
    while retries:
        yield retries.popleft()


def _stopped(runs: Generator[RunRecord, None, None]) -> Iterator[RunRecord]:
    """What an executor yields once interrupted: the runs it stopped (none for the local one,
    which was between runs)."""
    try:
        rec = runs.throw(KeyboardInterrupt())
    except (KeyboardInterrupt, StopIteration):
        return
    yield rec
    try:
        yield from runs
    except KeyboardInterrupt:  # the executor's own, said again once it had yielded its runs
        return


def _samples(rec: RunRecord) -> str:
    """`: fewer samples: 4 timed steps in 0.8 s: ...` where an ok run stopped short of its aim."""
    if rec.outcome.outcome != "ok":
        return ""
    stopped = (rec.outcome.result or {}).get("samples_stopped_by")
    note = samples.run_settings(rec.config, samples.run_summary(rec.epochs), stopped)["samples_note"]
    return f": fewer samples: {note}" if note else ""


def _detail(outcome) -> str:
    if outcome.outcome == "ok":
        return ""
    return f": {outcome.reason}" if outcome.reason else ""

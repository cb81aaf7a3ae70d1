"""Write sweeps and runs to the database. A run is one transaction, committed as it ends.

In code, a record is a RunRecord (what one run left, launch/run_record.py); putting one into the
database is storing it (store_run), so the word keeps one meaning.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from orchestrator import __version__
from orchestrator.config import samples
from orchestrator.config.run_config import RunConfig
from orchestrator.config.settings import COLUMNS, FAULT_FIELDS, fault_value
from orchestrator.launch import tracing
from orchestrator.launch.outcomes import EPOCH_COLUMNS, bounded
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.provision import hostinfo
from orchestrator.storage.db import Database, hide_passwords
from orchestrator.sweep import result_fields
from orchestrator.sweep.result_fields import summarise, where_it_died
from profiler import energy
from profiler import kernels as kernel_classes
from profiler import timeline as timelines
from workers import models

INT64 = (-(1 << 63), (1 << 63) - 1)  # what an INTEGER column holds (SQLite, PostgreSQL's BIGINT)


def start_sweep(
    db: Database,
    name: str,
    kind: str,
    total: int,
    matrix_path: str | None,
    matrix_hash: str | None,
    order_seed: int | None = None,
) -> int:
    info = hostinfo.machine()
    row = {
        "name": name,
        "kind": kind,
        "matrix_path": matrix_path,
        "matrix_hash": matrix_hash,
        "started_at": now(),
        "status": "running",
        "total_configs": total,
        "host": info["hostname"],
        "machine": hostinfo.fingerprint(info),
        "bench_version": __version__,
        "git_commit": hostinfo.git_commit(),
        "command": hide_passwords(shlex.join(["bench", *sys.argv[1:]])),
        "order_seed": order_seed,
    }
    # The sweep's first write: a file another program holds locked is waited for and said here,
    # before any run starts (Database.begin_waiting).
    with db.begin_waiting() as conn:
        return db.insert(conn, db.sweeps, row)


def store_calibration(db: Database, sweep_id: int, at: str, figures: dict[str, Any]) -> None:
    """One calibration of the sweep (launch/calibration.py's figures, or its error)."""
    row = {
        "sweep_id": sweep_id,
        "at": at,
        "taken_at": now(),
        "machine": hostinfo.fingerprint(hostinfo.machine()),
        **{k: figures.get(k) for k in CALIBRATION_COLUMNS},
    }
    with db.begin() as conn:
        db.insert(conn, db.calibrations, fit(db.calibrations, row))


CALIBRATION_COLUMNS = (
    "python_mops",
    "matmul_gflops",
    "memory_gbps",
    "python_spread",
    "matmul_spread",
    "memory_spread",
    "seconds",
    "other_cpu_percent",
    "error",
)


def reopen_sweep(db: Database, sweep_id: int, total: int, order_seed: int | None = None) -> None:
    """The sweep marked running again; a seed is recorded where it had none (a sweep of an older
    bench, whose runs each ran once)."""
    sweeps = db.sweeps
    with db.begin_waiting() as conn:
        conn.execute(
            sa.update(sweeps)
            .where(sweeps.c.id == sweep_id)
            .values(
                status="running",
                ended_at=None,
                total_configs=total,
                order_seed=sa.func.coalesce(sweeps.c.order_seed, order_seed),
            )
        )


def end_sweep(db: Database, sweep_id: int, status: str) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.update(db.sweeps).where(db.sweeps.c.id == sweep_id).values(status=status, ended_at=now())
        )


def _run_row(rec: RunRecord) -> dict[str, Any]:
    settings = rec.config.to_dict()
    # The fault worker's settings share one column, a JSON value (settings.fault_value).
    row: dict[str, Any] = {COLUMNS[k]: v for k, v in settings.items() if k not in FAULT_FIELDS}
    row["fault"] = fault_value(settings)
    out = rec.outcome
    result = out.result or {}
    row.update(
        config_hash=rec.config.config_hash,
        config_json=json.dumps(settings, sort_keys=True),
        outcome=out.outcome,
        reason=out.reason,
        exit_code=out.exit_code,
        signal_number=out.signal_number,
        signal_name=out.signal_name,
        exception_type=out.exception_type,
        exception_message=out.exception_message,
        traceback=out.traceback,
        stderr_tail=rec.stderr_tail,
        last_event=json.dumps(rec.events[-1], sort_keys=True) if rec.events else None,
        started_at=rec.started_at,
        ended_at=rec.ended_at,
        wall_seconds=rec.wall_seconds,
        parameter_count=result.get("parameter_count") or _event_field(rec, "built", "parameter_count"),
        run_dir=str(rec.run_dir),
        worker_command=rec.worker_command,
        executor=rec.executor,
        node=rec.node,
        machine=hostinfo.fingerprint(rec.host or hostinfo.machine()),
        packed=int(rec.packed),
        run_index=rec.run_index,
    )
    row.update(where_it_died(rec.events))
    row.update(summarise(rec.epochs))
    row["tokens_per_second"] = tokens_per_second(rec.config, row.get("images_per_second"))
    row["global_batch"] = rec.config.global_batch
    # After the configuration's own columns: the min_time and min_steps the run used, resolved.
    row.update(samples.run_settings(rec.config, row, result.get("samples_stopped_by")))
    row.update(timelines.summarise(rec.timeline, rec.cpus_allowed))
    row.update(tracing.summary(rec.config, rec.trace, out.outcome))
    row.update(result_fields.columns(rec.config, out.result, rec.events))
    row.update(timelines.compile_disturbance(rec.timeline, row.get("compile_seconds")))
    row.update({k: v for k, v in _energy(rec).items() if k != "epoch_joules"})
    return row


def tokens_per_second(config: RunConfig, images_per_second: Any) -> float | None:
    """A token model's throughput in tokens: its samples (sequences) per second times the tokens of
    a sequence (the GRU's 150, a language model's sequence_length); None for an image model."""
    tokens = models.tokens_per_sample(config.model, config.sequence_length)
    if tokens is None or not isinstance(images_per_second, (int, float)):
        return None
    return float(images_per_second) * tokens


def _energy(rec: RunRecord) -> dict[str, Any]:
    return energy.summary(rec.timeline, rec.epochs, sampled=rec.config.sample_interval != 0)


def _event_field(rec: RunRecord, event: str, key: str) -> Any:
    for e in reversed(rec.events):
        if e.get("event") == event:
            return e.get(key)
    return None


def _environment_row(rec: RunRecord) -> dict[str, Any]:
    result = rec.outcome.result or {}
    info: dict[str, Any] = result.get("info") or next(
        (e for e in reversed(rec.events) if e.get("event") == "setup"), {}
    )
    start = next((e for e in rec.events if e.get("event") == "start"), {})
    host = rec.host or hostinfo.machine()  # a Ray run: the node's, as the node saw itself
    known = {"framework_version", "threads", "cuda_version", "event", "t"}
    return {
        "framework_version": info.get("framework_version"),
        "python_version": result.get("python_version") or start.get("python"),
        "python_executable": result.get("python_executable") or start.get("executable"),
        "platform": host["platform"],
        "hostname": host["hostname"],
        "cpu_model": host["cpu_model"],
        "cpu_count": host["cpu_count"],
        "memory_bytes": host["memory_bytes"],
        "gpu_name": host["gpu_name"],
        "gpu_driver": host["gpu_driver"],
        "cuda_version": info.get("cuda_version"),
        "thread_env": json.dumps(rec.thread_env, sort_keys=True),
        "threads_applied": json.dumps(info.get("threads"), sort_keys=True),
        "bench_commit": hostinfo.git_commit(),
        "extra": json.dumps(_extra(info, result, known), sort_keys=True),
        "cpu_flags": _cpu_flags(host.get("cpu_flags")),
    }


def _cpu_flags(listed: Any) -> str | None:
    """The machine's kernel-choosing CPU features as a JSON list; NULL where unknown. A Ray node's
    list crossed a process boundary: kept only as a list of short strings, each one bench knows."""
    if not isinstance(listed, list) or not all(isinstance(f, str) for f in listed):
        return None
    return json.dumps(hostinfo.kernel_flags(listed))


def _extra(info: dict[str, Any], result: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """What the worker reported beyond the named columns; device_memory is the framework's own
    account of device memory (torch.cuda's peaks), set beside NVML's in docs/gpu.md."""
    extra = {k: v for k, v in info.items() if k not in known}
    if result.get("device_memory"):
        extra["device_memory"] = result["device_memory"]
    return extra


def _epoch_rows(rec: RunRecord) -> list[dict[str, Any]]:
    joules = _energy(rec)["epoch_joules"]
    return [
        {**{k: e.get(k) for k in EPOCH_COLUMNS}, "gpu_joules": j}
        for e, j in zip(rec.epochs, joules, strict=True)
    ]


def fit(table: sa.Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """The row with each value as its column stores it: text bounded (outcomes.bounded), numbers
    only where they are numbers. What a worker wrote is outside input, and a value of another type
    would otherwise be stored as it came (SQLite keeps it) and break every report that reads it."""
    return {key: _fit_value(table.c[key].type, value) for key, value in row.items()}


def _fit_value(kind: sa.types.TypeEngine, value: Any) -> Any:
    if value is None:
        return None
    kind = getattr(kind, "impl_instance", kind)  # PostgreSQL's integers take booleans (postgres.py)
    if isinstance(kind, sa.Integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = isinstance(value, int) and INT64[0] <= value <= INT64[1]
        return int(value) if ok else None
    if isinstance(kind, sa.Float):
        ok = isinstance(value, (int, float)) and abs(value) < 1e308  # False for nan: never stored
        return float(value) if ok else None
    return bounded(value)


def disturbed_by(rec: RunRecord) -> str | None:
    """Why an ok run's figures are flagged (its timed epochs, its compile figure), None if neither."""
    if rec.outcome.outcome != "ok":
        return None
    if timelines.disturbed(rec.timeline):
        return "other load on its CPUs"
    compile_seconds = result_fields.columns(rec.config, rec.outcome.result, rec.events)["compile_seconds"]
    if timelines.compile_disturbance(rec.timeline, compile_seconds)["compile_disturbed"] == 1:
        return "other load during its warm-up: its compile seconds"
    return None


def store_run(db: Database, sweep_id: int, rec: RunRecord) -> int:
    """Insert the run, its epochs, environment, samples and kernels in one transaction; return its id."""
    with db.begin() as conn:
        return insert_rows(db, conn, sweep_id, run_rows(db, rec))


def run_rows(db: Database, rec: RunRecord) -> dict[str, Any]:
    """Every row the run will hold, without the ids the database gives: ``runs`` (one row, without
    sweep_id and reproduce) and a list for each of CHILD_TABLES (without run_id). A run's record
    file (sweep/record_file.py) holds exactly these.

    The worker's parts (outcome evidence, result fields, epochs, trace names) go through ``fit``;
    samples and phases are the orchestrator's own profiler's numbers.
    """
    run = fit(db.runs, _run_row(rec))
    # Every replica row the same keys (one executemany), less the link the database gives.
    blank = dict.fromkeys(k for k in db.replicas.c.keys() if k != "run_id")
    return {
        "runs": run,
        "environments": [fit(db.environments, _environment_row(rec))],
        "epochs": [fit(db.epochs, row) for row in _epoch_rows(rec)],
        "samples": timelines.sample_rows(rec.timeline, rec.cpus_allowed),
        "phases": timelines.phases(rec.timeline, rec.cpus_allowed),
        "replicas": [fit(db.replicas, {**blank, **r}) for r in rec.replicas],
        "kernels": [fit(db.kernels, r) for r in kernel_classes.rows(tracing.records(rec.trace))],
    }


# What a run's rows are besides its runs row, each table's rows linked by run_id.
CHILD_TABLES = ("environments", "epochs", "samples", "phases", "replicas", "kernels")


def insert_rows(db: Database, conn: sa.Connection, sweep_id: int, rows: Mapping[str, Any]) -> int:
    """Insert ``run_rows``' rows into the open transaction, linked to the sweep; the run's id."""
    run_id = db.insert(conn, db.runs, {**rows["runs"], "sweep_id": sweep_id, "reproduce": ""})
    conn.execute(
        sa.update(db.runs).where(db.runs.c.id == run_id).values(reproduce=db.reproduce_command(run_id))
    )
    for name in CHILD_TABLES:
        if rows[name]:
            conn.execute(db.meta.tables[name].insert(), [{**r, "run_id": run_id} for r in rows[name]])
    return run_id

"""`bench inspect RUN`: one run's post-mortem: its configuration, outcome and evidence, execution,
epochs, resources and last samples, kernels, replicas, logs, environment and how to reproduce it."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.checks import config_from_stored
from orchestrator.config.values import cut, format_size
from orchestrator.errors import DatabaseError
from orchestrator.report.notes import device_memory
from orchestrator.report.postmortem.crashes import where_died
from orchestrator.report.query.sweeps import pick_sweep
from orchestrator.report.tables import kernels, timeline
from orchestrator.report.tables.timeline import find_run
from orchestrator.storage.db import Database
from orchestrator.text.formats import number
from orchestrator.text.terminal import safe, safe_line
from profiler.disturbance import MIN_SAMPLES
from workers import models


def _compile_load(run: dict[str, Any]) -> str:
    """Other load over the warm-up, and what it may account for of the compile figure
    (profiler/disturbance.py, compile_summary)."""
    flag = run.get("compile_disturbed")
    if flag is None:
        return (
            f"not judged (fewer than {MIN_SAMPLES} sampler figures over the warm-up, no sampler, or recorded "
            "before bench measured it)"
        )
    text = (
        f"{number(run.get('compile_other_cpu_percent'))} % of the allowed CPUs during the warm-up: "
        f"up to {number(run.get('compile_load_seconds'))} s of the compile figure may be that load "
        "(what it had beyond the timed epochs' own)"
    )
    return f"{text}: DISTURBED, not trustworthy" if flag == 1 else f"{text}: quiet"


def load_run(db: Database, run_id: int) -> dict[str, Any]:
    run = {**find_run(db, run_id), "reproduce": db.reproduce_command(run_id)}
    env = next(db.rows(sa.select(db.environments).where(db.environments.c.run_id == run_id)), {})
    epochs = list(
        db.rows(
            sa.select(db.epochs)
            .where(db.epochs.c.run_id == run_id)
            .order_by(db.epochs.c.repeat, db.epochs.c.epoch)
        )
    )
    sweep = pick_sweep(db, run["sweep_id"])
    return {
        "run": run,
        "environment": env,
        "epochs": epochs,
        "sweep": sweep,
        "phases": timeline.phases(db, run_id),
        "last_samples": timeline.samples(db, run_id, last=timeline.LAST_SAMPLES),
        "kernels": kernels.run_kernels(db, run_id),
        "replicas": list(
            db.rows(
                sa.select(db.replicas).where(db.replicas.c.run_id == run_id).order_by(db.replicas.c.replica)
            )
        ),
    }


def _replica_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A data-parallel run's replicas, one line each (every value read back is outside text)."""
    if not rows:
        return []
    lines = [
        "",
        f"replicas ({len(rows)}; batch_size is per replica, the run's figures all of them together):",
    ]
    for r in rows:
        text = (
            f"  replica {safe_line(r['replica'])}: {safe_line(r['outcome'])}, CPUs {safe_line(r['cpus'])}, "
            f"threads {safe_line(r['threads'])}, pid {safe_line(r['pid'])}, {number(r['wall_seconds'])} s"
        )
        if r.get("images_per_second") is not None:
            text += f", its own {number(r['images_per_second'], 4)} images/s"
        if r.get("cpu_percent_mean") is not None:
            text += f", CPU {number(r['cpu_percent_mean'])}%"
        if isinstance(r.get("rss_peak_bytes"), int) and r["rss_peak_bytes"] > 0:
            text += f", peak RSS {format_size(r['rss_peak_bytes'])}"
        if r.get("reason"):
            text += f": {cut(safe_line(r['reason']), 300)}"
        lines.append(text)
        if r.get("run_folder") not in (None, "."):
            lines.append(
                f"    its folder: {safe_line(r['run_folder'])}/ (spec.json, events.jsonl, stderr.log)"
            )
    return lines


def _field(key: str, value: Any) -> str:
    # A value is one line, so no field can fake another ("\n  outcome: ok").
    return f"  {key}: {safe_line(value)}"


def _block(text: str, last: int | None = None) -> list[str]:
    """Multi-line evidence (a traceback, stderr), indented: its newlines kept, everything else
    escaped before it is split, so no other line or paragraph separator can hide a line."""
    lines = safe(text).rstrip().split("\n")
    return ["  " + t for t in (lines[-last:] if last else lines)]


def execution_lines(run: dict[str, Any]) -> list[str]:
    """`bench inspect`'s execution section: the mode and precision that ran and how, the warm-up
    (compile seconds, how the run knew it was steady), the first step's loss and time to target."""
    if run.get("resolved_mode") is None and run.get("resolved_precision") is None:
        return []  # recorded before schema 7
    mode_default = " (the framework's default)" if run.get("mode") is None else ""
    precision_default = " (the default)" if run.get("precision") is None else ""
    lines = [
        "",
        "execution:",
        _field("mode", f"{run['resolved_mode']}{mode_default}"),
        _field("precision", f"{run['resolved_precision']}{precision_default}"),
    ]
    lines += [_field(k, v) for k, v in _how(run.get("execution"))]
    if run.get("compile_seconds") is not None:
        first = run.get("first_step_seconds")
        lines.append(
            _field(
                "compile seconds",
                f"{number(run['compile_seconds'])} s (first step {number(first)} s, "
                f"{run.get('warmup_steps_run')} warm-up steps)",
            )
        )
        lines.append(_field("compile's other load", _compile_load(run)))
    if run.get("steady_by") is not None:
        lines.append(_field("steady", run["steady_by"]))
    if run.get("first_step_loss") is not None:
        lines.append(_field("first step loss", number(run["first_step_loss"])))
    if run.get("target_accuracy") is not None:
        lines.append(_field("time to target", _to_target(run)))
    return lines


def _how(text: Any) -> list[tuple[str, Any]]:
    """What the execution JSON says beyond the mode and precision, one field a line."""
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return [("how", "(not JSON)")]
    if not isinstance(data, dict):
        return []
    shown = [
        (k, v) for k, v in data.items() if k not in ("mode", "precision", "mode_default") and v is not None
    ]
    return [(str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in shown]


def _to_target(run: dict[str, Any]) -> str:
    target = f"target {number(run['target_accuracy'])}"
    if run.get("target_reached") == 1:
        repeats = f", median of {run['repeats']} repeats" if (run.get("repeats") or 1) > 1 else ""
        epoch = f"epoch {run['target_epoch']}" if run.get("target_epoch") is not None else "an epoch"
        return f"reached at {epoch} after {number(run['target_seconds'])} s ({target}{repeats})"
    if run.get("target_reached") == 0:
        every = " in every repeat" if (run.get("repeats") or 1) > 1 else ""
        return f"not reached{every} ({target})"
    return f"unknown: the run ended before it said ({target})"


def inspect_text(data: dict[str, Any]) -> str:
    """`bench inspect`: every value read back from the database is outside text, made safe here."""
    run, env, epochs = data["run"], data["environment"], data["epochs"]
    name = safe_line(data["sweep"]["name"])
    lines = [f"run {run['id']} of sweep {run['sweep_id']} ('{name}'): {safe_line(run['outcome'])}"]
    lines += ["", "configuration:"]
    try:
        config = config_from_stored(run["config_json"], "config_json").to_dict()
        lines += [_field(k, v) for k, v in config.items() if v is not None]
    except DatabaseError as exc:
        # A post-mortem still shows the rest of the row; the rerun of such a row is refused.
        lines.append(f"  (unusable: {safe_line(exc)})")
    lines += ["", "outcome:", _field("outcome", run["outcome"])]
    for key in (
        "reason",
        "exit_code",
        "signal_name",
        "signal_number",
        "exception_type",
        "exception_message",
        "wall_seconds",
        "started_at",
        "ended_at",
        "executor",
        "node",
        "packed",
    ):
        if run.get(key) is not None:
            lines.append(_field(key, run[key]))
    lines.append(_field("last reached", where_died(run)))
    lines += [_field(k, v) for k, v in samples.inspect_fields(run)]
    if run.get("tokens_per_second") is not None:  # a token model: one sample is a sequence
        length = models.tokens_per_sample(run["model"], run.get("sequence_length"))
        lines.append(
            _field("tokens/s", f"{number(run['tokens_per_second'], 4)} (sequences/s x {length} tokens)")
        )
    if run.get("last_event"):
        lines.append(_field("last event", run["last_event"]))
    lines += execution_lines(run)
    if epochs:
        lines += ["", "epochs:"]
        for e in epochs:
            lines.append(
                f"  repeat {e['repeat']} epoch {e['epoch']}: {number(e['seconds'])} s, "
                f"{number(e['images_per_second'], 4)} images/s, loss {number(e['train_loss'])}, "
                f"val acc {number(e['val_accuracy'])}"
                + (f", GPU {number(e['gpu_joules'])} J" if e.get("gpu_joules") is not None else "")
                + (" (extra: for min_time/min_steps, not evaluated)" if e.get("extra") else "")
            )
    # Each of these is one line quoting the database (a phase, a sampler status, a kernel's name).
    resources = timeline.resource_lines(run, data["phases"], data["last_samples"])
    own = device_memory.inspect_text(run, device_memory.framework_peak(env.get("extra")))
    if own is not None:  # after the sampler's GPU line, else before its energy line
        gpu = [i + 1 for i, line in enumerate(resources) if line.startswith("  GPU: memory")]
        energy = [i for i, line in enumerate(resources) if line.startswith("  GPU energy")]
        resources.insert((gpu or energy or [len(resources)])[0], own)
    lines += map(safe_line, resources)
    lines += map(safe_line, kernels.inspect_lines(run, data.get("kernels", [])))
    lines += _replica_lines(data.get("replicas", []))
    if run.get("traceback"):
        lines += ["", "traceback:", *_block(run["traceback"])]
    if run.get("stderr_tail"):
        lines += ["", "stderr (last lines):", *_block(run["stderr_tail"], last=30)]
    lines += ["", "environment:"]
    lines += [_field(k, v) for k, v in env.items() if k != "run_id" and v not in (None, "null", "{}")]
    lines += ["", f"logs: {safe_line(run['run_dir'])} (spec.json, events.jsonl, stdout.log, stderr.log)"]
    lines += [
        "reproduce:",
        f"  {safe_line(run['reproduce'])}",
        f"  worker, as recorded: {safe_line(run['worker_command'])}",
    ]
    return "\n".join(lines)

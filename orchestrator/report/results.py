"""Reports over the database: the results table, the crash list, and one run's post-mortem."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.checks import config_from_stored
from orchestrator.config.run_config import RECURRENT_MODELS, TOKEN_MODELS
from orchestrator.config.values import cut, format_size
from orchestrator.errors import BenchError, DatabaseError
from orchestrator.report import calibration, device_memory, kernels, timeline
from orchestrator.report.select import (
    DISTURBANCE_KEYS,
    Selection,
    disturbed_mark,
    disturbed_note,
    latest_runs,
)
from orchestrator.report.timeline import find_run
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number, render
from orchestrator.text.terminal import safe, safe_line
from profiler.disturbance import MIN_SAMPLES
from workers import models


def pick_sweep(db: Database, sweep_id: int | None) -> dict[str, Any]:
    query = sa.select(db.sweeps)
    if sweep_id is None:
        query = query.order_by(db.sweeps.c.id.desc()).limit(1)
    else:
        query = query.where(db.sweeps.c.id == sweep_id)
    sweep = next(db.rows(query), None)
    if sweep is None:
        raise BenchError(f"no sweep {sweep_id}" if sweep_id else "the database has no sweeps yet")
    return sweep


def sweep_heading(sweep: dict[str, Any]) -> str:
    # One line, whatever the sweep's name holds: a newline in it must not fake a line of the report.
    return safe_line(
        f"sweep {sweep['id']} '{sweep['name']}' ({sweep['status']}, started {sweep['started_at']}) "
        f"on {sweep['machine']}"
    )


def model_label(row: dict[str, Any]) -> str:
    return f"fault:{row['fault']}" if row["framework"] == "fault" else row["model"]


def _epoch_seconds(row: dict[str, Any]) -> str:
    median = row.get("median_epoch_seconds")
    if median is None:
        return "—"
    text = number(median)
    if (row.get("timed_epochs") or 1) > 1 or row.get("repeats", 1) > 1 or row.get("epochs", 1) > 1:
        text += f" ({number(row['min_epoch_seconds'])}–{number(row['max_epoch_seconds'])})"
    text += TRACED_MARK if row.get("trace") == "kernels" else ""
    text += disturbed_mark(row)
    return text + PACKED_MARK if row.get("packed") else text


TRACED_MARK = " *"
TRACED_NOTE = "* traced (trace: kernels): timings perturbed by the profiler; bench report --kernels"
PACKED_MARK = " +"
PACKED_NOTE = (
    "+ packed (--pack): shared its node with other runs; timings not comparable (docs/distributed.md)"
)


def _ms_per_image(row: dict[str, Any]) -> str:
    spi = row.get("seconds_per_image")
    return "—" if spi is None else number(spi * 1000)


def _accuracy(row: dict[str, Any]) -> str:
    acc = row.get("final_val_accuracy")
    return "—" if acc is None else f"{acc:.3f}"


# The run's timing samples and their spread, marked where wide or few (orchestrator/config/samples.py).
SAMPLE_COLUMNS = [
    Column("samples", "timed_epochs", samples.count_text),
    Column("spread", "relative_spread", samples.spread_text),
]
RESULT_COLUMNS = [
    Column("run", "id"),
    Column("framework", "framework", lambda r: r["framework"]),
    Column("model", "model", model_label),
    Column("device", "device", lambda r: r["device"]),
    Column("batch", "batch_size"),
    Column("optimizer", "optimizer", lambda r: r["optimizer"]),
    Column("lr", "lr", lambda r: f"{r['lr']:g}"),
    Column("threads", "threads", lambda r: str(r["threads"] or "default")),
    Column("outcome", "outcome", lambda r: r["outcome"]),
    Column("epoch s (median, min–max)", "median_epoch_seconds", _epoch_seconds),
    Column("images/s", "images_per_second", lambda r: number(r.get("images_per_second"), 4)),
    Column("ms/image", "seconds_per_image", _ms_per_image),
    Column("val acc", "final_val_accuracy", _accuracy),
    *SAMPLE_COLUMNS,
]


def token_unit_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What one "image" is for each token model among the rows: a sequence of so many tokens, and
    the language models' tokens/s (a sequence_length axis gives several lengths)."""
    notes = []
    for model in sorted({r["model"] for r in rows if r["model"] in TOKEN_MODELS}):
        lengths = sorted(
            {models.tokens_per_sample(model, r.get("sequence_length")) for r in rows if r["model"] == model}
        )
        tokens = " or ".join(str(n) for n in lengths)
        if model in RECURRENT_MODELS:
            notes.append(
                f'{model}: one "image" is one sequence of {tokens} tokens (images/s are '
                "sequences/s, ms/image ms per sequence)"
            )
        else:
            notes.append(
                f'{model}: one "image" is one sequence of {tokens} tokens, each position predicting the '
                "next (images/s are sequences/s, ms/image ms per sequence; tokens/s = sequences/s x "
                "tokens: the tokens/s column, bench inspect)"
            )
    return notes


def _what(row: dict[str, Any]) -> str:
    return "features" if row.get("features") else "logits"


# Inference (task: inference) trains nothing: no optimizer, no accuracy; its measure is seconds
# per 1,000 images (the feature-extraction benchmark's unit), with images/s and ms/image beside it.
INFERENCE_COLUMNS = [
    Column("run", "id"),
    Column("framework", "framework", lambda r: r["framework"]),
    Column("model", "model", model_label),
    Column("output", "features", _what),
    Column("device", "device", lambda r: r["device"]),
    Column("batch", "batch_size"),
    Column("threads", "threads", lambda r: str(r["threads"] or "default")),
    Column("outcome", "outcome", lambda r: r["outcome"]),
    Column("epoch s (median, min–max)", "median_epoch_seconds", _epoch_seconds),
    Column("s/1000 images (= ms/image)", "seconds_per_image", _ms_per_image),
    Column("images/s", "images_per_second", lambda r: number(r.get("images_per_second"), 4)),
    *SAMPLE_COLUMNS,
]
# CSV of a sweep with both: one header, the training columns and what tells inference apart.
MIXED_COLUMNS = [
    *RESULT_COLUMNS,
    Column("task", "task", lambda r: r.get("task") or "train"),
    INFERENCE_COLUMNS[3],
]


RESULT_KEYS = {c.key for c in RESULT_COLUMNS} - {"relative_spread"} | {
    "task",
    "features",
    "trace",
    "packed",
    "fault",
    "repeats",
    "epochs",
    "min_epoch_seconds",
    "max_epoch_seconds",
    "steps_per_epoch",
    "timed_steps",
    "timed_seconds",
    "samples_note",
    "tokens_per_second",
    "sequence_length",
    *DISTURBANCE_KEYS,
}
TOKENS_COLUMN = Column("tokens/s", "tokens_per_second", lambda r: number(r.get("tokens_per_second"), 4))


def _with_tokens(columns: list[Column], rows: list[dict[str, Any]]) -> list[Column]:
    """The columns, with tokens/s after images/s where a language model is among the rows."""
    if not any(r.get("tokens_per_second") is not None for r in rows):
        return columns
    at = next(i for i, c in enumerate(columns) if c.key == "images_per_second") + 1
    return [*columns[:at], TOKENS_COLUMN, *columns[at:]]


# CSV has no marks: the disturbance is two fields of its own (JSON carries every column anyway).
CSV_EXTRA = [
    Column("disturbed", "disturbed"),
    Column("other_cpu_percent_mean", "other_cpu_percent_mean"),
]


def _where(row: dict[str, Any]) -> str:
    phase = row.get("last_phase") or "before start"
    parts = [] if phase == "epoch" else [phase]
    if row.get("last_epoch") and phase in ("epoch", "eval", "reset"):
        parts.append(f"epoch {row['last_epoch']}")
    if row.get("last_step") is not None:
        parts.append(f"after step {row['last_step']}")
    return " ".join(parts)


def why(row: dict[str, Any]) -> str:
    if row.get("exception_type"):
        return f"{row['exception_type']}: {row.get('exception_message') or ''}".strip()
    return row.get("reason") or ""


CRASH_COLUMNS = [
    Column("run", "id"),
    Column("framework", "framework", lambda r: r["framework"]),
    Column("model", "model", model_label),
    Column("device", "device", lambda r: r["device"]),
    Column("batch", "batch_size"),
    Column("outcome", "outcome", lambda r: r["outcome"]),
    Column("signal", "signal_name", lambda r: r.get("signal_name") or "—"),
    Column("where it died", "last_phase", _where),
    Column("why", "reason", lambda r: why(r)[:120]),
]


CRASH_KEYS = {c.key for c in CRASH_COLUMNS} | {
    "fault",
    "last_epoch",
    "last_step",
    "exception_type",
    "exception_message",
}


def results(
    db: Database,
    sweep_id: int | None,
    fmt: str,
    crashes: bool,
    where: dict[str, frozenset[Any]] | None = None,
) -> str:
    sweep = pick_sweep(db, sweep_id)
    # JSON carries every column; the other forms read only what their columns show.
    wanted = None if fmt == "json" else (CRASH_KEYS if crashes else RESULT_KEYS)
    read = sorted(wanted) if wanted is not None else None
    rows = [samples.mark_run(r) for r in latest_runs(db, Selection((sweep,), where or {}), read)]
    if crashes:
        rows = [r for r in rows if r["outcome"] != "ok"]
        for r in rows:
            r["where_it_died"] = _where(r)
    inference = [r for r in rows if r.get("task") == "inference"] if not crashes else []
    training = [r for r in rows if r.get("task") != "inference"] if not crashes else rows
    if fmt in ("csv", "json") or not inference:
        columns = CRASH_COLUMNS if crashes else (MIXED_COLUMNS if inference else RESULT_COLUMNS)
        columns = columns if crashes else _with_tokens(columns, rows)
        columns = columns + CSV_EXTRA if fmt == "csv" and not crashes else columns
        body = render(rows, columns, fmt, document={"sweep": sweep, "runs": rows})
    else:  # table and markdown: inference rows in a table of their own, with their units
        parts = [render(training, _with_tokens(RESULT_COLUMNS, training), fmt)] if training else []
        parts += ["inference (evaluation mode, no gradients):", render(inference, INFERENCE_COLUMNS, fmt)]
        body = "\n".join(parts)
    if fmt != "table":
        return body
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    head = sweep_heading(sweep)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no runs"
    if crashes and not rows:
        return f"{head}\nevery configuration ended ok"
    note = f"\n{TRACED_NOTE}" if any(r.get("trace") == "kernels" for r in rows) and not crashes else ""
    note += f"\n{PACKED_NOTE}" if any(r.get("packed") for r in rows) and not crashes else ""
    note += "".join(f"\n{n}" for n in samples.mark_notes(rows)) if not crashes else ""
    if not crashes:
        note += "".join(f"\n{n}" for n in disturbed_note(r for r in rows if r["outcome"] == "ok"))
        note += "".join(f"\n{n}" for n in token_unit_notes(rows))
        note += "".join(f"\n{n}" for n in calibration.notes(db, [sweep["id"]]))
    return f"{head}\n{body}\n{len(rows)} configurations: {summary}{note}"


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
    lines.append(_field("last reached", _where(run)))
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

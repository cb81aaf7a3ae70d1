"""The results table (`bench report`, the default): one row per configuration of one sweep, its
outcome, epoch seconds, images/s, ms/image and validation accuracy; inference runs in a table of
their own."""

from __future__ import annotations

from typing import Any

from orchestrator.config import samples
from orchestrator.report.notes import calibration
from orchestrator.report.notes.units import token_unit_notes
from orchestrator.report.query.select import (
    DISTURBANCE_KEYS,
    Selection,
    disturbed_mark,
    disturbed_note,
    latest_runs,
)
from orchestrator.report.query.sweeps import model_label, pick_sweep, sweep_heading
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number, render


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
    "config_hash",
    "run_index",
    "planned_runs",
    *DISTURBANCE_KEYS,
}
TOKENS_COLUMN = Column("tokens/s", "tokens_per_second", lambda r: number(r.get("tokens_per_second"), 4))


def _of(row: dict[str, Any]) -> str:
    return f"{(row.get('run_index') or 0) + 1}/{row.get('planned_runs') or 1}"


OF_COLUMN = Column("of", "run_index", _of)


def _with_runs(columns: list[Column], rows: list[dict[str, Any]]) -> list[Column]:
    """The columns, with "of" (run 2/5 of its configuration) after the run id where a configuration
    asked for several runs."""
    if not any((r.get("planned_runs") or 1) > 1 for r in rows):
        return columns
    return [columns[0], OF_COLUMN, *columns[1:]]


def _with_tokens(columns: list[Column], rows: list[dict[str, Any]]) -> list[Column]:
    """The columns, with tokens/s after images/s where a language model is among the rows; "of"
    where configurations ran several times."""
    columns = _with_runs(columns, rows)
    if not any(r.get("tokens_per_second") is not None for r in rows):
        return columns
    at = next(i for i, c in enumerate(columns) if c.key == "images_per_second") + 1
    return [*columns[:at], TOKENS_COLUMN, *columns[at:]]


# CSV has no marks: the disturbance is two fields of its own (JSON carries every column anyway).
CSV_EXTRA = [
    Column("disturbed", "disturbed"),
    Column("other_cpu_percent_mean", "other_cpu_percent_mean"),
]


def results(
    db: Database, sweep_id: int | None, fmt: str, where: dict[str, frozenset[Any]] | None = None
) -> str:
    """The results table of one sweep (the latest where `sweep_id` is None): a row per configuration."""
    sweep = pick_sweep(db, sweep_id)
    # JSON carries every column; the other forms read only what their columns show.
    read = None if fmt == "json" else sorted(RESULT_KEYS)
    rows = [samples.mark_run(r) for r in latest_runs(db, Selection((sweep,), where or {}), read)]
    inference = [r for r in rows if r.get("task") == "inference"]
    training = [r for r in rows if r.get("task") != "inference"]
    if fmt in ("csv", "json") or not inference:
        columns = _with_tokens(MIXED_COLUMNS if inference else RESULT_COLUMNS, rows)
        columns = columns + CSV_EXTRA if fmt == "csv" else columns
        body = render(rows, columns, fmt, document={"sweep": sweep, "runs": rows})
    else:  # table and markdown: inference rows in a table of their own, with their units
        parts = [render(training, _with_tokens(RESULT_COLUMNS, training), fmt)] if training else []
        inference_columns = _with_runs(INFERENCE_COLUMNS, inference)
        parts += ["inference (evaluation mode, no gradients):", render(inference, inference_columns, fmt)]
        body = "\n".join(parts)
    if fmt != "table":
        return body
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no runs"
    note = f"\n{TRACED_NOTE}" if any(r.get("trace") == "kernels" for r in rows) else ""
    note += f"\n{PACKED_NOTE}" if any(r.get("packed") for r in rows) else ""
    note += "".join(f"\n{n}" for n in samples.mark_notes(rows))
    note += "".join(f"\n{n}" for n in disturbed_note(r for r in rows if r["outcome"] == "ok"))
    note += "".join(f"\n{n}" for n in token_unit_notes(rows))
    note += "".join(f"\n{n}" for n in calibration.notes(db, [sweep["id"]]))
    return f"{sweep_heading(sweep)}\n{body}\n{_counted(rows)}: {summary}{note}"


def _counted(rows: list[dict[str, Any]]) -> str:
    """ "N configurations", or "N runs of M configurations" where some ran several times (runs: N)."""
    configs = len({r["config_hash"] for r in rows})
    if configs == len(rows):
        return f"{configs} configurations"
    return f"{len(rows)} runs of {configs} configurations (runs: the comparison tables pool them)"

"""`bench report --table modes`: framework × model × execution mode × precision (issue 24).

One row per configuration and what it ran (select.summaries never pools runs of different modes or
precisions): the step time (the median seconds per image × the batch size, with the min–max, the
samples marks and the disturbed mark the other tables show), images/s, the speed-up against the
SAME framework's eager fp32 run of the otherwise same configuration on the same machine (never
against another framework; — where there is none), the compile seconds (warm-up time above what as
many steady steps take, kept apart from the step times), the time to the target accuracy, and for a
cell that did not run ok its outcome with the reason (unsupported: what the framework lacks).
A mode left unset is labelled `(default)`: docs/fairness.md#execution-modes-and-precision.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.query import execution
from orchestrator.report.query.select import DISTURBANCE_KEYS, Selection, sort_key
from orchestrator.report.tables.base import (
    INTERVAL_KEYS,
    Table,
    against_baseline,
    interval_columns,
    key_columns,
    keys_of,
    load,
    measured_cell,
    new_table,
    outcome_text,
    record_of,
    sample_columns,
    set_speedup_interval,
    sorting,
    throughput,
    with_interval,
)
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, number

Row = dict[str, Any]
# What may differ between a cell and its baseline: the execution settings. Everything else (and the
# machine, and the framework) is the same.
EXECUTION_FIELDS = frozenset(("mode", "precision", "compile_mode"))
TITLE = (
    "execution modes and precision: ms per step from the median time per image × batch (min–max over "
    "timed epochs); speed-up: this framework's eager fp32 step time over this cell's (above 1 is "
    "faster); compile s: warm-up time above as many steady steps, kept out of the step times"
)


def modes(db: Database, sel: Selection) -> Table:
    rows, machines, notes = load(sel, db, task=None)
    table = new_table("modes", TITLE, sel, machines, notes)
    keys = keys_of(rows, ("framework", "model", "mode_label", "precision_label"), ())
    order = [{"mode_label": "ran_mode", "precision_label": "ran_precision"}.get(k, k) for k in keys]
    rows.sort(key=lambda r: sort_key(r, sorting([*order, "mode", "precision"])))
    for r in rows:
        throughput(r)
        _step(r)
    _speedups(rows)
    table.rows = rows
    table.columns = key_columns(keys) + COLUMNS + interval_columns(rows) + sample_columns()
    table.record_keys = [*keys, *(k for k in [*RECORD_KEYS, *INTERVAL_KEYS] if k not in keys)]
    table.records = [record_of(r, table.record_keys) for r in rows]
    table.notes += samples.mark_notes(rows)
    if any(execution.compile_mark(r) for r in rows):
        table.notes.append(execution.COMPILE_MARK_NOTE)
    if any(r.get("target_accuracy") is not None for r in rows):
        table.notes.append(
            "time to target: training and evaluation wall seconds until the validation accuracy first "
            "reached target_accuracy (median over the runs that reached it; the epoch that did)"
        )
    return table


def _step(r: Row) -> None:
    """Milliseconds per training (or inference) step, from the one aggregate, seconds per image."""
    scale = 1000 * (samples.global_batch(r) or 0)
    for end in ("median", "min", "max"):
        spi = r.get(f"seconds_per_image_{end}")
        r[f"step_ms_{end}"] = spi * scale if r.get("ok_runs") and spi and scale else None


def _baseline_key(r: Row) -> tuple[Any, ...]:
    """A cell's peers for the speed-up: its machine, framework and every setting but the execution ones."""
    return (r["fingerprint"], *(r.get(f) for f in FIELD_NAMES if f not in EXECUTION_FIELDS))


def _speedups(rows: list[Row]) -> None:
    """Each ok cell's speed-up over its framework's eager fp32 cell of otherwise the same settings.
    Where both an explicit `mode: eager` and an unset mode (PyTorch's and Paddle's default) ran,
    they are the same way of running; the explicit one is the baseline."""
    baselines: dict[tuple[Any, ...], Row] = {}
    for r in rows:
        if r.get("ok_runs") and r.get("step_ms_median") and execution.is_baseline(r):
            key = _baseline_key(r)
            if key not in baselines or r.get("mode") == "eager":
                baselines[key] = r
    for r in rows:
        base = baselines.get(_baseline_key(r))
        ok = base is not None and r.get("step_ms_median") and base.get("step_ms_median")
        r["speedup_vs_eager_fp32"] = base["step_ms_median"] / r["step_ms_median"] if ok and base else None
        set_speedup_interval(r, "speedup_vs_eager_fp32", base if ok else None)
        r["baseline_config_hash"] = base["config_hash"] if ok and base else None
        r["baseline"] = base if ok else None


def _times(value: float) -> str:
    return f"×{value:.2f}"


def _compile_cell(r: Row) -> str:
    return number(r.get("compile_seconds")) + execution.compile_mark(r)


def _seconds(key: str) -> Column:
    return Column(key.replace("_seconds", " s").replace("_", " "), key, lambda r: number(r.get(key)))


COLUMNS = [
    Column("outcome", "outcome", outcome_text),
    Column("ms/step (median, min–max)", "step_ms_median", lambda r: measured_cell(r, "step_ms")),
    Column("images/s", "images_per_second_median", lambda r: number(r.get("images_per_second_median"))),
    Column(
        "speed-up vs eager fp32",
        "speedup_vs_eager_fp32",
        lambda r: against_baseline(
            r, r.get("speedup_vs_eager_fp32"), lambda _: with_interval(r, "speedup_vs_eager_fp32", _times)
        ),
    ),
    Column("compile s", "compile_seconds", _compile_cell),
    _seconds("first_step_seconds"),
    Column("time to target", "target_seconds", execution.target_text),
]
RECORD_KEYS = [
    "ran_mode",
    "ran_precision",
    "mode",
    "precision",
    "outcome",
    "reason",
    "runs",
    "ok_runs",
    "step_ms_median",
    "step_ms_min",
    "step_ms_max",
    "images_per_second_median",
    "images_per_second_min",
    "images_per_second_max",
    "seconds_per_image_median",
    "speedup_vs_eager_fp32",
    "speedup_vs_eager_fp32_low",
    "speedup_vs_eager_fp32_high",
    "baseline_config_hash",
    "compile_seconds",
    "compile_disturbed",
    "compile_load_seconds",
    "first_step_seconds",
    "target_accuracy",
    "target_runs",
    "target_reached_runs",
    "target_seconds",
    "target_epoch",
    *samples.SAMPLE_KEYS,
    *DISTURBANCE_KEYS,
    "config_hash",
]

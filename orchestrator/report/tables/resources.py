"""`bench report --resources`: the sidecar profiler's summary per configuration, and the two
comparisons the research asks for (multi-threading; memory by batch size) grouped below it.

Table and markdown show human units (MiB, % of one core); CSV and JSON keep the raw numbers
under the database's column names (bytes, %), so the unit is in the name.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.errors import ConfigError
from orchestrator.report.notes import device_memory
from orchestrator.report.query import execution
from orchestrator.report.query.select import Selection, disturbed_mark, disturbed_note, latest_runs
from orchestrator.report.query.sweeps import model_label, pick_sweep, sweep_heading
from orchestrator.stats import bootstrap
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, mib_column, number, render
from profiler import energy

# Each comparison holds everything else fixed: the threads one groups by batch size too, the batch
# one by threads too (each drops its own axis), so no row averages over the other study's axis.
DEFAULT_GROUP = ("framework", "model", "device", "batch_size", "threads")
UNITS = {
    "cpu_percent_mean": "% of one core, mean over the timed epochs",
    "cpu_percent_max": "% of one core, highest sample",
    "cpu_percent_allowed": "mean as % of the CPUs the run could use (cpu_allowed)",
    "threads_steady": "OS threads over the process tree, most frequent during the timed epochs",
    "threads_max": "OS threads over the process tree, highest sample",
    "rss_peak_bytes": "bytes, highest resident set of the process tree",
    "rss_mean_bytes": "bytes, mean resident set during the timed epochs",
    "uss_peak_bytes": "bytes, highest unique set (memory freed if the tree exited)",
    "gpu_memory_peak_bytes": "bytes of device memory (NVML), highest sample",
    "gpu_framework_peak_bytes": "bytes, the framework allocator's own high-water mark (torch.cuda peak "
    "reserved, XLA peak in use): unlike NVML's, not sampled",
    "gpu_util_mean": "% (NVML), mean over the timed epochs",
    "images_per_second": "1 / the median seconds per image over the timed epochs",
    "gpu_joules_per_epoch": "J, the run's GPUs (whole device), median over the timed epochs",
    "gpu_joules_per_image": "J, the same divided by the epoch's images, median",
    "gpu_energy_source": "what the joules come from, or 'none: ' and why there is no figure",
    "other_cpu_percent_mean": "% of the allowed CPUs' capacity used by anything but bench, timed epochs",
    "disturbed": "1: other load or steal past the threshold (docs/profiler.md); 0: quiet; null: unknown",
}


def threads_label(threads: int) -> str:
    """0 leaves the framework at its own default."""
    return str(threads) if threads else "default"


def _sampler(row: dict[str, Any]) -> str:
    status = row.get("sampler_status")
    if status is None:
        return "none (recorded before the profiler)"
    return "" if status == "ok" else status


def _millis(value: float | None) -> str:
    return "—" if value is None else number(value * 1000)


GPU_KEYS = (
    "gpu_memory_peak_bytes",
    "gpu_framework_peak_bytes",
    "gpu_util_mean",
    "gpu_joules_per_epoch",
    "gpu_joules_per_image",
)
RESOURCE_COLUMNS = [
    Column("run", "id"),
    Column("framework", "framework", lambda r: r["framework"]),
    Column("model", "model", model_label),
    Column("device", "device", lambda r: r["device"]),
    Column("batch", "batch_size"),
    Column("threads", "threads", lambda r: threads_label(r["threads"])),
    Column("cpus", "cpus", lambda r: r.get("cpus") or "all"),
    Column("outcome", "outcome", lambda r: r["outcome"]),
    Column("CPU % mean", "cpu_percent_mean"),
    Column("CPU % max", "cpu_percent_max"),
    Column("% of allowed", "cpu_percent_allowed"),
    Column("threads steady", "threads_steady"),
    Column("threads max", "threads_max"),
    mib_column("RSS peak MiB", "rss_peak_bytes"),
    mib_column("RSS mean MiB", "rss_mean_bytes"),
    Column("peak in", "rss_peak_phase", lambda r: r.get("rss_peak_phase") or "—"),
    mib_column("USS peak MiB", "uss_peak_bytes"),
    Column("GPU mem peak MiB", "gpu_memory_peak_bytes", device_memory.nvml_cell),
    mib_column("GPU fw peak MiB", "gpu_framework_peak_bytes"),
    Column("GPU util %", "gpu_util_mean"),
    Column("GPU J/epoch", "gpu_joules_per_epoch"),
    Column("GPU mJ/image", "gpu_joules_per_image", lambda r: _millis(r.get("gpu_joules_per_image"))),
    mib_column("swap peak MiB", "swap_peak_bytes"),
    # The run's CPU figures shrink when it shares its CPUs: the other load says whether it did.
    Column(
        "other load %",
        "other_cpu_percent_mean",
        lambda r: (
            number(r.get("other_cpu_percent_mean")) + (disturbed_mark(r) if r["outcome"] == "ok" else "")
        ),
    ),
    Column("sampler", "sampler_status", _sampler),
]
# What CSV and JSON carry besides the columns: enough to tell configurations apart and to read units.
EXTRA_KEYS = (
    "fault",
    "config_hash",
    "sample_interval",
    "cpu_allowed",
    "samples_count",
    "sampler_cpu_seconds",
    "gpu_energy_source",
    "disturbed",
)


def _peak_phases(db: Database, run_ids: list[int]) -> dict[int, str]:
    """The phase in which each run's RSS peaked: setup, an epoch, evaluation…"""
    phases = db.phases
    query = (
        sa.select(phases.c.run_id, phases.c.phase, phases.c.epoch, phases.c.rss_peak_bytes)
        .where(phases.c.run_id.in_(run_ids))
        .order_by(phases.c.run_id, phases.c.seq)  # on a tie the first phase is named, on either backend
    )
    best: dict[int, tuple[int, str]] = {}
    for p in db.rows(query):
        peak = p["rss_peak_bytes"] or 0
        if peak and peak > best.get(p["run_id"], (0, ""))[0]:
            label = p["phase"] + (f" {p['epoch']}" if p["epoch"] is not None else "")
            best[p["run_id"]] = (peak, label)
    return {run_id: label for run_id, (_, label) in best.items()}


def raw_columns(keys: Sequence[str]) -> list[Column]:
    """CSV headers are the database's column names, whose suffix says the unit (bytes, percent)."""
    return [Column(k, k) for k in keys]


def resources(
    db: Database,
    sweep_id: int | None,
    fmt: str,
    group_by: str | None,
    where: dict[str, frozenset[Any]] | None = None,
) -> str:
    keys = parse_group_by(group_by)
    sweep = pick_sweep(db, sweep_id)
    rows = latest_runs(db, Selection((sweep,), where or {}))
    peaks = _peak_phases(db, [r["id"] for r in rows])
    own = device_memory.framework_peaks(db, [r["id"] for r in rows])
    for r in rows:
        r["rss_peak_phase"] = peaks.get(r["id"])
        r["gpu_framework_peak_bytes"] = own.get(r["id"])
    # Runs that ran different modes or precisions never share a comparison's cell, whatever
    # --group-by says: those join every group key where they vary (report/query/execution.py).
    keys = (*keys, *(k for k in RAN if k not in keys and len({_value(r, k) for r in rows}) > 1))
    comparisons = {"threads": compare_threads(rows, keys), "batch": compare_batch(rows, keys)}
    wanted = [c.key for c in RESOURCE_COLUMNS] + list(EXTRA_KEYS)
    if fmt == "csv":
        return render(rows, raw_columns(wanted), "csv")
    if fmt == "json":
        runs = [{k: r.get(k) for k in wanted} for r in rows]
        document = {"sweep": sweep, "units": UNITS, "runs": runs, "comparisons": comparisons}
        return render(runs, [], "json", document=document)
    # GPU columns where a GPU was seen; swap where the machine had swap (0 then means none used).
    columns = [
        c
        for c in RESOURCE_COLUMNS
        if (c.key not in GPU_KEYS or any(r.get(c.key) for r in rows))
        and (c.key != "swap_peak_bytes" or any(r.get(c.key) is not None for r in rows))
    ]
    parts = [sweep_heading(sweep), render(rows, columns, fmt)]
    if not any(r.get("samples_count") for r in rows):
        parts.append("no run of this sweep has resource samples (sampler off, or recorded before it)")
    parts += energy_notes(rows)
    if any(device_memory.missed(r) for r in rows):
        parts.append(device_memory.MISSED_NOTE)
    parts += disturbed_note(r for r in rows if r["outcome"] == "ok")
    parts += _sections(comparisons, keys, fmt)
    return "\n".join(parts)


def energy_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Why runs have no GPU energy figure, in words, one line per reason (never a 0 in the table)."""
    by_reason: dict[str, list[int]] = {}
    for r in rows:
        if r.get("gpu_joules_per_epoch") is None:
            by_reason.setdefault(energy.describe(r), []).append(r["id"])
    return [f"GPU energy, runs {_id_list(ids)}: {reason}" for reason, ids in by_reason.items()]


def _id_list(ids: list[int]) -> str:
    return ", ".join(map(str, ids)) if len(ids) <= 8 else f"{ids[0]}–{ids[-1]} ({len(ids)} runs)"


def parse_group_by(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_GROUP
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in FIELD_NAMES]
    if unknown or not keys:
        raise ConfigError(
            f"--group-by {text}: {unknown[0] if unknown else 'no key'} is not a configuration field "
            f"(fields: {', '.join(FIELD_NAMES)})"
        )
    return keys


# --- the grouped comparisons -------------------------------------------------------------------


RAN = {"mode": execution.mode_label, "precision": execution.precision_label}


def _value(row: dict[str, Any], key: str) -> Any:
    if key in RAN:  # what the run ran, not only what it asked for
        return RAN[key](row)
    if key == "exit_code":  # the setting's column; exit_code is the process's exit status
        return row.get("exit_code_setting")
    return model_label(row) if key == "model" else row.get(key)


def _groups(
    rows: Sequence[dict[str, Any]], keys: Sequence[str], axis: str
) -> dict[tuple[Any, ...], dict[Any, list[dict[str, Any]]]]:
    """Runs that ended ok and were sampled, by group and then by the compared axis's value.
    A failed run's resources describe how it failed, not the configuration, so it is left out."""
    groups: dict[tuple[Any, ...], dict[Any, list[dict[str, Any]]]] = {}
    for r in rows:
        if r["outcome"] == "ok" and r.get("samples_count"):
            key = tuple(_value(r, k) for k in keys if k != axis)
            groups.setdefault(key, {}).setdefault(r[axis], []).append(r)
    return groups


def _mean(runs: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def _min(runs: Sequence[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in runs if r.get(key) is not None]
    return min(values) if values else None


def _max(runs: Sequence[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in runs if r.get(key) is not None]
    return max(values) if values else None


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def _comparison(
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str],
    axis: str,
    is_base: Callable[[Any], bool],
    summarise: Callable[[list[dict[str, Any]]], dict[str, Any]],
    ratio_key: str,
) -> list[dict[str, Any]]:
    """One row per group and axis value, for groups that have the base value and another beside it."""
    out = []
    for group, by_value in _groups(rows, keys, axis).items():
        bases = [v for v in by_value if is_base(v)]
        if not bases or len(by_value) < 2:
            continue
        base = summarise(by_value[bases[0]])
        # The base first, then the others in ascending order (0, the framework default, last).
        for value in sorted(by_value, key=lambda v: (not is_base(v), v == 0, v)):
            summary = summarise(by_value[value])
            summary["vs_base"] = _ratio(summary[ratio_key], base[ratio_key])
            group_keys = [k for k in keys if k != axis]
            out.append({**dict(zip(group_keys, group, strict=True)), axis: value, **summary})
    return out


def _rate_interval(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """images/s over runs: the 95 % bootstrap interval of the runs' median seconds per image turned
    over (stats/bootstrap.py), from the runs no disturbance flagged; None under two such runs."""
    figures = [r["seconds_per_image"] for r in runs if r.get("seconds_per_image") and r.get("disturbed") != 1]
    if len(figures) < 2:
        return {"n": len(figures), "images_per_second_low": None, "images_per_second_high": None}
    estimate = bootstrap.cell_estimate(figures)
    assert estimate.low is not None and estimate.high is not None  # two runs or more have one
    return {
        "n": len(figures),
        "images_per_second_low": 1 / estimate.high,
        "images_per_second_high": 1 / estimate.low,
    }


def _threads_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **_rate_interval(runs),
        "runs": len(runs),
        "cpu_percent_mean": _mean(runs, "cpu_percent_mean"),
        "cpu_percent_max": _max(runs, "cpu_percent_max"),
        "cpu_percent_allowed": _mean(runs, "cpu_percent_allowed"),
        "threads_steady_min": _min(runs, "threads_steady"),
        "threads_steady_max": _max(runs, "threads_steady"),
        "images_per_second": _mean(runs, "images_per_second"),
    }


def _batch_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": len(runs),
        "rss_peak_bytes": _max(runs, "rss_peak_bytes"),
        "rss_mean_bytes": _mean(runs, "rss_mean_bytes"),
        "uss_peak_bytes": _max(runs, "uss_peak_bytes"),
        "gpu_memory_peak_bytes": _max(runs, "gpu_memory_peak_bytes"),
        "gpu_framework_peak_bytes": _max(runs, "gpu_framework_peak_bytes"),
    }


def compare_threads(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """CPU % and steady threads at threads=1 against more threads or the framework's default."""
    return _comparison(rows, keys, "threads", lambda v: v == 1, _threads_summary, "cpu_percent_mean")


def compare_batch(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Peak RSS at batch 1 against the mini-batch sizes."""
    return _comparison(rows, keys, "batch_size", lambda v: v == 1, _batch_summary, "rss_peak_bytes")


def _rate_columns(rows: Sequence[dict[str, Any]]) -> list[Column]:
    """images/s 95 % over runs, where a row rests on two or more quiet runs."""
    if not any(r.get("images_per_second_low") is not None for r in rows):
        return []
    return [Column("images/s 95 % over runs", "images_per_second_low", _rate_cell)]


def _rate_cell(r: dict[str, Any]) -> str:
    low, high = r.get("images_per_second_low"), r.get("images_per_second_high")
    if low is None or high is None:
        return f"n={r['n']}"
    return f"{number(low, 4)}–{number(high, 4)} (n={r['n']})"


def _span(low: Any, high: Any) -> str:
    return number(high) if low in (None, high) else f"{low}–{high}"


def _times(value: float | None) -> str:
    return "—" if value is None else f"×{value:.2f}"


def _key_columns(keys: Sequence[str], axis: str) -> list[Column]:
    return [
        Column(k, k, lambda r: threads_label(r["threads"])) if k == "threads" else Column(k, k)
        for k in keys
        if k != axis
    ]


def _sections(comparisons: dict[str, list[dict[str, Any]]], keys: Sequence[str], fmt: str) -> list[str]:
    parts = []
    if comparisons["threads"]:
        columns = _key_columns(keys, "threads") + [
            Column("threads", "threads", lambda r: threads_label(r["threads"])),
            Column("runs", "runs"),
            Column("CPU % mean", "cpu_percent_mean"),
            Column("CPU % max", "cpu_percent_max"),
            Column("% of allowed", "cpu_percent_allowed"),
            Column(
                "threads steady",
                "threads_steady_max",
                lambda r: _span(r["threads_steady_min"], r["threads_steady_max"]),
            ),
            Column("images/s", "images_per_second", lambda r: number(r.get("images_per_second"), 4)),
            *_rate_columns(comparisons["threads"]),
            Column("CPU vs 1 thread", "vs_base", lambda r: _times(r["vs_base"])),
        ]
        parts += ["", "multi-threading: threads=1 against more threads (ok runs only)"]
        parts.append(render(comparisons["threads"], columns, fmt))
    if comparisons["batch"]:
        own = any(r.get("gpu_framework_peak_bytes") is not None for r in comparisons["batch"])
        gpu_own = [mib_column("GPU fw peak MiB", "gpu_framework_peak_bytes")] if own else []
        columns = _key_columns(keys, "batch_size") + [
            Column("batch", "batch_size"),
            Column("runs", "runs"),
            mib_column("RSS peak MiB", "rss_peak_bytes"),
            mib_column("RSS mean MiB", "rss_mean_bytes"),
            mib_column("USS peak MiB", "uss_peak_bytes"),
            Column("GPU mem peak MiB", "gpu_memory_peak_bytes", device_memory.nvml_cell),
            *gpu_own,
            Column("RSS peak vs batch 1", "vs_base", lambda r: _times(r["vs_base"])),
        ]
        parts += ["", "memory by batch size: batch 1 against mini-batches (ok runs only)"]
        parts.append(render(comparisons["batch"], columns, fmt))
    return parts

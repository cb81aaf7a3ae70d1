"""One run's resources: the summary and phases for `bench inspect`, the samples just before the end
(for a crash, what memory and threads looked like as it died), and `bench timeline`'s export.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import DEFAULT_SAMPLE_INTERVAL
from orchestrator.errors import RunNotFound
from orchestrator.storage.db import Database
from orchestrator.storage.setting_columns import run_columns
from orchestrator.text.formats import Column, mib_column, number, render
from orchestrator.text.terminal import safe_line
from profiler import energy
from profiler.disturbance import MIN_SAMPLES

MIB = 1 << 20
LAST_SAMPLES = 10
# Every column of the samples table, in its order, for the export (units in docs/profiler.md and
# in `bench timeline --help`).
SAMPLE_KEYS = (
    "run_id",
    "seq",
    "t",
    "phase",
    "repeat",
    "epoch",
    "cpu_percent",
    "cpu_percent_allowed",
    "threads",
    "processes",
    "rss_bytes",
    "uss_bytes",
    "gpu_memory_bytes",
    "gpu_util",
    "final",
    "gpu_energy_joules",
    "gpu_power_watts",
    "swap_bytes",
    "other_cpu_percent",
    "steal_percent",
)


def find_run(db: Database, run_id: int) -> dict[str, Any]:
    run = next(db.rows(sa.select(*run_columns(db.runs)).where(db.runs.c.id == run_id)), None)
    if run is None:
        raise RunNotFound(f"no run {run_id} in {db.public_url}")
    return run


def size(value: Any) -> str:
    """Bytes for a person: MiB, or GiB from 10 GiB up."""
    if value is None:
        return "—"
    if value >= 10 * 1024 * MIB:
        return f"{value / (1024 * MIB):.1f} GiB"
    return f"{value / MIB:.1f} MiB"


def phases(db: Database, run_id: int) -> list[dict[str, Any]]:
    table = db.phases
    return list(db.rows(sa.select(table).where(table.c.run_id == run_id).order_by(table.c.seq)))


Rows = list[dict[str, Any]]


def samples(db: Database, run_id: int, phase: str | None = None, last: int | None = None) -> Rows:
    """The run's samples in the order taken; with `last`, only that many before the end."""
    table = db.samples
    query = sa.select(table).where(table.c.run_id == run_id)
    if phase is not None:
        query = query.where(table.c.phase == phase)
    if last is None:
        return list(db.rows(query.order_by(table.c.seq)))
    return list(reversed(list(db.rows(query.order_by(table.c.seq.desc()).limit(last)))))


def no_samples_reason(run: dict[str, Any]) -> str:
    """Why a run has no timeline, in words."""
    status = run.get("sampler_status")
    if status is None:
        return "it was recorded before bench had the profiler"
    if status == "off" or run.get("sample_interval") == 0:
        return "the sampler was off (sample_interval: 0)"
    return f"sampler: {status}"


# --- bench inspect ------------------------------------------------------------------------------


def _summary_lines(run: dict[str, Any]) -> list[str]:
    interval = run.get("sample_interval")
    sampler = (
        f"  sampler: {run.get('sampler_status') or 'none (recorded before the profiler)'}, "
        f"{run.get('samples_count') or 0} samples, interval "
        + (f"{DEFAULT_SAMPLE_INTERVAL:g} s (default)" if interval is None else f"{interval:g} s")
        + (f", its own CPU {number(run['sampler_cpu_seconds'])} s" if run.get("sampler_cpu_seconds") else "")
    )
    if not run.get("samples_count"):
        return [sampler, f"  GPU energy: {energy.describe(run)}"]
    lines = [
        sampler,
        f"  CPUs allowed: {run.get('cpus') or 'all'} ({number(run.get('cpu_allowed'))})",
        f"  CPU % of one core (steady): mean {number(run.get('cpu_percent_mean'))}, "
        f"max {number(run.get('cpu_percent_max'))}; "
        f"{number(run.get('cpu_percent_allowed'))} % of the allowed CPUs",
        f"  threads: steady {number(run.get('threads_steady'))}, max {number(run.get('threads_max'))}",
        f"  RSS: peak {size(run.get('rss_peak_bytes'))}, steady mean {size(run.get('rss_mean_bytes'))}; "
        f"USS peak {size(run.get('uss_peak_bytes'))}",
    ]
    if run.get("memory_budget"):
        lines.append(f"  memory budget: {size(run['memory_budget'])}")
    if run.get("gpu_memory_peak_bytes") is not None or run.get("gpu_util_mean") is not None:
        lines.append(
            f"  GPU: memory peak {size(run.get('gpu_memory_peak_bytes'))}, "
            f"utilisation mean {number(run.get('gpu_util_mean'))} %"
        )
    lines.append(f"  GPU energy: {energy.describe(run)}")
    lines.append(f"  other load: {disturbance_text(run)}")
    return lines


def disturbance_text(run: dict[str, Any]) -> str:
    """The run's other load and steal over its timed epochs, and the flag (profiler/disturbance.py)."""
    if run.get("disturbed") is None:
        return (
            f"not judged (fewer than {MIN_SAMPLES} sampler figures over the timed epochs: too short, "
            "raise min_time; no sampler; or recorded before bench measured it)"
        )
    figures = (
        f"{number(run.get('other_cpu_percent_mean'))} % of the allowed CPUs, "
        f"steal {number(run.get('steal_percent_mean'))} % (timed epochs)"
    )
    if run["disturbed"]:
        return f"{figures}: DISTURBED ({run.get('disturbance')}); timings not trustworthy"
    return f"{figures}: quiet"


def _phase_label(row: dict[str, Any]) -> str:
    label = row["phase"] or "start"
    if row.get("epoch") is not None:
        label += f" {row['epoch']}" + (f" (repeat {row['repeat']})" if row.get("repeat") else "")
    return label


PHASE_COLUMNS = [
    Column("phase", "phase", _phase_label),
    Column("samples", "samples"),
    Column("from s", "first_t"),
    Column("to s", "last_t"),
    Column("CPU % mean", "cpu_percent_mean"),
    Column("CPU % max", "cpu_percent_max"),
    Column("threads max", "threads_max"),
    mib_column("RSS mean MiB", "rss_mean_bytes"),
    mib_column("RSS peak MiB", "rss_peak_bytes"),
    Column("other load % of allowed", "other_cpu_percent_mean"),
]


def _final(row: dict[str, Any]) -> str:
    # The final sample is taken as the worker exits: zero processes means it had already gone.
    return "yes" if row.get("final") else ""


SAMPLE_COLUMNS = [
    Column("t s", "t"),
    Column("phase", "phase", lambda r: _phase_label({**r, "repeat": None})),
    Column("CPU %", "cpu_percent"),
    Column("% of allowed", "cpu_percent_allowed"),
    Column("threads", "threads"),
    Column("procs", "processes"),
    mib_column("RSS MiB", "rss_bytes"),
    mib_column("USS MiB", "uss_bytes"),
    mib_column("GPU mem MiB", "gpu_memory_bytes"),
    Column("GPU util %", "gpu_util"),
    Column("final", "final", _final),
]


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.splitlines()]


def resource_lines(run: dict[str, Any], phase_rows: Rows, last: Rows) -> list[str]:
    """The resources section of `bench inspect`, and the samples just before the end."""
    lines = ["", "resources (sidecar profiler; steady = the timed epochs):", *_summary_lines(run)]
    if phase_rows:
        lines += ["", "resources per phase:", *_indent(render(phase_rows, PHASE_COLUMNS, "table"))]
    if not last:
        lines += ["", f"no samples: {no_samples_reason(run)}"]
        return lines
    ending = "it died" if run["outcome"] != "ok" else "the end"
    lines += ["", f"last {len(last)} samples before {ending} (t: seconds since the worker started):"]
    lines += _indent(render(last, SAMPLE_COLUMNS, "table"))
    return lines


# --- bench timeline -----------------------------------------------------------------------------


def timeline(db: Database, run_id: int, fmt: str, phase: str | None) -> str:
    """Every sample of the run: a table for people, CSV or JSON (raw units) for plotting."""
    run = find_run(db, run_id)
    rows = samples(db, run_id, phase)
    if fmt == "csv":
        return render(rows, [Column(k, k) for k in SAMPLE_KEYS], "csv")
    if fmt == "json":
        return render([{k: r.get(k) for k in SAMPLE_KEYS} for r in rows], [], "json")
    if rows:
        return render(rows, SAMPLE_COLUMNS, "table")
    if phase is not None and run.get("samples_count"):
        seen = sorted({r["phase"] or "start" for r in samples(db, run_id)})
        return safe_line(f"run {run_id} has no samples in phase {phase} (its phases: {', '.join(seen)})")
    return f"run {run_id} has no samples: {no_samples_reason(run)}"

"""Which runs a report reads, and how runs of one configuration are pooled.

`--sweep` picks sweeps (the latest by default), `--where` filters on configuration fields. Within each
sweep a configuration counts by its latest attempt (a resumed run supersedes an interrupted one).
The same configuration in several selected sweeps is pooled, but only within one machine: the
machine fingerprint is part of every grouping key, so runs of different machines are never mixed.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from orchestrator.config import samples
from orchestrator.config.filters import MAX_FILTER_VALUES, parse_id, parse_only
from orchestrator.config.run_config import (
    DEVICES,
    FIELD_NAMES,
    FRAMEWORKS,
    MODELS,
    MODES,
    OPTIMIZERS,
    PRECISIONS,
)
from orchestrator.config.values import cut
from orchestrator.errors import BenchError, ConfigError
from orchestrator.report.query import execution
from orchestrator.stats import bootstrap
from orchestrator.storage.db import Database
from orchestrator.storage.setting_columns import run_column, run_columns, setting_column
from profiler.disturbance import MIN_SAMPLES

ALL = "all"
SWEEP_COLUMNS = ("id", "name", "kind", "status", "started_at", "host", "machine")
_ORDER = {
    "framework": FRAMEWORKS,
    "model": MODELS,
    "device": DEVICES,
    "optimizer": OPTIMIZERS,
    **{key: MODES for key in ("mode", "ran_mode")},
    **{key: PRECISIONS for key in ("precision", "ran_precision")},
}


def parse_sweeps(values: Iterable[str]) -> list[int] | str | None:
    """`--sweep 3 --sweep 5`, `--sweep 3,5` or `--sweep all`; None means the latest sweep."""
    ids: list[int] = []
    for value in values:
        for part in (p.strip() for p in str(value).split(",")):
            if part == ALL:
                return ALL
            try:
                ids.append(parse_id(part, "--sweep"))
            except ConfigError:
                message = f"--sweep {cut(str(value))}: expected sweep ids (3, or 3,5) or 'all'"
                raise ConfigError(message) from None
    if len(ids) > MAX_FILTER_VALUES:
        raise ConfigError(f"--sweep: {len(ids)} sweeps (at most {MAX_FILTER_VALUES}; or --sweep all)")
    return sorted(set(ids)) or None


def pick_sweeps(db: Database, wanted: list[int] | str | None) -> list[dict[str, Any]]:
    sweeps = db.sweeps
    query = sa.select(*(sweeps.c[k] for k in SWEEP_COLUMNS)).order_by(sweeps.c.id)
    if wanted is None:
        query = query.order_by(None).order_by(sweeps.c.id.desc()).limit(1)
    elif wanted != ALL:
        query = query.where(sweeps.c.id.in_(wanted))
    found = list(db.rows(query))
    missing = sorted(set(wanted) - {s["id"] for s in found}) if isinstance(wanted, list) else []
    if missing:
        raise BenchError(f"no sweep {', '.join(map(str, missing))}")
    if not found:
        raise BenchError("the database has no sweeps yet")
    return found


def parse_where(text: str | None) -> dict[str, frozenset[Any]]:
    """Validated like `bench run --only`: unknown keys and impossible values are one-line errors.
    None is no filter; an empty text is an error (`--where ""` is more likely a mistake than "all")."""
    return parse_only(text, "--where") if text is not None else {}


@dataclass(frozen=True)
class Selection:
    """The sweeps a report reads and the filter on their runs."""

    sweeps: tuple[dict[str, Any], ...]
    where: dict[str, frozenset[Any]]

    @property
    def sweep_ids(self) -> list[int]:
        return [s["id"] for s in self.sweeps]


def selection(db: Database, sweeps: Iterable[str] = (), where: str | None = None) -> Selection:
    """From the command line's text: `--sweep` values and the `--where` filter (both parsed before
    the database is read)."""
    wanted, only = parse_sweeps(sweeps), parse_where(where)
    return Selection(tuple(pick_sweeps(db, wanted)), only)


def where_conditions(runs: sa.Table, where: dict[str, frozenset[Any]]) -> list[Any]:
    """A condition per key. A value stored as NULL (`precision=fp32`, kept as None so that older
    hashes hold) matches NULL: SQL's IN never does."""
    conditions = []
    for key, values in where.items():
        column = setting_column(runs, key)
        condition = column.in_(sorted((v for v in values if v is not None), key=str))
        conditions.append(sa.or_(condition, column.is_(None)) if None in values else condition)
    return conditions


def latest_ids(db: Database, sel: Selection) -> Any:
    """The latest attempt of each run of each configuration in each selected sweep, filtered (a
    subquery of run ids): a resumed or re-run configuration counts once per run it asked for
    (`runs: N`; one for a configuration that runs once), by its newest attempt. Every report reads
    its runs through this one rule, so all of them count the same runs."""
    runs = db.runs
    return (
        sa.select(sa.func.max(runs.c.id))
        .where(runs.c.sweep_id.in_(sel.sweep_ids), *where_conditions(runs, sel.where))
        .group_by(runs.c.sweep_id, runs.c.config_hash, sa.func.coalesce(runs.c.run_index, 0))
    )


def latest_runs(db: Database, sel: Selection, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of `latest_ids`, in run order: every column, or only `columns` in the order given
    (a long sweep's tracebacks weigh; a report that does not show them need not read them)."""
    runs = db.runs
    selected = [run_column(runs, k) for k in columns] if columns is not None else run_columns(runs)
    query = sa.select(*selected).where(runs.c.id.in_(latest_ids(db, sel))).order_by(runs.c.id)
    return list(db.rows(query))


# --- machines ---------------------------------------------------------------------------------


def run_machine(db: Database) -> Any:
    """The machine a run ran on: its own fingerprint (schema 5; a Ray sweep's runs ran on several
    nodes), else its sweep's. Queries using it join runs to sweeps."""
    return sa.func.coalesce(db.runs.c.machine, db.sweeps.c.machine)


def machine_labels(sweeps: Sequence[dict[str, Any]]) -> dict[str, str]:
    """A short name per machine fingerprint: its host name(s) and the fingerprint's hash."""
    hosts: dict[str, list[str]] = {}
    for s in sweeps:
        names = hosts.setdefault(s["machine"], [])
        if s["host"] not in names:
            names.append(s["host"])
    return {fp: f"{'+'.join(names)} [{_digest(fp)}]" for fp, names in hosts.items()}


def node_machine_label(fingerprint: str) -> str:
    """A machine known only from its runs (a Ray node): its description and hash."""
    return f"{fingerprint.rsplit(' [', 1)[0]} [{_digest(fingerprint)}]"


def _digest(fingerprint: str) -> str:
    match = re.search(r"\[([0-9a-f]+)\]\s*$", fingerprint)
    if match:
        return match.group(1)
    import hashlib

    return hashlib.sha256(fingerprint.encode()).hexdigest()[:8]


def machine_note(labels: dict[str, str], verb: str = "come from") -> str | None:
    if len(labels) < 2:
        return None
    described = "; ".join(f"{label} = {fp}" for fp, label in labels.items())
    return f"note: these results {verb} {len(labels)} machines, never pooled: {described}"


# --- one summary per configuration and machine ---------------------------------------------------


RUN_METRICS = (
    "id",
    "outcome",
    "median_epoch_seconds",
    "min_epoch_seconds",
    "max_epoch_seconds",
    "images_per_second",
    "seconds_per_image",
    "steps_per_epoch",
    "rss_peak_bytes",
    "timed_epochs",
    "timed_steps",
    "timed_seconds",
    "samples_note",
    "disturbed",
    "other_cpu_percent_mean",
    "reason",
    *execution.COLUMNS,
)


def summaries(db: Database, sel: Selection) -> list[dict[str, Any]]:
    """One row per machine, configuration and what ran (execution.ran_mode, ran_precision): its
    settings, its runs' outcomes and pooled timing. Runs of one configuration that ran different
    modes or precisions (a default that changed between sweeps, a hostile row) are never pooled.

    The median is the median of the ok runs' medians (each over its timed epochs, every repeat);
    the spread is min–max over every timed epoch of those runs. Runs arrive ordered by group, so
    only one group's runs are held at a time.
    """
    groups = itertools.groupby(
        db.rows(summary_query(db, sel)), key=lambda row: tuple(row[k] for k in GROUP_KEYS)
    )
    return [summary(list(runs)) for _, runs in groups]


def summary_query(db: Database, sel: Selection, *extra: Any) -> Any:
    """The selected runs with what `summary` reads (their machine, settings, what ran, figures) and
    the `extra` columns, ordered by group then run (a caller joins the table `extra` reads)."""
    r, s = db.runs, db.sweeps
    fields = [setting_column(r, name).label(name) for name in FIELD_NAMES]
    machine, mode, precision = run_machine(db), execution.ran_mode(db), execution.ran_precision(db)
    return (
        sa.select(
            machine.label("machine"),
            r.c.config_hash,
            mode.label("ran_mode"),
            precision.label("ran_precision"),
            *fields,
            *(r.c[k] for k in RUN_METRICS),
            *extra,
        )
        .join(s, s.c.id == r.c.sweep_id)
        .where(r.c.id.in_(latest_ids(db, sel)))
        .order_by(machine, r.c.config_hash, mode, precision, r.c.id)
    )


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell from its runs (in run order): the last run's settings, the outcomes, pooled figures."""
    # A failed run's timing and memory describe how it failed, not the configuration: left out.
    ok = [r for r in runs if r["outcome"] == "ok"]
    row = {k: runs[-1][k] for k in SUMMARY_FIELDS}
    row.update(runs=len(runs), ok_runs=len(ok), last_run=runs[-1]["id"])
    row["failed"] = sorted(r["outcome"] for r in runs if r["outcome"] != "ok")
    row["outcome"] = "ok" if ok else "/".join(sorted(set(row["failed"])))
    row.update(_pooled(ok))
    row.update(interval(ok))
    row.update(samples.pooled_counts(ok))
    row.update(disturbance(ok))
    row.update(execution.pooled(ok))
    # Why the configuration failed: its last failed run's reason (outside text: shown made safe).
    row["reason"] = next((r["reason"] for r in reversed(runs) if r["outcome"] != "ok"), None)
    return row


def interval(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell's runs as the statistics read them: each ok run's seconds per image
    (``run_figures``) but those flagged disturbed (counted in ``disturbed_runs``), how many (``n``),
    and the 95 % bootstrap interval of their median over runs (stats/bootstrap.py; None under two
    runs: one process has no spread between processes to resample). A stored figure that is not a
    positive finite number is refused in one line."""
    timed = [r for r in ok if r.get("seconds_per_image") is not None]
    figures = [r["seconds_per_image"] for r in timed if r.get("disturbed") != 1]
    low = high = None
    if len(figures) > 1:
        estimate = bootstrap.cell_estimate(figures)
        low, high = estimate.low, estimate.high
    return {
        "n": len(figures),
        "disturbed_runs": len(timed) - len(figures),
        "run_figures": figures,
        "seconds_per_image_low": low,
        "seconds_per_image_high": high,
    }


GROUP_KEYS = ("machine", "config_hash", "ran_mode", "ran_precision")
SUMMARY_FIELDS = (*GROUP_KEYS, *FIELD_NAMES)


def _pooled(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """The ok runs' timing and peak memory: one aggregate for every timing figure (the median of
    the runs' median seconds per image, orchestrator/config/samples.py), min–max over all their epochs."""
    rss = spread(r["rss_peak_bytes"] for r in ok)
    steps = spread(r["steps_per_epoch"] for r in ok)[2]
    return {
        **samples.pooled_timing(ok),
        "steps_per_epoch": steps,
        "rss_peak_bytes_median": rss[0],
        "rss_peak_bytes_min": rss[1],
        "rss_peak_bytes_max": rss[2],
    }


# --- disturbance (profiler/disturbance.py): marked wherever a timing is shown ----------------------

DISTURBED_MARK = " !"
DISTURBED_NOTE = (
    "! disturbed: other load on the run's CPUs (or steal) passed the threshold during its timed epochs, "
    "so its timing is not trustworthy (bench inspect RUN says how much; docs/profiler.md); "
    "re-run it with bench run --wait-idle SECONDS --retry-disturbed N"
)
DISTURBANCE_KEYS = ["disturbed", "other_cpu_percent_mean"]


def disturbance(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled runs: disturbed if any was (1), quiet if all were measured quiet (0), else unknown
    (None: no sampler); the other load is the worst run's."""
    flags = [r["disturbed"] for r in ok]
    other = [r["other_cpu_percent_mean"] for r in ok if r["other_cpu_percent_mean"] is not None]
    flag = 1 if 1 in flags else (0 if flags and all(f == 0 for f in flags) else None)
    return {"disturbed": flag, "other_cpu_percent_mean": max(other) if other else None}


UNJUDGED_MARK = " !?"
UNJUDGED_NOTE = (
    "!? quiet not judged: the timed epochs were too short for the disturbance check (fewer than "
    f"{MIN_SAMPLES} sampler samples in them), or the run had no sampler, so bench cannot say whether "
    "other load ran beside them; raise min_time (docs/profiler.md)"
)


def _has_ok(row: dict[str, Any]) -> bool:
    """A run row that ended ok, or a cell (a summary) with an ok run."""
    return bool(row.get("ok_runs")) if "ok_runs" in row else row.get("outcome") == "ok"


def unjudged(row: dict[str, Any] | None) -> bool:
    """An ok figure whose quiet was never judged: ``disturbed`` recorded as unknown (None)."""
    return row is not None and "disturbed" in row and row["disturbed"] is None and _has_ok(row)


def disturbed_mark(row: dict[str, Any] | None) -> str:
    """` !` on a disturbed figure, ` !?` on one whose quiet is unknown, else nothing."""
    if row and row.get("disturbed"):
        return DISTURBED_MARK
    return UNJUDGED_MARK if unjudged(row) else ""


def disturbed_note(rows: Iterable[dict[str, Any] | None]) -> list[str]:
    rows = list(rows)
    notes = [DISTURBED_NOTE] if any(r and r.get("disturbed") for r in rows) else []
    return notes + ([UNJUDGED_NOTE] if any(unjudged(r) for r in rows) else [])


def spread(values: Iterable[float | None]) -> tuple[float | None, float | None, float | None]:
    """Median, min and max of the values that are there; None for each when none is."""
    present = [v for v in values if v is not None]
    if not present:
        return None, None, None
    return statistics.median(present), min(present), max(present)


def varying(configs: Iterable[Mapping[str, Any]], skip: Iterable[str] = ()) -> list[str]:
    """The configuration fields that take more than one value among `configs`, in configuration
    order, less those in `skip`: the settings that tell these configurations apart, which tables
    add as columns, figures name in labels and `bench run --dry-run` lists.

    Each config maps every field name to its value: a summary row, a stored configuration parsed
    (figures.config_of) or RunConfig.to_dict()."""
    rows = list(configs)
    left_out = set(skip)
    return [f for f in FIELD_NAMES if f not in left_out and len({row[f] for row in rows}) > 1]


_RANK = {f: {v: i for i, v in enumerate(order)} for f, order in _ORDER.items()}
_NONE = (1, 0, 0)


def sort_key(row: dict[str, Any], fields: Sequence[str]) -> tuple[Any, ...]:
    """Frameworks, models, devices and optimizers in their usual order; numbers by value; None last."""
    return tuple(
        _NONE if (v := row.get(f)) is None else (0, _RANK[f].get(v, 99) if f in _RANK else 0, v)
        for f in fields
    )

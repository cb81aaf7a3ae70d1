"""The HTML report's figures of a sweep's measurements: which runs each one shows, read from the
database, drawn by plots; and what every figure module shares (Plot, Section, configuration labels).

Each section function takes the selected runs (the latest attempt of each configuration in each
sweep, html_report.selected_runs) and returns a Section: its plots, or the sentence that says why
it has none. A sweep of nothing but crashes, or one batch size, or no samples still gives every
section, saying so.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orchestrator import plots
from orchestrator.config import FIELD_NAMES, FRAMEWORKS
from orchestrator.config_checks import config_from_stored
from orchestrator.db import Database
from orchestrator.report import model_label

Row = dict[str, Any]
# The framework is the crash map's row and each timeline's name: never part of a configuration's label.
NOT_LABELS = {"framework"}
SHORT = {
    "batch_size": "batch",
    "hold_threads": "held threads",
    "hold_memory_mb": "held MiB",
    "memory_budget": "budget",
}
CHUNK = 500  # run ids per query


@dataclass
class Plot:
    """One picture: a stable id (its file name and <img> id), a title, what it shows, the PNG."""

    id: str
    title: str
    caption: str
    png: bytes


@dataclass
class Section:
    id: str
    title: str
    intro: str
    plots: list[Plot] = field(default_factory=list)
    empty: str | None = None  # why there is no plot: shown in its place


def config_of(run: Row) -> Row:
    """The run's configuration as recorded, parsed once per row (labels ask for it many times)."""
    if "_config" not in run:
        where = f"run {run.get('id')}: config_json"
        run["_config"] = config_from_stored(run["config_json"], where).to_dict()
    return dict(run["_config"])


def varying(runs: Iterable[Row], skip: Iterable[str] = ()) -> list[str]:
    """The configuration fields whose value differs between these runs, in field order."""
    values: dict[str, set[str]] = {}
    for run in runs:
        for key, value in config_of(run).items():
            values.setdefault(key, set()).add(json.dumps(value))
    left_out = NOT_LABELS | set(skip)
    return [k for k in FIELD_NAMES if len(values.get(k, ())) > 1 and k not in left_out]


def _value_text(key: str, value: Any) -> str:
    if key == "memory_budget" and value:
        return f"{value / plots.MIB:g} MiB"
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe(run: Row, keys: Sequence[str], sep: str = ", ") -> str:
    """The run's values of these fields, as `name=value`, unset ones left out."""
    config = config_of(run)
    parts = [f"{SHORT.get(k, k)}={_value_text(k, config[k])}" for k in keys if config.get(k) is not None]
    return sep.join(parts) or "the one configuration"


def frameworks_in(runs: Iterable[Row]) -> list[str]:
    """Frameworks in the project's order, any unknown one after them."""
    seen = {r["framework"] for r in runs}
    return [f for f in FRAMEWORKS if f in seen] + sorted(seen - set(FRAMEWORKS))


def slug(*parts: Any) -> str:
    text = "-".join(str(p) for p in parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")


# --- time per image and throughput against batch size ------------------------------------------


def _batch_series(runs: Sequence[Row], framework: str, index: int) -> tuple[plots.Series, plots.Series]:
    by_batch: dict[int, list[Row]] = {}
    for r in runs:
        by_batch.setdefault(r["batch_size"], []).append(r)
    batches = sorted(by_batch)
    ms = [statistics.median(r["seconds_per_image"] * 1000 for r in by_batch[b]) for b in batches]
    ips = [1000 / m for m in ms]  # from the same aggregate as ms/image (orchestrator/samples.py)
    style = {"colour": plots.framework_colour(framework, index), "marker": plots.MARKERS[index]}
    return (
        plots.Series(framework, [float(b) for b in batches], ms, **style),
        plots.Series(framework, [float(b) for b in batches], ips, **style),
    )


def batch_section(runs: Sequence[Row]) -> Section:
    section = Section(
        "batch",
        "Time per image and throughput against batch size",
        "Median over the timed epochs of each run ended ok; where other settings vary at one batch "
        "size (optimizer, learning rate, …), the median over those runs.",
    )
    timed = [
        r for r in runs if r["outcome"] == "ok" and r.get("seconds_per_image") and r.get("images_per_second")
    ]
    if not timed:
        section.empty = "No run ended ok with timed epochs: nothing to plot."
        return section
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in timed:
        groups.setdefault((model_label(r), r["device"], r.get("machine_label", "")), []).append(r)
    for (model, device, machine), group in groups.items():
        if len({r["batch_size"] for r in group}) < 2:
            continue
        frameworks = frameworks_in(group)
        pairs = [
            _batch_series([r for r in group if r["framework"] == f], f, i) for i, f in enumerate(frameworks)
        ]
        where = f"{model} on {device}" + (f", {machine}" if machine else "")
        title = f"{where}: time per image and images/s against batch size"
        caption = f"{len(group)} runs ended ok; one line per framework ({', '.join(frameworks)})."
        image = plots.batch_scaling(title, [p[0] for p in pairs], [p[1] for p in pairs])
        section.plots.append(Plot(slug("batch", model, device, machine), title, caption, image))
    if not section.plots:
        sizes = sorted({r["batch_size"] for r in timed})
        section.empty = (
            f"No batch-size variation: each model and device ran at one batch size "
            f"({', '.join(map(str, sizes))}), so there is no curve to draw."
        )
    return section


# --- validation accuracy against epoch ---------------------------------------------------------


def val_accuracy(db: Database, run_ids: Sequence[int]) -> dict[int, list[tuple[int, float]]]:
    """Per run, validation accuracy by epoch, averaged over repeats; runs without any left out."""
    table = db.epochs
    curves: dict[int, list[tuple[int, float]]] = {}
    # In chunks: SQLite limits the variables of one statement, and a long study has many runs.
    for start in range(0, len(run_ids), CHUNK):
        query = (
            sa.select(table.c.run_id, table.c.epoch, sa.func.avg(table.c.val_accuracy).label("acc"))
            .where(table.c.run_id.in_(run_ids[start : start + CHUNK]), table.c.val_accuracy.is_not(None))
            .where(sa.or_(table.c.extra.is_(None), table.c.extra == 0))  # extra epochs: timing only
            .group_by(table.c.run_id, table.c.epoch)
            .order_by(table.c.run_id, table.c.epoch)
        )
        for row in db.rows(query):
            curves.setdefault(row["run_id"], []).append((row["epoch"], row["acc"]))
    return curves


def _style_index(keys: list[Any], key: Any) -> int:
    if key not in keys:
        keys.append(key)
    return keys.index(key)


def _series(label: str, points: Sequence[tuple[int, float]], c: int, s: int) -> plots.Series:
    return plots.Series(
        label,
        [float(e) for e, _ in points],
        [a for _, a in points],
        colour=plots.PALETTE[c % len(plots.PALETTE)],
        marker=plots.MARKERS[s % len(plots.MARKERS)],
        linestyle=plots.LINESTYLES[s % len(plots.LINESTYLES)],
    )


def _median_curves(group: Sequence[Row], curves: dict[int, list[tuple[int, float]]]) -> list[plots.Series]:
    """One line per optimizer × learning rate: the median at each epoch over the runs that share it."""
    pooled: dict[tuple[str, float], dict[int, list[float]]] = {}
    for r in group:
        by_epoch = pooled.setdefault((r["optimizer"], r["lr"]), {})
        for epoch, acc in curves[r["id"]]:
            by_epoch.setdefault(epoch, []).append(acc)
    series = []
    for i, ((optimizer, lr), by_epoch) in enumerate(sorted(pooled.items())):
        n = max(len(v) for v in by_epoch.values())
        points = [(e, statistics.median(v)) for e, v in sorted(by_epoch.items())]
        series.append(_series(f"{optimizer} lr={lr:g} (median of {n} runs)", points, i, i))
    return series


def _accuracy_series(group: Sequence[Row], curves: dict[int, list[tuple[int, float]]]) -> list[plots.Series]:
    # Colour says optimizer × learning rate; line style and marker say whatever else varies
    # (batch size, threads…), so no curve is an average over settings that change accuracy —
    # unless so much else varies that the lines could not be told apart: then the median.
    extra = varying(group, skip=("optimizer", "lr", "model", "device"))
    if len({describe(r, extra) for r in group}) > len(plots.LINESTYLES):
        return _median_curves(group, curves)
    colours: list[Any] = []
    styles: list[Any] = []
    series = []
    for r in sorted(group, key=lambda r: (r["optimizer"], r["lr"], r["id"])):
        c = _style_index(colours, (r["optimizer"], r["lr"]))
        s = _style_index(styles, describe(r, extra))
        label = f"{r['optimizer']} lr={r['lr']:g}" + (f", {describe(r, extra)}" if extra else "")
        if r["outcome"] != "ok":
            label += f" [{r['outcome']}]"
        series.append(_series(label, curves[r["id"]], c, s))
    return series


def accuracy_section(db: Database, runs: Sequence[Row]) -> Section:
    section = Section(
        "accuracy",
        "Validation accuracy against epoch",
        "One line per optimizer × learning rate (colour); other settings that vary are told apart by "
        "line style and marker. A run that did not end ok shows the epochs it finished, its outcome "
        "in brackets.",
    )
    curves = val_accuracy(db, [r["id"] for r in runs])
    with_curves = [r for r in runs if r["id"] in curves]
    if not with_curves:
        section.empty = "No run recorded a validation accuracy (the fault worker has none)."
        return section
    # One epoch is a point, not a curve: the final accuracies are in the comparison table.
    with_curves = [r for r in with_curves if len(curves[r["id"]]) > 1]
    if not with_curves:
        section.empty = "Every run with a validation accuracy trained a single epoch: no curve to draw."
        return section
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in with_curves:
        groups.setdefault((r["framework"], model_label(r), r["device"]), []).append(r)
    for (framework, model, device), group in groups.items():
        title = f"{framework}: {model} on {device}, validation accuracy"
        caption = f"{len(group)} runs; accuracy on the validation split after each epoch."
        image = plots.accuracy_curves(title, _accuracy_series(group, curves))
        section.plots.append(Plot(slug("accuracy", framework, model, device), title, caption, image))
    return section


def label_machines(runs: Sequence[Row], sweeps: Sequence[Row]) -> None:
    """Where the runs come from several machines, name each run's machine, so that no curve of
    the batch plots mixes them; with one machine, leave it out of every label."""
    machines = {s["id"]: s["machine"] for s in sweeps}
    if len(set(machines.values())) < 2:
        return
    names = {m: f"machine {i + 1}" for i, m in enumerate(dict.fromkeys(machines.values()))}
    for run in runs:
        run["machine_label"] = names[machines[run["sweep_id"]]]

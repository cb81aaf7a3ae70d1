"""The HTML report's figures of a sweep's measurements: which runs each one shows, read from the
database, drawn by plots; and what every figure module shares (Plot, Section, configuration labels).

Each section function takes the selected runs (the latest attempt of each configuration in each
sweep, html.selected_runs) and returns a Section: its plots, or the sentence that says why
it has none. A sweep of nothing but crashes, or one batch size, or no samples still gives every
section, saying so.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from orchestrator.config.checks import config_from_stored
from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.report.html import plots
from orchestrator.report.query import execution
from orchestrator.report.query.select import varying
from orchestrator.report.query.sweeps import model_label
from orchestrator.stats import bootstrap
from orchestrator.storage.db import Database

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
    # What it draws, per line (label, x, y values): kept in the page beside the picture.
    series: list[Row] = field(default_factory=list)


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


def label_keys(runs: Iterable[Row], skip: Iterable[str] = ()) -> list[str]:
    """The settings a figure's labels name to tell these runs apart: those that vary among their
    recorded configurations (select.varying), less the framework and `skip`."""
    return varying(map(config_of, runs), skip=NOT_LABELS | set(skip))


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


# --- one point per configuration --------------------------------------------------------------

# More lines than this in one plot cannot be told apart: the plot is split by the other settings.
MAX_SERIES = len(plots.PALETTE)


def configuration(run: Row, skip: Iterable[str] = ()) -> str:
    """The run's configuration less the fields in `skip` (a plot's x axis), with its machine and the
    mode and precision it ran: the key that keeps different configurations, machines, and runs of
    one configuration that ran differently (report/query/execution.py), in different points and lines."""
    config = config_of(run)
    for key in skip:
        config.pop(key, None)
    ran = [execution.mode_of(run), execution.precision_of(run)]
    return json.dumps([config, run.get("machine_label", ""), *ran], sort_keys=True, default=str)


def by_key(runs: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = {}
    for r in runs:
        out.setdefault(key(r), []).append(r)
    return out


def split_series(
    group: Sequence[Row], x_axis: str, fixed: Iterable[str]
) -> list[tuple[list[str], list[Row]]]:
    """The runs of one plot, or of several where more settings vary than one plot can show: each
    part with the settings that tell its lines apart (besides the framework). A line is one
    configuration less `x_axis`; `fixed` are the settings the plot's title already names."""
    skip = (x_axis, *fixed)
    extra = label_keys(group, skip=skip)
    if len(by_key(group, lambda r: configuration(r, [x_axis]))) <= MAX_SERIES or not extra:
        return [(extra, list(group))]
    # Too many lines: a plot per value of the settings other than the framework, each of which
    # then has one line per framework.
    parts = by_key(group, lambda r: describe(r, extra))
    return [(extra, part) for part in parts.values()]


# --- time per image and throughput against batch size ------------------------------------------


def _batch_series(
    runs: Sequence[Row], label: str, colour: str, style: int
) -> tuple[plots.Series, plots.Series]:
    """One configuration's line: at each batch size, its runs' median (the same configuration run
    in several sweeps); never a median over different configurations."""
    by_batch = by_key(runs, lambda r: r["batch_size"])
    batches = sorted(by_batch)
    ms = [statistics.median(r["seconds_per_image"] * 1000 for r in by_batch[b]) for b in batches]
    ips = [1000 / m for m in ms]  # from the same aggregate as ms/image (orchestrator/config/samples.py)
    bounds = [_interval_ms([r["seconds_per_image"] for r in by_batch[b]]) for b in batches]
    look = {
        "colour": colour,
        "marker": plots.MARKERS[style % len(plots.MARKERS)],
        "linestyle": plots.LINESTYLES[style % len(plots.LINESTYLES)],
    }
    xs = [float(b) for b in batches]
    low, high = [b[0] for b in bounds], [b[1] for b in bounds]
    per_image = plots.Series(label, xs, ms, lows=low, highs=high, **look)
    ips_low = [1000 / h if h else None for h in high]  # the faster end of the time is the higher rate
    ips_high = [1000 / lo if lo else None for lo in low]
    throughput = plots.Series(label, xs, ips, lows=ips_low, highs=ips_high, **look)
    return per_image, throughput


def _interval_ms(figures: Sequence[float]) -> tuple[float | None, float | None]:
    """The 95 % bootstrap interval of the runs' median time per image, in ms (none for one run)."""
    if len(figures) < 2:
        return None, None
    found = bootstrap.cell_estimate(figures)
    return (found.low * 1000 if found.low else None), (found.high * 1000 if found.high else None)


def _batch_lines(part: Sequence[Row], extra: Sequence[str]) -> list[tuple[plots.Series, plots.Series]]:
    """A line per configuration less the batch size: colour the framework, style the other settings."""
    frameworks = frameworks_in(part)
    styles: list[Any] = []
    lines = []
    configurations = by_key(part, lambda r: configuration(r, ["batch_size"]))
    for runs in sorted(
        configurations.values(), key=lambda rs: (frameworks.index(rs[0]["framework"]), rs[0]["id"])
    ):
        first = runs[0]
        label = first["framework"] + (f", {describe(first, extra)}" if extra else "")
        colour = plots.framework_colour(first["framework"], frameworks.index(first["framework"]))
        lines.append(_batch_series(runs, label, colour, _style_index(styles, describe(first, extra))))
    return lines


def series_data(pairs: Sequence[Sequence[plots.Series]], names: Sequence[str]) -> list[Row]:
    """What a plot draws, as data (the page keeps it beside the picture): per line, its label, x and
    each panel's y values."""
    data = []
    for pair in pairs:
        line: Row = {"label": pair[0].label, "x": pair[0].xs}
        line.update({name: s.ys for name, s in zip(names, pair, strict=True)})
        for name, s in zip(names, pair, strict=True):  # the error bars: intervals over runs
            if s.lows is not None and any(v is not None for v in s.lows):
                line[f"{name}_low"], line[f"{name}_high"] = s.lows, s.highs
        data.append(line)
    return data


def batch_section(runs: Sequence[Row]) -> Section:
    section = Section(
        "batch",
        "Time per image and throughput against batch size",
        "A line is one configuration (everything but the batch size); a point its runs' median time "
        "per image and images/s (the same configuration run in several sweeps), never a median over "
        "different configurations. Lines are named by the settings that differ between them.",
    )
    timed = [
        r for r in runs if r["outcome"] == "ok" and r.get("seconds_per_image") and r.get("images_per_second")
    ]
    if not timed:
        section.empty = "No run ended ok with timed epochs: nothing to plot."
        return section
    groups = by_key(timed, lambda r: (model_label(r), r["device"], r.get("machine_label", "")))
    for (model, device, machine), group in groups.items():
        if len({r["batch_size"] for r in group}) < 2:
            continue
        parts = split_series(group, "batch_size", ("model", "device"))
        for extra, part in parts:
            section.plots.append(_batch_plot(part, extra, (model, device, machine), len(parts)))
    if not section.plots:
        sizes = sorted({r["batch_size"] for r in timed})
        section.empty = (
            f"No batch-size variation: each model and device ran at one batch size "
            f"({', '.join(map(str, sizes))}), so there is no curve to draw."
        )
    return section


def _batch_plot(part: Sequence[Row], extra: Sequence[str], where: tuple[str, str, str], parts: int) -> Plot:
    model, device, machine = where
    lines = _batch_lines(part, [] if parts > 1 else extra)
    place = f"{model} on {device}" + (f", {machine}" if machine else "")
    fixed = describe(part[0], extra) if parts > 1 else ""
    title = f"{place}{f' ({fixed})' if fixed else ''}: time per image and images/s against batch size"
    named = (
        f"framework and {', '.join(SHORT.get(k, k) for k in extra)}" if extra and parts == 1 else "framework"
    )
    caption = f"{len(part)} runs ended ok; {len(lines)} configurations, one line each, named by {named}"
    if parts > 1:
        caption += f"; one of {parts} plots of {place}, split by {', '.join(SHORT.get(k, k) for k in extra)}"
    image = plots.batch_scaling(title, [p[0] for p in lines], [p[1] for p in lines])
    ident = slug("batch", model, device, machine, fixed) if fixed else slug("batch", model, device, machine)
    data = series_data(lines, ("ms_per_image", "images_per_second"))
    return Plot(ident, title, caption + ".", image, data)


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


def _by_epoch(runs: Sequence[Row], curves: dict[int, list[tuple[int, float]]]) -> dict[int, list[float]]:
    """Each epoch's accuracies, one a run (already averaged over its repeats)."""
    by_epoch: dict[int, list[float]] = {}
    for r in runs:
        for epoch, acc in curves[r["id"]]:
            by_epoch.setdefault(epoch, []).append(acc)
    return dict(sorted(by_epoch.items()))


def _curve(runs: Sequence[Row], curves: dict[int, list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """One configuration's accuracy at each epoch: its runs' median (`runs: N`, or the same
    configuration run in several sweeps)."""
    return [(e, statistics.median(v)) for e, v in _by_epoch(runs, curves).items()]


def _curve_interval(
    runs: Sequence[Row], curves: dict[int, list[tuple[int, float]]]
) -> tuple[list[float | None], list[float | None]]:
    """Each epoch's 95 % bootstrap interval over the runs (stats/bootstrap.py), None where fewer
    than two runs have a value: the error bars."""
    lows: list[float | None] = []
    highs: list[float | None] = []
    for values in _by_epoch(runs, curves).values():
        estimate = bootstrap.cell_estimate(values, positive=False) if len(values) > 1 else None
        lows.append(estimate.low if estimate else None)
        highs.append(estimate.high if estimate else None)
    return lows, highs


def _accuracy_series(
    part: Sequence[Row], extra: Sequence[str], curves: dict[int, list[tuple[int, float]]]
) -> list[plots.Series]:
    # Colour says optimizer × learning rate; line style and marker say whatever else varies
    # (batch size, threads…): a line is one configuration, never an average over settings.
    colours: list[Any] = []
    styles: list[Any] = []
    series = []
    configurations = by_key(part, configuration)
    for runs in sorted(
        configurations.values(), key=lambda rs: (rs[0]["optimizer"], rs[0]["lr"], rs[0]["id"])
    ):
        r = runs[0]
        c = _style_index(colours, (r["optimizer"], r["lr"]))
        s = _style_index(styles, describe(r, extra))
        label = f"{r['optimizer']} lr={r['lr']:g}" + (f", {describe(r, extra)}" if extra else "")
        failed = sorted({x["outcome"] for x in runs if x["outcome"] != "ok"})
        if failed:
            label += f" [{'/'.join(failed)}]"
        if len(runs) > 1:
            label += f" (median of {len(runs)} runs)"
        line = _series(label, _curve(runs, curves), c, s)
        line.lows, line.highs = _curve_interval(runs, curves)
        series.append(line)
    return series


def _accuracy_parts(group: Sequence[Row]) -> list[tuple[list[str], list[Row], str]]:
    """One plot, or one per value of the other settings where more of them vary than line styles
    can tell apart: (settings named in the labels, runs, what the plot's title adds)."""
    extra = label_keys(group, skip=("optimizer", "lr", "model", "device"))
    values = by_key(group, lambda r: describe(r, extra))
    if len(values) <= len(plots.LINESTYLES):
        return [(extra, list(group), "")]
    return [([], part, text) for text, part in values.items()]


def accuracy_section(db: Database, runs: Sequence[Row]) -> Section:
    section = Section(
        "accuracy",
        "Validation accuracy against epoch",
        "One line per configuration, coloured by optimizer × learning rate; other settings that vary "
        "are told apart by line style and marker, or, where more vary than a plot can tell apart, "
        "each value has its own plot. A run that did not end ok shows the epochs it finished, its "
        "outcome in brackets.",
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
    groups = by_key(
        with_curves, lambda r: (r["framework"], model_label(r), r["device"], r.get("machine_label", ""))
    )
    for (framework, model, device, machine), group in groups.items():
        parts = _accuracy_parts(group)
        for extra, part, fixed in parts:
            place = f"{framework}: {model} on {device}" + (f", {machine}" if machine else "")
            title = f"{place}{f' ({fixed})' if fixed else ''}, validation accuracy"
            caption = (
                f"{len(part)} runs; accuracy on the validation split after each epoch; error bars: the "
                "95 % interval over a configuration's runs, where it ran more than once"
            )
            if len(parts) > 1:
                caption += f"; one of {len(parts)} plots of {place}, one per value of the other settings"
            lines = _accuracy_series(part, extra, curves)
            image = plots.accuracy_curves(title, lines)
            ident = slug("accuracy", framework, model, device, machine, fixed)
            data = series_data([[s] for s in lines], ("accuracy",))
            section.plots.append(Plot(ident, title, caption + ".", image, data))
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

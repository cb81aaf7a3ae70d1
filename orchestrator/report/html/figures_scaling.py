"""The HTML report's figure of data-parallel scaling (issue 26): images/s and scaling efficiency
against the number of replicas, one line per framework (and whatever else varies), one picture per
model, device and per-replica batch, drawn from `bench report --table scaling`'s cells
(tables/scaling.py), so a point is exactly a cell of that table. Only where the selection ran more
than one replica count: the page has no such section otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from orchestrator.report.html import plots
from orchestrator.report.html.figures import Plot, Section, by_key, series_data, slug
from orchestrator.report.query.select import Selection
from orchestrator.report.tables.scaling import scaling
from orchestrator.storage.db import Database

Row = dict[str, Any]
INTRO = (
    "Global images per second and scaling efficiency (images/s over replicas × the one-replica "
    "images/s of the same configuration) against the number of replicas "
    "(`bench report --table scaling`, which also gives the communication share of traced runs). "
    "batch_size is per replica. Replicas on one machine share its CPUs: such figures check the "
    "data-parallel machinery, not a cluster's scaling (docs/distributed.md#data-parallel-runs)."
)
# What a line is, beyond the framework: the settings a cell may differ in within one picture.
LINE_KEYS = ("optimizer", "lr", "mode", "precision", "threads", "trace")


def scaling_section(db: Database, sel: Selection) -> Section | None:
    """The section, or None where every cell ran the same number of replicas."""
    cells = scaling(db, sel).rows
    if len({c["replica_count"] for c in cells}) < 2:
        return None
    section = Section("scaling", "Data-parallel scaling", INTRO)
    timed = [c for c in cells if c.get("ok_runs") and c.get("images_per_second_median")]
    several = len({c["machine"] for c in cells}) > 1
    groups = by_key(timed, lambda c: (c["model"], c["device"], c["batch_size"], c["machine"]))
    for (model, device, batch, machine), group in groups.items():
        lines = _lines(group)
        if not any(len(s.xs) > 1 for pair in lines for s in pair):
            continue
        place = f"{model} on {device}, batch {batch} a replica" + (f", {machine}" if several else "")
        title = f"{place}: throughput and efficiency against replicas"
        caption = f"{len(group)} cells that ran ok; efficiency 1.0 is perfect scaling; ! disturbed."
        ident = slug("scaling", model, device, batch, machine)
        data = series_data(lines, ("images/s", "efficiency"))
        section.plots.append(Plot(ident, title, caption, draw(title, lines), data))
    if not section.plots:
        section.empty = "No configuration ran ok at more than one replica count: nothing to plot."
    return section


def _lines(group: Sequence[Row]) -> list[tuple[plots.Series, plots.Series]]:
    varying = [k for k in LINE_KEYS if len({c.get(k) for c in group}) > 1]
    lines = by_key(group, lambda c: (c["framework"], *(c.get(k) for k in varying)))
    pairs = []
    for i, (key, cells) in enumerate(lines.items()):
        cells = sorted(cells, key=lambda c: c["replica_count"])
        mark = " !" if any(c.get("disturbed") for c in cells) else ""
        label = " ".join(str(v) for v in key if v is not None) + mark
        colour = plots.framework_colour(str(key[0]), i)
        xs = [float(c["replica_count"]) for c in cells]
        rate = plots.Series(label, xs, [c["images_per_second_median"] for c in cells], colour)
        # Error bars: the 95 % interval over runs (images/s: the seconds per image's turned over;
        # efficiency: its ratio's, tables/scaling.py), where a point rests on two runs or more.
        rate.lows = [_inverse(c.get("seconds_per_image_high")) for c in cells]
        rate.highs = [_inverse(c.get("seconds_per_image_low")) for c in cells]
        known = [c for c in cells if c.get("scaling_efficiency") is not None]
        efficiency = plots.Series(
            label,
            [float(c["replica_count"]) for c in known],
            [c["scaling_efficiency"] for c in known],
            colour,
        )
        efficiency.lows = [c.get("scaling_efficiency_low") for c in known]
        efficiency.highs = [c.get("scaling_efficiency_high") for c in known]
        pairs.append((rate, efficiency))
    return pairs


def _inverse(value: float | None) -> float | None:
    return 1 / value if value else None


def draw(title: str, lines: Sequence[tuple[plots.Series, plots.Series]]) -> bytes:
    """Images/s (left) and efficiency (right) against replicas, one line per framework."""
    fig = Figure(figsize=(plots.WIDTH, 3.4))
    left, right = fig.subplots(1, 2)
    counts = sorted({int(x) for pair in lines for s in pair for x in s.xs})
    for ax, index, ylabel in ((left, 0, "images per second (global)"), (right, 1, "scaling efficiency")):
        for pair in lines:
            s = pair[index]
            ax.plot(s.xs, s.ys, label=plots.plain(s.label), color=s.colour, marker=s.marker, linewidth=1.6)
            plots.error_bars(ax, s)
        ax.set_xticks(counts)
        ax.set_xlabel("replicas")
        ax.set_ylabel(ylabel)
        ax.grid(True, color="#dddddd", linewidth=0.6)
    right.axhline(1.0, color="#888888", linewidth=0.8, linestyle=":")
    left.set_title("throughput (higher is better)", fontsize=10)
    right.set_title("efficiency (1.0: perfect)", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=9, frameon=False
    )
    fig.suptitle(plots.plain(title), fontsize=11)
    fig.set_layout_engine("constrained")
    return plots.png(fig)

"""The report's figures, one function each: plain rows in, PNG bytes out.

matplotlib's object API (Figure, never pyplot) keeps no global state and needs no display, so a
figure can be drawn from any thread or a headless machine. Sizes, fonts and markers are chosen to
stay readable printed in black and white: every line has its own marker, every cell of the crash
map its own text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

from orchestrator.text.terminal import safe
from workers import frameworks

MIB = 1 << 20
DPI = 150
SPARSE = 40  # fewer samples than this: each is drawn as a dot too
WIDTH = 8.0  # inches: a page's text width with margins, so the PNG prints at 100 %
MARKERS = "osD^v<>Ph*Xp"
LINESTYLES = ("-", "--", ":", "-.")
# One colour per framework in every figure (workers/frameworks.py).
FRAMEWORK_COLOURS = {f.name: f.colour for f in frameworks.FRAMEWORKS}
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
OUTCOME_COLOURS = {
    "ok": "#8fd18f",
    "error": "#f4a261",
    "oom": "#b39ddb",
    "crash": "#e05555",
    "timeout": "#d4b106",
    "unsupported": "#c8c8c8",
    "unavailable": "#e8e8e8",
    "interrupted": "#90caf9",
    "invalid": "#f48fb1",
    "node_lost": "#5c6bc0",
    "ray_oom": "#7e57c2",
    "unschedulable": "#b0bec5",
    "cluster_error": "#8d6e63",
}
NOT_RUN = "#ffffff"
# Phase bands: setup greys, warm-up and epochs blues (alternating, so epochs stay apart), eval green.
PHASE_COLOURS = {
    "import": "#e0e0e0",
    "build": "#d0d0d0",
    "data": "#c0c0c0",
    "warmup": "#ffe8a8",
    "reset": "#f0f0f0",
    "eval": "#c8ecc8",
    "hold": "#e4d4f4",
}
EPOCH_COLOURS = ("#d4e6f7", "#b4d2ef")


@dataclass
class Series:
    """One line: its legend label, points, and which colour and line style it takes."""

    label: str
    xs: list[float]
    ys: list[float]
    colour: str = "#000000"
    marker: str = "o"
    linestyle: str = "-"
    # Each point's 95 % interval over runs (None where a point rests on one run): error bars.
    lows: list[float | None] | None = None
    highs: list[float | None] | None = None


@dataclass
class Band:
    """A phase of a run: shaded from start to end, labelled with its name."""

    label: str
    kind: str
    start: float
    end: float
    epoch: int | None = None


@dataclass
class Ending:
    """How a run that did not end ok ended, for the marker at its last moment."""

    t: float
    text: str


@dataclass
class Timeline:
    title: str
    samples: Sequence[dict[str, Any]]
    bands: list[Band] = field(default_factory=list)
    ending: Ending | None = None
    budget_bytes: int | None = None
    cpu_allowed: int | None = None
    watchdog_peak: int | None = None  # bytes: the run's RSS peak, which counts the watchdog's reads


def plain(text: str) -> str:
    """Text from outside (a phase, a reason, a sweep's name) as a figure shows it: controls as
    escapes (terminal.safe), and every '$' literal, as matplotlib reads the text between two '$'
    as a formula, and one it cannot parse fails the whole figure."""
    return safe(text).replace("$", r"\$")


def png(fig: Figure) -> bytes:
    # Every text the figure holds before it is drawn (titles, labels, legends, notes) is outside
    # text or bench's own, which has no '$'; tick labels are made at drawing time, by formatters
    # (bench's) or from the labels given (crash_map passes them through plain()).
    for text in fig.findobj(Text):
        text.set_text(plain(text.get_text()))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def framework_colour(framework: str, index: int = 0) -> str:
    return FRAMEWORK_COLOURS.get(framework, PALETTE[index % len(PALETTE)])


def _log2_batch_axis(ax: Axes, batches: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted(set(batches))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(b) for b in ticks])
    ax.set_xlabel("batch size (log₂ scale)")
    if len(ticks) == 1:  # one point: give it room instead of a zero-width axis
        ax.set_xlim(ticks[0] / 2, ticks[0] * 2)


def _spread_y(ax: Axes, values: Sequence[float]) -> None:
    # Times per image across batch sizes span orders of magnitude; a linear axis flattens the small.
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")


def error_bars(ax: Axes, s: Series) -> None:
    """The points' intervals over runs, where they have one."""
    if s.lows is None or s.highs is None:
        return
    bars = [
        (x, y, y - low, high - y)
        for x, y, low, high in zip(s.xs, s.ys, s.lows, s.highs, strict=True)
        if low is not None and high is not None
    ]
    if bars:
        xs, ys, below, above = (list(v) for v in zip(*bars, strict=True))
        ax.errorbar(xs, ys, yerr=[below, above], fmt="none", ecolor=s.colour, elinewidth=1.0, capsize=3)


def _draw(ax: Axes, series: Sequence[Series]) -> None:
    for s in series:
        ax.plot(
            s.xs,
            s.ys,
            label=s.label,
            color=s.colour,
            marker=s.marker,
            linestyle=s.linestyle,
            linewidth=1.6,
            markersize=5,
        )
        error_bars(ax, s)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)


def batch_scaling(title: str, per_image: Sequence[Series], throughput: Sequence[Series]) -> bytes:
    """Time per image and images/s against batch size, side by side, one line per framework."""
    fig = Figure(figsize=(WIDTH, 3.4))
    left, right = fig.subplots(1, 2)
    batches = [int(x) for s in per_image for x in s.xs]
    for ax, series, ylabel in (
        (left, per_image, "time per image (ms)"),
        (right, throughput, "images per second"),
    ):
        _draw(ax, series)
        _log2_batch_axis(ax, batches)
        _spread_y(ax, [y for s in series for y in s.ys])
        ax.set_ylabel(ylabel)
    left.set_title("time per image (lower is better)", fontsize=10)
    right.set_title("throughput (higher is better)", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=9, frameon=False
    )
    fig.suptitle(title, fontsize=11)
    fig.set_layout_engine("constrained")
    return png(fig)


def accuracy_curves(title: str, series: Sequence[Series]) -> bytes:
    """Validation accuracy against epoch, one line per optimizer × learning rate (and whatever else
    varies, as the line style)."""
    fig = Figure(figsize=(WIDTH, 3.6))
    ax = fig.subplots()
    _draw(ax, series)
    # Whole epochs only; at most ten ticks, so a 30-epoch study stays legible.
    ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=11)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.set_layout_engine("constrained")
    return png(fig)


def _gone(sample: dict[str, Any]) -> bool:
    """Taken as or after the worker exited: no live process left to have memory or threads."""
    return bool(sample.get("final")) or sample.get("processes") == 0


def _values(samples: Sequence[dict[str, Any]], key: str, scale: float = 1.0) -> tuple[list, list]:
    # A sample taken as the worker exits still counts its CPU time, but its memory and threads are
    # gone, and a drop to zero would read as the run freeing them.
    points = [
        (s["t"], s[key] / scale)
        for s in samples
        if s.get(key) is not None and not (key != "cpu_percent" and _gone(s))
    ]
    return [p[0] for p in points], [p[1] for p in points]


def _shade(ax: Axes, bands: Sequence[Band], label: bool) -> None:
    for band in bands:
        if band.kind == "epoch":
            colour = EPOCH_COLOURS[(band.epoch or 0) % 2]
        else:
            colour = PHASE_COLOURS.get(band.kind, "#eeeeee")
        ax.axvspan(band.start, band.end, color=colour, alpha=0.8, linewidth=0, zorder=0)
        if label:
            # Above the axes, in axis-fraction height, so the text never sits on the data.
            ax.text(
                (band.start + band.end) / 2,
                1.02,
                band.label,
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if len(band.label) > 3 else 0,
            )


def _panels(samples: Sequence[dict[str, Any]]) -> list[tuple[str, str, float, str]]:
    panels = [
        ("cpu_percent", "CPU % (of one core)", 1.0, "#0072B2"),
        ("threads", "OS threads", 1.0, "#009E73"),
        ("rss_bytes", "RSS (MiB)", MIB, "#D55E00"),
    ]
    if any(s.get("gpu_memory_bytes") for s in samples):
        panels.append(("gpu_memory_bytes", "GPU memory (MiB)", MIB, "#CC79A7"))
    return panels


def _references(timeline: Timeline, key: str) -> list[tuple[float, str]]:
    """The limits worth a dashed line on a panel: every allowed CPU busy, the memory budget."""
    if key == "cpu_percent" and timeline.cpu_allowed:
        return [(100.0 * timeline.cpu_allowed, f"all {timeline.cpu_allowed} CPUs allowed")]
    if key == "rss_bytes" and timeline.budget_bytes:
        return [(timeline.budget_bytes / MIB, "memory budget")]
    return []


def _panel(ax: Axes, timeline: Timeline, key: str, ylabel: str, scale: float, colour: str) -> None:
    xs, ys = _values(timeline.samples, key, scale)
    step = key == "threads"  # a count changes in steps; joining the points would invent ramps
    # A short run has a handful of samples: show each one, or a lone sample would not show at all.
    marker = "o" if len(xs) < SPARSE else None
    ax.plot(
        xs,
        ys,
        color=colour,
        linewidth=1.4,
        marker=marker,
        markersize=3,
        drawstyle="steps-post" if step else "default",
    )
    top = max([*ys, 1.0])
    for y, text in _references(timeline, key):
        ax.axhline(y, color="#7b1fa2", linestyle="--", linewidth=1)
        ax.text(
            0.01, y, f" {text}", color="#7b1fa2", fontsize=8, va="bottom", transform=ax.get_yaxis_transform()
        )
        top = max(top, y)
    if (
        key == "rss_bytes"
        and timeline.watchdog_peak
        and timeline.ending
        and timeline.watchdog_peak / MIB > top
    ):
        # The budget watchdog reads RSS every 20 ms between samples: the peak it saw may be above them.
        peak = timeline.watchdog_peak / MIB
        ax.plot([timeline.ending.t], [peak], marker="X", color="#c62828", markersize=8, linestyle="none")
        ax.text(
            timeline.ending.t,
            peak,
            f"{peak:.0f} MiB seen by the watchdog ",
            color="#c62828",
            fontsize=8,
            ha="right",
            va="center",
        )
        top = peak
    if key == "threads":
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0, top=top * 1.15)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)


def resource_timeline(timeline: Timeline) -> bytes:
    """CPU %, threads and RSS (and GPU memory where measured) against time, phases shaded and
    named; a red line where a run that did not end ok ended, saying how."""
    panels = _panels(timeline.samples)
    fig = Figure(figsize=(WIDTH, 1.7 * len(panels) + 1.0))
    axes = fig.subplots(len(panels), 1, sharex=True)
    for i, (ax, (key, ylabel, scale, colour)) in enumerate(zip(axes, panels, strict=True)):
        _shade(ax, timeline.bands, label=i == 0)
        _panel(ax, timeline, key, ylabel, scale, colour)
        if timeline.ending is not None:
            ax.axvline(timeline.ending.t, color="#c62828", linewidth=2)
    if timeline.ending is not None:
        axes[0].text(
            timeline.ending.t,
            0.5,
            f" {timeline.ending.text} ",
            color="#c62828",
            fontsize=9,
            fontweight="bold",
            ha="right",
            va="center",
            transform=axes[0].get_xaxis_transform(),
            bbox={"facecolor": "white", "edgecolor": "#c62828", "alpha": 0.9},
        )
    axes[-1].set_xlim(left=0)  # from the worker's start, so import and setup time read as they are
    axes[-1].set_xlabel("seconds since the worker started")
    fig.suptitle(timeline.title, fontsize=10)
    fig.set_layout_engine("constrained")
    return png(fig)


def crash_map(
    frameworks: Sequence[str], columns: Sequence[str], cells: dict[tuple[str, str], tuple[str, str]]
) -> bytes:
    """Frameworks × configurations, each cell coloured by its outcome and saying it in words;
    a configuration a framework did not run stays white and hatched."""
    # Column labels are several short lines; past a dozen columns they turn sideways to fit.
    sideways = len(columns) > 12
    label_lines = max(c.count("\n") + 1 for c in columns)
    label_height = 0.11 * max(map(len, columns)) if sideways else 0.16 * label_lines
    width = min(max(WIDTH, 1.5 + 1.05 * len(columns)), 24.0)
    fig = Figure(figsize=(width, 0.8 + 0.5 * len(frameworks) + label_height))
    ax = fig.subplots()
    small = 7 if sideways else (9 if len(columns) <= 8 else 8)
    for y, framework in enumerate(frameworks):
        for x, column in enumerate(columns):
            outcome, text = cells.get((framework, column), ("", ""))
            ax.add_patch(_cell(x, y, OUTCOME_COLOURS.get(outcome, NOT_RUN), hatch=not outcome))
            ax.text(x, y, text, ha="center", va="center", fontsize=small)
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.set_ylim(len(frameworks) - 0.5, -0.5)
    labels = [c.replace("\n", ", ") for c in columns] if sideways else list(columns)
    ax.set_xticks(
        range(len(columns)), list(map(plain, labels)), rotation=90 if sideways else 0, fontsize=small
    )
    ax.set_yticks(range(len(frameworks)), list(map(plain, frameworks)), fontsize=9)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    shown = {cells[(f, c)][0] for f in frameworks for c in columns if (f, c) in cells}
    seen = sorted(shown, key=list(OUTCOME_COLOURS).index)
    legend = [Patch(facecolor=OUTCOME_COLOURS[o], edgecolor="#888888", label=o) for o in seen]
    if any((f, c) not in cells for f in frameworks for c in columns):
        legend.append(Patch(facecolor=NOT_RUN, edgecolor="#888888", hatch="///", label="not run"))
    ax.legend(
        handles=legend,
        loc="lower left",
        bbox_to_anchor=(0, 1.01),
        ncols=len(legend),
        fontsize=8,
        frameon=False,
    )
    fig.set_layout_engine("constrained")
    return png(fig)


def _cell(x: int, y: int, colour: str, hatch: bool) -> Rectangle:
    # A hatch takes its patch's edge colour: a not-run cell gets grey hatching inside a white border.
    if hatch:
        return Rectangle(
            (x - 0.45, y - 0.45), 0.9, 0.9, facecolor=colour, edgecolor="#bbbbbb", hatch="///", linewidth=0
        )
    return Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=colour, edgecolor="white", linewidth=2)

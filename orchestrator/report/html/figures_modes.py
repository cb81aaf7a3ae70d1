"""The HTML report's figure of execution modes and precision (issue 24): step time by framework ×
mode × precision, one picture per model and device (and machine), drawn from `bench report --table
modes`'s cells (tables/modes.py), so a bar is exactly a cell of that table: never a pool of runs of
different modes or precisions. Only where the selection has more than one mode or precision: the
page has no such section otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from orchestrator.report.html import plots
from orchestrator.report.html.figures import Plot, Section, by_key, slug
from orchestrator.report.query.select import Selection
from orchestrator.report.tables.modes import modes
from orchestrator.storage.db import Database

Row = dict[str, Any]
HATCHES = {"fp32": "", "bf16": "//", "fp16": "..", "tf32": "xx"}
INTRO = (
    "Milliseconds per training step of each framework in each execution mode and precision "
    "(`bench report --table modes`, which also gives the speed-up over the framework's eager fp32, "
    "the compile seconds kept apart from the step times, and why a missing bar did not run). "
    "A mode the configuration left unset is labelled (default). Across frameworks, compare bars of "
    "the same mode and precision only (docs/fairness.md#execution-modes-and-precision)."
)


def modes_section(db: Database, sel: Selection) -> Section | None:
    """The section, or None where the selection ran one mode and one precision."""
    cells = modes(db, sel).rows
    if len({(c["mode_label"], c["precision_label"]) for c in cells}) < 2:
        return None
    section = Section("modes", "Step time by execution mode and precision", INTRO)
    timed = [c for c in cells if c.get("step_ms_median")]
    groups = by_key(timed, lambda c: (c["model"], c["device"], c["machine"]))
    for (model, device, machine), group in groups.items():
        place = f"{model} on {device}" + (f", {machine}" if len({c["machine"] for c in cells}) > 1 else "")
        title = f"{place}: ms per step by framework, mode and precision"
        bars = [_bar(c) for c in group]
        over_runs = any(b["over_runs"] for b in bars)
        caption = (
            f"{len(bars)} cells that ran ok; bar: median ms/step, whisker: "
            + (
                "the 95 % interval over runs where a cell ran more than once (n), "
                "else min–max over its timed epochs; "
                if over_runs
                else "min–max over timed epochs; "
            )
            + "hatching: the precision; ! disturbed"
        )
        data = [{k: b[k] for k in ("label", "ms", "low", "high", "n")} for b in bars]
        ident = slug("modes", model, device, machine)
        section.plots.append(Plot(ident, title, caption + ".", draw(title, bars), data))
    if not section.plots:
        section.empty = "No cell ran ok with timed epochs: nothing to plot."
    return section


def _bar(c: Row) -> Row:
    """One cell's bar; its whisker the 95 % interval over runs where it has one (tables/modes.py:
    the same cell's seconds per image interval, in ms a step), else min–max over timed epochs."""
    mark = " !" if c.get("disturbed") else ""
    others = [str(c[k]) for k in ("compile_mode", "task") if c.get(k)]
    n = c.get("n") or 0
    label = " ".join([str(c["framework"]), c["mode_label"], c["precision_label"], *others])
    label += (f" n={n}" if n > 1 else "") + mark
    low, high = c.get("step_ms_min"), c.get("step_ms_max")
    spi, spi_low, spi_high = (c.get(f"seconds_per_image_{k}") for k in ("median", "low", "high"))
    over_runs = bool(spi and spi_low and spi_high)
    if over_runs:
        scale = c["step_ms_median"] / spi
        low, high = spi_low * scale, spi_high * scale
    return {
        "label": label,
        "framework": c["framework"],
        "precision": c.get("ran_precision"),
        "ms": c["step_ms_median"],
        "low": low,
        "high": high,
        "n": n,
        "over_runs": over_runs,
    }


def draw(title: str, bars: Sequence[Row]) -> bytes:
    """Horizontal bars, one per cell, coloured by framework and hatched by precision."""
    fig = Figure(figsize=(plots.WIDTH, 1.0 + 0.3 * len(bars)))
    ax = fig.add_subplot()
    ys = list(range(len(bars)))[::-1]
    for y, (i, b) in zip(ys, enumerate(bars), strict=True):
        low, high = b["low"] or b["ms"], b["high"] or b["ms"]
        ax.barh(
            y,
            b["ms"],
            color=plots.framework_colour(str(b["framework"]), i),
            hatch=HATCHES.get(str(b["precision"]), "++"),
            edgecolor="#333333",
            xerr=[[b["ms"] - low], [high - b["ms"]]],
            capsize=2,
        )
    ax.set_yticks(ys)
    ax.set_yticklabels([plots.plain(b["label"]) for b in bars], fontsize=8)
    ax.set_xlabel("ms per step (median)")
    ax.set_title(title, fontsize=10)
    precisions = sorted({str(b["precision"]) for b in bars})
    patches = [
        Patch(facecolor="white", edgecolor="#333333", hatch=HATCHES.get(p, "++"), label=p) for p in precisions
    ]
    ax.legend(handles=patches, fontsize=8, loc="lower right")
    return plots.png(fig)

"""The study page's figure of a published table: per column, each item's published × the fastest
beside bench's, bench's with its 95 % interval as an error bar.

Drawn with the report page's own machinery (report/html/plots.py: the object API, its colours, its
png() that makes outside text safe for matplotlib), one panel per column, so a reader sees at a
glance where bench's order follows the study's and where it does not. report.py gathers the Bars
for every format; matplotlib is imported only when one is drawn, for a page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.stats import bootstrap

PUBLISHED = "#999999"
BENCH = "#0072B2"  # the legend's swatch for bench's bars (each drawn in its framework's colour)
COLUMNS_PER_ROW = 3
HEIGHT = 2.8  # inches a row of panels


@dataclass(frozen=True)
class Bar:
    """One item of one column: its published × the fastest and bench's (None where absent)."""

    column: str
    item: str
    published: float | None
    bench: bootstrap.Ratio | None


def times_fastest(title: str, items_name: str, bars: Sequence[Bar]) -> bytes:
    """One panel per column: a published bar (grey) and bench's (its framework's colour, or the
    palette's) for each item, bench's interval as its error bar; a missing side is no bar."""
    # Here, not at the top: report.py builds Bars for every format, and only a page draws them.
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from orchestrator.report.html import plots

    columns = list(dict.fromkeys(b.column for b in bars))
    across = min(len(columns), COLUMNS_PER_ROW) or 1
    down = max(math.ceil(len(columns) / across), 1)
    fig = Figure(figsize=(plots.WIDTH, HEIGHT * down))
    axes = fig.subplots(down, across, squeeze=False).flatten()
    for ax, column in zip(axes, columns, strict=False):
        mine = [b for b in bars if b.column == column]
        for x, bar in enumerate(mine):
            if bar.published is not None:
                ax.bar(x - 0.2, bar.published, width=0.4, color=PUBLISHED)
            if bar.bench is not None:
                r = bar.bench
                low = r.centre - r.low if r.low is not None else 0.0
                high = r.high - r.centre if r.high is not None else 0.0
                ax.bar(
                    x + 0.2,
                    r.centre,
                    width=0.4,
                    color=plots.FRAMEWORK_COLOURS.get(bar.item, BENCH),
                    yerr=[[low], [high]],
                    capsize=3,
                )
        ax.set_xticks(range(len(mine)), [plots.plain(b.item) for b in mine], rotation=30, fontsize=8)
        ax.axhline(1.0, color="#444444", linewidth=0.6)
        ax.set_title(column, fontsize=9)
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    for ax in axes[len(columns) :]:
        ax.set_visible(False)
    axes[0].set_ylabel("× the fastest")
    legend = [
        Patch(color=PUBLISHED, label="published"),
        Patch(color=BENCH, label="bench, in colour (95 % interval)"),
    ]
    fig.legend(handles=legend, loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    fig.suptitle(f"{title}: each {items_name} × its column's fastest (lower is faster)", fontsize=10)
    fig.set_layout_engine("constrained")
    return plots.png(fig)

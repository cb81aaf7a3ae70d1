"""The HTML report's figure of framework releases (issue 43): ms per image against the release, one
line per configuration, one picture per framework and machine, drawn from `bench report --table
versions`'s cells (tables/versions.py), so a point is exactly a cell of that table, its error bar
the cell's 95 % interval over runs, and a ring marks a release at which the table calls a change.
Only where the selection holds more than one release of a framework: no section otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from orchestrator.report.html import plots
from orchestrator.report.html.figures import MAX_SERIES, Plot, Section, by_key, series_data, slug
from orchestrator.report.query.select import Selection, varying
from orchestrator.report.query.versions import VERSION_SETTING, config_key, release_key, release_text
from orchestrator.report.tables.base import LABELS, field_text
from orchestrator.report.tables.versions import versions
from orchestrator.storage.db import Database

Row = dict[str, Any]
INTRO = (
    "Milliseconds per image against the framework release each configuration's runs recorded, in "
    "version order (`bench report --table versions`, which also gives each step's ratio and "
    "interval). Error bars: the 95 % interval over runs; a ring: the release at which the "
    "configuration changed beyond the noise (Mann-Whitney with Holm over its steps, and the "
    "ratio's interval excluding 1)."
)
NOT_A_LINE = frozenset(("framework", VERSION_SETTING))


def versions_section(db: Database, sel: Selection) -> Section | None:
    """The section, or None where no framework ran more than one release."""
    cells = [c for c in versions(db, sel).rows if c["framework_version"] is not None]
    releases = by_key(cells, lambda c: c["framework"])
    several = [f for f, group in releases.items() if len({c["framework_version"] for c in group}) > 1]
    if not several:
        return None
    section = Section("versions", "Framework releases", INTRO)
    timed = [
        c for c in cells if c["framework"] in several and c.get("ok_runs") and c["seconds_per_image_median"]
    ]
    machines = len({c["machine"] for c in timed}) > 1
    for (framework, machine), group in by_key(timed, lambda c: (c["framework"], c["machine"])).items():
        order = sorted({c["framework_version"] for c in group}, key=release_key)
        lines = list(by_key(group, config_key).values())
        for part in range(0, len(lines), MAX_SERIES):  # more lines than colours: another picture
            chosen = lines[part : part + MAX_SERIES]
            series = _series(chosen, order)
            place = f"{framework}" + (f" on {machine}" if machines else "")
            title = f"{place}: ms per image by release"
            caption = f"{len(chosen)} configurations over {len(order)} releases; ! disturbed."
            ident = slug("versions", framework, machine, part // MAX_SERIES)
            data = series_data([[s] for s, _ in series], ["ms"])
            section.plots.append(Plot(ident, title, caption, draw(title, series, order), data))
    if not section.plots:
        section.empty = "No release of these frameworks ran ok: nothing to plot."
    return section


def _series(lines: Sequence[Sequence[Row]], order: Sequence[str]) -> list[tuple[plots.Series, list[bool]]]:
    """A line per configuration, with whether each of its points is a release it changed at."""
    cells = [c for line in lines for c in line]
    keys = varying(cells, NOT_A_LINE)  # and what ran, where it differs: never two lines one label
    keys += [k for k in LABELS.values() if len({c[k] for c in cells}) > 1]
    at = {version: float(i) for i, version in enumerate(order)}
    found = []
    for i, line in enumerate(lines):
        first = line[0]
        mark = " !" if any(c.get("disturbed") for c in line) else ""
        label = " ".join(f"{k}={field_text(k, first.get(k))}" for k in keys) or str(first["model"])
        s = plots.Series(
            label + mark,
            [at[c["framework_version"]] for c in line],
            [c["seconds_per_image_median"] * 1000 for c in line],
            plots.PALETTE[i % len(plots.PALETTE)],
            plots.MARKERS[i % len(plots.MARKERS)],
        )
        s.lows = [_ms(c.get("seconds_per_image_low")) for c in line]
        s.highs = [_ms(c.get("seconds_per_image_high")) for c in line]
        found.append((s, [c.get("changed") is True for c in line]))
    return found


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def draw(title: str, series: Sequence[tuple[plots.Series, list[bool]]], order: Sequence[str]) -> bytes:
    """ms per image (log where they span a lot) against the releases, evenly spaced in order."""
    fig = Figure(figsize=(plots.WIDTH, 3.6))
    ax = fig.subplots()
    for s, rings in series:
        ax.plot(s.xs, s.ys, label=plots.plain(s.label), color=s.colour, marker=s.marker, linewidth=1.6)
        plots.error_bars(ax, s)
        ringed = [(x, y) for x, y, ring in zip(s.xs, s.ys, rings, strict=True) if ring]
        if ringed:
            xs, ys = zip(*ringed, strict=True)
            ax.scatter(xs, ys, s=220, facecolors="none", edgecolors=s.colour, linewidths=1.4)
    # Tick labels are drawn after png() makes the figure's texts plain: made plain here.
    ax.set_xticks(range(len(order)), [plots.plain(release_text(v)) for v in order], rotation=30, ha="right")
    ax.set_xlabel("release (version order)")
    ax.set_ylabel("ms per image (lower is better)")
    ax.grid(True, color="#dddddd", linewidth=0.6)
    ax.legend(fontsize=8, frameon=False)
    fig.suptitle(plots.plain(title), fontsize=11)
    fig.set_layout_engine("constrained")
    return plots.png(fig)

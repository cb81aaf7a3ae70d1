"""The HTML report's figures of single runs and of outcomes: each framework's resource timeline,
the crash map, and `bench inspect --plot`'s post-mortem picture."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.errors import BenchError
from orchestrator.report.html import plots
from orchestrator.report.html.figures import (
    Plot,
    Row,
    Section,
    config_of,
    describe,
    frameworks_in,
    label_keys,
    slug,
)
from orchestrator.report.query.sweeps import model_label
from orchestrator.report.tables import timeline
from orchestrator.storage.db import Database
from orchestrator.text.formats import number

MAP_COLUMNS = 30  # more configurations than this: the crash map is split into several pictures
MAP_PICTURES = 4  # more pictures than this: one map of counts by model and device instead
MAP_INTRO = (
    "Frameworks × configurations, each cell the outcome of that framework at that configuration (the "
    "latest attempt). Configurations are named by the settings that vary in the selection; a hatched "
    "cell is a configuration that framework did not run."
)
MAP_COUNTS_INTRO = (
    "{configurations} configurations are too many for a cell each: frameworks × model and device, each "
    "cell counting its outcomes (the three most frequent) and coloured by its most frequent failure, "
    "green only where nothing failed. Narrow the selection with --where for a cell per configuration."
)


# --- resource timelines ------------------------------------------------------------------------


def bands(phase_rows: Sequence[Row], end: float) -> list[plots.Band]:
    """Phase bands from each phase's first sample to the next phase's, the last to the end."""
    out = []
    for i, p in enumerate(phase_rows):
        if p.get("first_t") is None:
            continue
        stop = phase_rows[i + 1]["first_t"] if i + 1 < len(phase_rows) else None
        stop = max(stop if stop is not None else end, p.get("last_t") or p["first_t"])
        label = p["phase"] + (f" {p['epoch']}" if p.get("epoch") is not None else "")
        out.append(plots.Band(label, p["phase"], p["first_t"], stop, p.get("epoch")))
    return out


def ending(run: Row, end: float) -> plots.Ending | None:
    """The outcome, signal and phase of a run that did not end ok, for the marker at its end."""
    if run["outcome"] == "ok":
        return None
    text = run["outcome"] + (f" ({run['signal_name']})" if run.get("signal_name") else "")
    if run.get("last_phase"):
        text += f" in {run['last_phase']}" + (f" {run['last_epoch']}" if run.get("last_epoch") else "")
    return plots.Ending(end, f"{text} at {end:.3g} s")


def run_timeline(db: Database, run: Row, title: str) -> bytes | None:
    """The run's resource timeline as a PNG, phases shaded, its death marked; None without samples."""
    samples = timeline.samples(db, run["id"])
    if not samples:
        return None
    end = max(s["t"] for s in samples)
    picture = plots.Timeline(
        title,
        samples,
        bands(timeline.phases(db, run["id"]), end),
        ending(run, end),
        run.get("memory_budget"),
        run.get("cpu_allowed"),
        run.get("rss_peak_bytes") if run.get("memory_budget") else None,
    )
    return plots.resource_timeline(picture)


def _config_key(run: Row) -> str:
    config = config_of(run)
    config.pop("framework", None)
    return json.dumps(config, sort_keys=True)


Matcher = Callable[[Row], bool]


def pick_timeline_runs(runs: Sequence[Row], wanted: Matcher | None) -> list[Row]:
    """Per framework, one ok run with samples: the one with the most samples at the configuration
    most frameworks share (ties: the first), or among those `wanted` accepts. A framework with no
    run at that configuration shows its own run with the most samples."""
    candidates = [r for r in runs if r["outcome"] == "ok" and r.get("samples_count")]
    if wanted is not None:
        candidates = [r for r in candidates if wanted(r)]
    if not candidates:
        return []
    common = Counter(_config_key(r) for r in candidates).most_common(1)[0][0]
    chosen = []
    for framework in frameworks_in(candidates):
        own = [r for r in candidates if r["framework"] == framework]
        at_common = [r for r in own if _config_key(r) == common] or own
        chosen.append(max(at_common, key=lambda r: (r["samples_count"], -r["id"])))
    return chosen


def timeline_section(db: Database, runs: Sequence[Row], wanted: Matcher | None, how: str) -> Section:
    section = Section(
        "timelines",
        "Resource timelines",
        f"CPU % (of one core), OS threads and RSS of each framework's process tree over time, from "
        f"the sidecar profiler; phases shaded and named. Configuration: {how}.",
    )
    keys = label_keys(runs)
    for run in pick_timeline_runs(runs, wanted):
        title = f"{run['framework']}, run {run['id']}: {describe(run, keys)}"
        image = run_timeline(db, run, title)
        if image is not None:
            caption = (
                f"{run['samples_count']} samples; CPU % steady mean {number(run.get('cpu_percent_mean'))}."
            )
            section.plots.append(Plot(slug("timeline", run["framework"], run["id"]), title, caption, image))
    if not section.plots:
        section.empty = (
            "No run ended ok with resource samples"
            + (" at the chosen configuration" if wanted is not None else "")
            + " (sampler off, runs recorded before the profiler, or every run failed)."
        )
    return section


# --- the crash map -----------------------------------------------------------------------------


def _cell_text(run: Row) -> str:
    return run["outcome"] + (f"\n{run['signal_name']}" if run.get("signal_name") else "")


def _by_configuration(runs: Sequence[Row]) -> tuple[list[str], dict[tuple[str, str], tuple[str, str]]]:
    """A column per configuration (less the framework), named by the settings that vary."""
    keys = label_keys(runs)
    several = len({r["sweep_id"] for r in runs}) > 1
    columns: dict[str, None] = {}
    cells = {}
    for r in runs:
        # A configuration run in several sweeps is a column per sweep: a cell is one attempt.
        column = (f"sweep {r['sweep_id']}\n" if several else "") + describe(r, keys, sep="\n")
        columns[column] = None
        cells[(r["framework"], column)] = (r["outcome"], _cell_text(r))
    return list(columns), cells


def _by_model_device(runs: Sequence[Row]) -> tuple[list[str], dict[tuple[str, str], tuple[str, str]]]:
    """Too many configurations for a cell each: a column per model and device, each cell counting
    its outcomes, coloured by the most frequent failure (ok only where nothing failed)."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    columns: dict[str, None] = {}
    for r in runs:
        column = f"{model_label(r)}\n{r['device']}"
        columns[column] = None
        counts.setdefault((r["framework"], column), Counter())[r["outcome"]] += 1
    cells = {}
    for key, outcomes in counts.items():
        failures = [(n, o) for o, n in outcomes.items() if o != "ok"]
        colour = max(failures)[1] if failures else "ok"
        cells[key] = (colour, "\n".join(f"{o} {n}" for o, n in outcomes.most_common(3)))
    return list(columns), cells


def crash_map_section(runs: Sequence[Row]) -> Section:
    section = Section("crash-map", "Crash map: who crashes where", MAP_INTRO)
    if not runs:
        section.empty = "The selection has no runs."
        return section
    columns, cells = _by_configuration(runs)
    counted = len(columns) > MAP_COLUMNS * MAP_PICTURES
    if counted:
        section.intro = MAP_COUNTS_INTRO.format(configurations=len(columns))
        columns, cells = _by_model_device(runs)
    frameworks = frameworks_in(runs)
    for start in range(0, len(columns), MAP_COLUMNS):
        part = columns[start : start + MAP_COLUMNS]
        suffix = f" (columns {start + 1}–{start + len(part)})" if len(columns) > MAP_COLUMNS else ""
        # A cell is one run, except in the counted map, whose captions count every run.
        outcomes = (
            Counter(r["outcome"] for r in runs)
            if counted
            else Counter(o for (_, c), (o, _) in cells.items() if c in part)
        )
        caption = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items()))
        image = plots.crash_map(frameworks, part, cells)
        section.plots.append(
            Plot(slug("crash-map", start // MAP_COLUMNS + 1), section.title + suffix, caption, image)
        )
    return section


def plot_run(db: Database, run_id: int, path: Path) -> None:
    """`bench inspect RUN --plot FILE.png`: the run's timeline up to its end, its death marked."""
    run = timeline.find_run(db, run_id)
    title = (
        f"run {run_id} ({run['framework']}, {model_label(run)}, batch {run['batch_size']}): {run['outcome']}"
    )
    image = run_timeline(db, run, title)
    if image is None:
        raise BenchError(f"run {run_id} has no samples to plot: {timeline.no_samples_reason(run)}")
    try:
        path.write_bytes(image)
    except OSError as exc:
        raise BenchError(f"cannot write {path}: {exc.strerror}") from None

"""Enough samples, and one source for derived figures (docs/reports.md, "Samples").

A run's timing samples are its timed epochs (the configured ones, then the extra ones the worker
adds until min_time seconds and min_steps steps are reached). Every timing figure of a run or a
cell derives from one aggregate: the median of the per-epoch seconds per image. images/s is its
inverse, ms/image a thousand times it, s/epoch it times the images of an epoch; the ranges come
from the same per-epoch quantity, so a median and its (min–max) always agree across units.
"""

from __future__ import annotations

import statistics
from typing import Any

from orchestrator.config.checks import resolved_timing
from orchestrator.config.run_config import RunConfig
from orchestrator.text.formats import number

# A cell is marked `~` (wide) when (max - min) / median of its per-epoch seconds per image is above
# this, and `?` (few) when it has fewer timed epochs than FEW_EPOCHS (one or two epochs show no
# spread at all) or a run of it stopped short of min_time/min_steps (docs/reports.md).
WIDE_SPREAD = 0.10
FEW_EPOCHS = 3


def run_summary(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's timing columns from its timed epochs (all repeats, extra ones included)."""
    # From seconds and images (checked counts), not the worker's own quotient: one source.
    spi = [
        e["seconds"] / e["images"] for e in epochs if _positive(e.get("images")) and _number(e.get("seconds"))
    ]
    seconds = [e["seconds"] for e in epochs if _number(e.get("seconds"))]
    if not seconds:
        return {}
    median = statistics.median(spi) if spi else None
    images = epochs[-1].get("images")  # every epoch of a run has the same whole batches
    return {
        "seconds_per_image": median,
        "images_per_second": 1 / median if median else None,
        "median_epoch_seconds": median * images if median and images else statistics.median(seconds),
        "min_epoch_seconds": min(seconds),
        "max_epoch_seconds": max(seconds),
        "timed_epochs": len(epochs),
        "timed_steps": sum(e.get("steps") or 0 for e in epochs),
        "timed_seconds": sum(seconds),
    }


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(value: Any) -> bool:
    return _number(value) and value > 0


def run_settings(config: RunConfig, summary: dict[str, Any], stopped_by: Any) -> dict[str, Any]:
    """min_time and min_steps as the run used them, and the note where it had fewer samples."""
    min_time, min_steps = resolved_timing(config)
    row: dict[str, Any] = {"min_time": min_time, "min_steps": min_steps, "samples_note": None}
    steps, seconds = summary.get("timed_steps"), summary.get("timed_seconds")
    if steps is None or seconds is None:
        return row
    short = []
    if steps < min_steps:
        short.append(f"fewer than min_steps {min_steps}")
    if seconds < min_time:
        short.append(f"less than min_time {min_time:g} s")
    if short:
        # The worker's words: outside text, kept short here and escaped wherever it is shown.
        why = f", stopped by {stopped_by[:120]}" if isinstance(stopped_by, str) and stopped_by else ""
        row["samples_note"] = f"{steps} timed steps in {seconds:.3g} s: {' and '.join(short)}{why}"
    return row


def pooled_timing(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's timing from its ok runs' rows: the median of their median seconds per image, and
    the min–max of every timed epoch's seconds per image; every unit derived from those three."""
    medians, lows, highs = [], [], []
    images = None
    for r in ok:
        images = _images(r) or images
        spi = r.get("seconds_per_image")
        if not spi and r.get("median_epoch_seconds") and _images(r):
            spi = r["median_epoch_seconds"] / _images(r)  # a row without the column's figure
        if spi and _images(r) and r.get("min_epoch_seconds") and r.get("max_epoch_seconds"):
            medians.append(spi)
            lows.append(r["min_epoch_seconds"] / _images(r))
            highs.append(r["max_epoch_seconds"] / _images(r))
    if not medians:
        return {key: None for key in TIMING_KEYS}
    return derived(statistics.median(medians), min(lows), max(highs), images)


def _images(row: dict[str, Any]) -> int | None:
    steps, batch = row.get("steps_per_epoch"), global_batch(row)
    return steps * batch if steps and batch else None


def global_batch(row: dict[str, Any]) -> int | None:
    """A stored configuration's samples per step, every replica's (batch_size is per replica)."""
    batch = row.get("batch_size")
    return batch * (row.get("replicas") or 1) if batch else None


TIMING_KEYS = tuple(
    f"{what}_{which}"
    for what in ("seconds_per_image", "images_per_second", "epoch_seconds")
    for which in ("median", "min", "max")
) + ("relative_spread",)


def derived(median: float, low: float, high: float, images: int | None) -> dict[str, Any]:
    """Every unit of a cell from its seconds per image (median, min, max): they agree by
    construction (images/s × ms/image = 1000; the fastest epoch is both ends' best)."""
    row: dict[str, Any] = {
        "seconds_per_image_median": median,
        "seconds_per_image_min": low,
        "seconds_per_image_max": high,
        "images_per_second_median": 1 / median,
        "images_per_second_min": 1 / high,
        "images_per_second_max": 1 / low,
        "relative_spread": relative_spread(median, low, high),
    }
    for which in ("median", "min", "max"):
        value = row[f"seconds_per_image_{which}"]
        row[f"epoch_seconds_{which}"] = value * images if images else None
    return row


def pooled_counts(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """How many samples a cell has: timed epochs and steps over its ok runs (a row recorded before
    schema 6 counts its configured epochs), and the first run's note where one had fewer."""
    epochs = steps = 0
    for r in ok:
        count = r.get("timed_epochs") or r["epochs"] * r["repeats"]
        epochs += count
        steps += r.get("timed_steps") or count * (r.get("steps_per_epoch") or 0)
    notes = [r["samples_note"] for r in ok if r.get("samples_note")]
    note = None
    if notes:
        note = notes[0] if len(ok) == 1 else f"{len(notes)} of {len(ok)} runs short; first: {notes[0]}"
    seconds = [r["timed_seconds"] for r in ok if r.get("timed_seconds") is not None]
    return {
        "timed_epochs": epochs,
        "timed_steps": steps,
        "timed_seconds": sum(seconds) if len(seconds) == len(ok) and ok else None,
        "samples_note": note,
    }


def cell_marks(row: dict[str, Any]) -> str:
    """`~` where the cell's spread is wide, `?` where it has too few timed epochs; '' otherwise."""
    marks = ""
    spread = row.get("relative_spread")
    if spread is not None and spread > WIDE_SPREAD:
        marks += "~"
    few = row.get("timed_epochs") is not None and row["timed_epochs"] < FEW_EPOCHS
    if few or row.get("samples_note"):
        marks += "?"
    return marks


def relative_spread(median: float | None, low: float | None, high: float | None) -> float | None:
    """(max - min) / median of the per-epoch seconds per image; None without figures."""
    if not median or low is None or high is None:
        return None
    return (high - low) / median


def advice(epochs: int, timed_epochs: int, steps: int | None, seconds: float | None, need: int) -> str:
    """What to change when there are too few timed epochs to decide: the settings to raise, and
    what the runs had."""
    per_epoch = (seconds or 0) / timed_epochs if timed_epochs else 0
    wanted = need * per_epoch * 1.2  # a fifth above, so that timing noise still reaches `need`
    had = f"{timed_epochs} timed epoch{'s' if timed_epochs != 1 else ''}"
    if steps is not None:
        had += f" of {steps} steps" if timed_epochs == 1 else f", {steps} steps in all"
    if seconds is not None:
        had += f", {seconds:.2g} s"
    more = max(need, epochs + need - timed_epochs)
    return f"run with epochs: {more} or min_time: {max(wanted, 0.1):.2g} (now {had})"


# The marks' explanation under a table that shows any of them.
MARK_NOTES = {
    "~": f"~ wide spread: (max − min) / median of the epochs' time per image above {WIDE_SPREAD:.0%}",
    "?": (
        f"? few samples: fewer than {FEW_EPOCHS} timed epochs, or a run stopped short of min_time/"
        "min_steps (bench inspect RUN says why); raise epochs or min_time"
    ),
}
# What CSV and JSON carry of a cell's samples, beside its timing figures.
SAMPLE_KEYS = [
    "timed_epochs",
    "timed_steps",
    "timed_seconds",
    "relative_spread",
    "samples_mark",
    "samples_note",
]


def mark_run(row: dict[str, Any]) -> dict[str, Any]:
    """A run row of the results table with its relative spread and marks, as a cell's."""
    median, low, high = (
        row.get(k) for k in ("median_epoch_seconds", "min_epoch_seconds", "max_epoch_seconds")
    )
    row["relative_spread"] = relative_spread(median, low, high)
    if row.get("timed_epochs") is None and row.get("median_epoch_seconds") is not None:
        row["timed_epochs"] = row["epochs"] * row["repeats"]  # recorded before schema 6
        row["timed_steps"] = row["timed_epochs"] * (row.get("steps_per_epoch") or 0)
    row["samples_mark"] = cell_marks(row) if row.get("outcome") == "ok" else ""
    return row


def inspect_fields(run: dict[str, Any]) -> list[tuple[str, str]]:
    """`bench inspect`'s lines on the run's samples (the values are the database's: any type)."""
    if run.get("timed_epochs") is None:
        return []
    aim = f"min_time {number(run.get('min_time'))} s, min_steps {number(run.get('min_steps'))}"
    had = f"{number(run['timed_epochs'])} epochs, {number(run.get('timed_steps'))} steps"
    fields = [("timed", f"{had}, {number(run.get('timed_seconds'))} s ({aim})")]
    if run.get("samples_note"):
        fields.append(("fewer samples", str(run["samples_note"])))
    return fields


def count_text(row: dict[str, Any]) -> str:
    """`12 epochs, 24 steps`: a cell's timing samples."""
    if not row.get("timed_epochs"):
        return "—"
    epochs = row["timed_epochs"]
    return f"{epochs} epoch{'' if epochs == 1 else 's'}, {row['timed_steps']} steps"


def spread_text(row: dict[str, Any]) -> str:
    """`4.1%`, with the cell's marks: its relative spread."""
    spread = row.get("relative_spread")
    text = "—" if spread is None else f"{number(100 * spread, 2)}%"
    marks = row.get("samples_mark") or ""
    return f"{text} {marks}" if marks else text


def mark_notes(rows: list[dict[str, Any]]) -> list[str]:
    shown = "".join(r.get("samples_mark") or "" for r in rows)
    return [note for mark, note in MARK_NOTES.items() if mark in shown]

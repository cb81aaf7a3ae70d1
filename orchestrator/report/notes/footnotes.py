"""The comparison table's footnotes, computed from its cells (issue 22).

Each cell's multiple of the fastest framework's time is computed from the milliseconds per image
the table prints, among the configurations that differ from it in the framework alone (the same
model, device, machine and every other setting). The notes that apply to a cell
(notes/fairness.py: the settings its run recorded, the gaps explained in docs/fairness.md) are
numbered under the table, each followed by the figures of the cells it marks; a cell
fairness.UNEXPLAINED_ABOVE times the fastest or more that no note explains is marked unexplained.
So a note can no longer quote a figure the table above it does not show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.notes import fairness
from orchestrator.stats import bootstrap
from orchestrator.text.formats import number

Row = dict[str, Any]
UNEXPLAINED = fairness.Note(
    "unexplained",
    "unexplained: more than "
    f"{fairness.UNEXPLAINED_ABOVE:g}x the fastest framework's time, and no finding explains it; "
    f"{fairness.link('Gaps between frameworks')}",
)


def shown_ms(row: Row) -> float | None:
    """The cell's milliseconds per image exactly as the table prints them (tables.number)."""
    spi = row.get("seconds_per_image_median")
    if not row.get("ok_runs") or not spi:
        return None
    return float(number(spi * 1000).replace(",", ""))


def _peers(row: Row) -> tuple[Any, ...]:
    """What a cell is compared on: everything but the framework, and the machine it ran on and the
    precision it ran (an unset mode is each framework's default: docs/fairness.md; the table's
    note says where the frameworks' modes differ)."""
    return (
        row.get("fingerprint", row.get("machine")),
        row.get("ran_precision"),
        *(row.get(f) for f in FIELD_NAMES if f != "framework"),
    )


def peer_groups(rows: Iterable[Row]) -> list[list[Row]]:
    """The rows with a figure, in groups of the same settings but the framework (on one machine,
    at one precision), where more than one framework ran them: the cells compared with each other."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        if shown_ms(r):
            groups.setdefault(_peers(r), []).append(r)
    return [g for g in groups.values() if len({r["framework"] for r in g}) > 1]


def compared(rows: Iterable[Row]) -> dict[int, tuple[float, Row]]:
    """Per row (by id()), its multiple of the fastest framework's printed ms/image at the same
    settings, and that fastest row; only where another framework ran those settings."""
    out: dict[int, tuple[float, Row]] = {}
    for group in peer_groups(rows):
        best = min(group, key=lambda r: shown_ms(r) or 0.0)
        for r in group:
            out[id(r)] = ((shown_ms(r) or 0.0) / (shown_ms(best) or 1.0), best)
    return out


def figure(row: Row, ratio: float, best: Row, cell: Callable[[Row], str]) -> str:
    """One cell's figure, from the numbers printed above: its ms/image, the multiple (with its 95 %
    interval where both cells have runs to resample), the fastest's."""
    return (
        f"{row['framework']} {cell(row)} {number(shown_ms(row))} ms/image = {ratio:.2f}x"
        f"{ratio_interval(best, row)} {best['framework']}'s {number(shown_ms(best))}"
    )


def ratio_interval(best: Row, row: Row) -> str:
    """ " [low–high]": the 95 % bootstrap interval of row's time over best's, where each has two runs
    or more (stats/bootstrap.py); else nothing (one process has no spread between processes)."""
    if row is best or len(best.get("run_figures") or ()) < 2 or len(row.get("run_figures") or ()) < 2:
        return ""
    found = bootstrap.ratio(best["run_figures"], row["run_figures"])
    if found.low is None or found.high is None:
        return ""
    return f" [{found.low:.2f}–{found.high:.2f}]"


def annotate(rows: list[Row], facts: dict[int, Row], cell: Callable[[Row], str]) -> list[str]:
    """Set each row's marks (`footnotes`, the text after its cell; `fairness_notes`, the keys) and
    return the numbered notes, each with the figures of the cells it marks. `cell` names a row's
    column (model and device), as the table heads it."""
    ratios = compared(rows)
    notes: dict[str, tuple[int, str, list[str]]] = {}  # text -> number, key, figures
    for r in rows:
        ratio, best = ratios.get(id(r), (None, None))
        found = fairness.notes_for(r, facts.get(r["last_run"]), ratio)
        if not found and ratio is not None and ratio >= fairness.UNEXPLAINED_ABOVE:
            found = [UNEXPLAINED]
        marks = []
        for note in found:
            number_, key, figures = notes.setdefault(note.text, (len(notes) + 1, note.key, []))
            if ratio is not None and best is not None:
                figures.append(figure(r, ratio, best, cell))
            marks.append((number_, key))
        r["footnotes"] = "".join(
            f" [{n}: unexplained]" if k == "unexplained" else f" [{n}]" for n, k in marks
        )
        r["fairness_notes"] = ",".join(k for _, k in marks) or None
    return [
        f"[{n}] " + (f"{'; '.join(figures)}: " if figures else "") + text
        for text, (n, _, figures) in notes.items()
    ]

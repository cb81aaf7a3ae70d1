"""The comparison table's ranks: per model and device, the frameworks in tie groups (cells that
cannot be told apart share a rank, "1="), from their runs (orchestrator/stats/ranking.py).

A rank is a claim about processes: it is only given where every framework of the group ran at
least twice (`runs: N`); a cell of one run has no spread between processes to judge it by, so a
group with one says so in a note instead of ranking. Cells are compared with the same peers as the
footnotes' "× the fastest" (notes/footnotes.py: everything but the framework, on one machine).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestrator.report.notes.footnotes import peer_groups
from orchestrator.stats import ranking
from orchestrator.text.formats import number

Row = dict[str, Any]
NAMED = 6  # single-run cells the note names before it counts the rest
NOTE = (
    "rank: per column, frameworks that share a rank (1=) cannot be told apart by their runs (the 95 % "
    "bootstrap interval of their ratio holds 1, or the Mann-Whitney test on the runs gives p >= 0.05); "
    "[low–high] is the 95 % interval of the median over runs (docs/reports.md, Statistics over runs)"
)
UNRANKED = (
    "not ranked: {cells} rest on a single run each; a ranking needs at least 2 runs a cell, and 4 "
    "a side to tell two cells apart (set runs: N in the matrix; bench run --dry-run says what N)"
)


def rank(rows: list[Row], cell: Callable[[Row], str]) -> list[str]:
    """Set each comparable row's ``rank`` label (or None) and return the notes for under the table."""
    unranked: list[str] = []
    ranked = False
    for group in peer_groups(rows):
        if any(r.get("n", 0) < 2 for r in group):
            unranked += [f"{r['framework']} {cell(r)}" for r in group if r.get("n", 0) < 2]
            continue
        cells = {str(i): r["run_figures"] for i, r in enumerate(group)}
        labels = ranking.rank_labels(ranking.tie_groups(cells))
        for i, r in enumerate(group):
            r["rank"] = labels[str(i)]
        ranked = True
    notes = [NOTE] if ranked else []
    if unranked:
        single = sorted(set(unranked))
        more = f" and {len(single) - NAMED} more cells" if len(single) > NAMED else ""
        named = ", ".join(single[:NAMED]) + more
        notes.append(UNRANKED.format(cells=named))
    return notes


def interval_text(row: Row, scale: float = 1000.0) -> str:
    """ " [low–high]" of a cell's seconds per image, in the unit the table prints (ms)."""
    low, high = row.get("seconds_per_image_low"), row.get("seconds_per_image_high")
    if low is None or high is None:
        return ""
    return f" [{number(low * scale)}–{number(high * scale)}]"

"""A published accuracy table beside bench's, as orders: per epoch, the order of the items (the
learning rates) the study published and bench's tie groups, and Kendall's τ-b between them.

Never as levels: bench's accuracies come from whatever data its runs read (digits, where the study
trained on CIFAR-10), and an accuracy on one data set says nothing of another's level, only, at
most, of the order. The report says which data bench's runs read, from the runs themselves. The
study's epochs and bench's need not meet (30 epochs of CIFAR-10 against a few of digits): each
epoch either has is a row, the other side "—", and a last row sets each side's last epoch beside
the other's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from orchestrator.errors import StatsError
from orchestrator.stats import ranking
from orchestrator.studies import accuracy, measured, published, since
from orchestrator.studies.spec import Claim, Study, Table


class Lines(Protocol):
    """What the table is written to: report.py's Lines (which imports this module, not the reverse)."""

    def heading(self, level: int, text: str) -> None: ...
    def para(self, text: str) -> None: ...
    def table(self, rows: list[dict[str, str]], keys: Sequence[str]) -> None: ...


DASH = "—"
TAU = "tau"  # a row's τ-b as a number, beside the table's text (not a column)
HEADINGS = ("epoch", "published order, best first", "bench's tie groups, best first", "n", "Kendall's τ-b")


def table(out: Lines, study: Study, tab: Table, found: measured.Measured) -> list[since.Agreement]:
    """The table, and per epoch both sides have, τ-b between the orders (for the closing section)."""
    pub = published.read_table(tab)
    kept = [c for c in found.cells if all(measured.same(c.settings.get(k), v) for k, v in tab.measured)]
    out.heading(2, f"Published beside measured: {tab.name}")
    # Which data bench's side is on: what the study's matrices run for the table, said even before
    # they have run.
    data = sorted(
        {
            str(c.dataset)
            for m in study.matrices
            for c in m.matrix.configs
            if all(measured.same(getattr(c, k), v) for k, v in tab.measured)
        }
    )
    rows_kept = ", ".join(f"{k} {v}" for k, v in tab.where)
    settings = ", ".join(f"{k} {v}" for k, v in tab.measured) or "every configuration"
    out.para(
        f"Published: {tab.row}; an accuracy (fraction 0–1){'; ' + rows_kept if rows_kept else ''}. "
        f"Measured: validation accuracy after each epoch, {settings}, one figure a seed. "
        + (
            f"bench's accuracies are on {', '.join(data)}, not the study's data: only the orders "
            "compare, never the levels. "
            if data
            else ""
        )
        + "Best first: the highest accuracy; bench's items share a group where its runs cannot tell "
        "them apart (docs/reports.md)." + (f" {tab.notes}" if tab.notes else "")
    )
    bench = _bench(kept, tab)
    if isinstance(bench, str):
        out.para(f"Not compared: {bench}.")
        return []
    theirs = {int(column): pub.ranked(column) for column in pub.cells}
    rows = _rows(theirs, bench, _absent(bench, kept, found))
    out.table(rows, HEADINGS)
    both = [r for r in rows if TAU in r]  # an epoch both sides have (and the "last" row: left out)
    return [
        since.Agreement(tab.name, tab.items, "epoch", r[HEADINGS[0]], r[TAU])
        for r in both
        if not r[HEADINGS[0]].startswith("last")
    ]


Epochs = dict[int, dict[str, list[float]]]


def _bench(cells: Sequence[measured.Cell], tab: Table) -> Epochs | str:
    """Bench's figures per epoch and item (one a seed), or why there are none to compare."""
    every = Claim(tab.name, "order", "", "", tab.line, items=tab.items, metric="val_accuracy", at="every")
    g = measured.grid(accuracy.pooled(cells), (), tab.items, None)
    if g.problem:
        return g.problem
    found: Epochs = {}
    for (_, item, _), cell in g.cells.items():
        for epoch, values in accuracy.per_epoch(cell, every).items():
            if epoch is not None:
                found.setdefault(epoch, {})[item] = values
    return found


def _absent(bench: Epochs, kept: Sequence[measured.Cell], found: measured.Measured) -> str:
    """Why an epoch has no figure of bench's, from the most basic cause on."""
    if bench:
        return f"not run here: bench's runs end at epoch {max(bench)}"
    if not found.sweeps:
        return "not run here: no runs in the database yet"
    if not kept:
        missing = f" (not run yet: {', '.join(found.missing)})" if found.missing else ""
        return f"not run here: no runs of it in the study's sweeps{missing}"
    return "not run here: no validation accuracy recorded"


def _rows(theirs: dict[int, dict[str, float]], bench: Epochs, absent: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for epoch in sorted(set(theirs) | set(bench)):
        rows.append(_row(str(epoch), theirs.get(epoch), bench.get(epoch), absent))
    if theirs and bench and max(theirs) != max(bench):
        label = f"last (published {max(theirs)}, bench {max(bench)})"
        rows.append(_row(label, theirs[max(theirs)], bench[max(bench)], absent))
    return rows


def _row(
    label: str, ranked: dict[str, float] | None, runs: dict[str, list[float]] | None, absent: str
) -> dict[str, Any]:
    row: dict[str, Any] = {
        HEADINGS[0]: label,
        HEADINGS[1]: DASH,
        HEADINGS[2]: absent if runs is None else DASH,
    }
    row.update({HEADINGS[3]: "0", HEADINGS[4]: DASH})
    if ranked:  # published, each as a time: the lowest first
        row[HEADINGS[1]] = ", ".join(sorted(ranked, key=ranked.__getitem__))
    if not runs:
        return row
    try:
        if any(not v > 0 for values in runs.values() for v in values):  # NaN included
            raise StatsError("an accuracy of 0 or less cannot be ranked as a ratio")
        # The highest accuracy first: tie groups rank the lowest figure first, so each is inverted.
        groups = ranking.tie_groups({k: [1 / v for v in values] for k, values in runs.items()})
    except StatsError as exc:  # an accuracy of 0, or a stored figure unfit for statistics
        row[HEADINGS[2]] = f"{DASH} ({exc})"
        return row
    row[HEADINGS[2]] = " → ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in groups)
    row[HEADINGS[3]] = ", ".join(f"{k} {len(runs[k])}" for g in groups for k in g)
    if ranked:
        row[HEADINGS[4]], row[TAU] = since.tau_b(ranking.ranks(groups), ranked)
    return row

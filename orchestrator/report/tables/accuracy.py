"""`bench report --table accuracy`: validation accuracy at epochs 5, 10, … against optimizer and
learning rate, one row per configuration, median over repeats and runs (min–max).

Where a configuration ran several times (`runs: N`), a cell is the median over its runs of each
run's value (the median over its repeats) with the 95 % bootstrap interval over runs and n
(stats/bootstrap.py, the same method as the timing tables'): `0.912 [0.905–0.921] n=5`. A table of
single runs reads as before.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from orchestrator.report.query import execution
from orchestrator.report.query.select import GROUP_KEYS, Selection, latest_ids, run_machine, sort_key, spread
from orchestrator.report.tables.base import (
    Table,
    key_columns,
    keys_of,
    load,
    new_table,
    record_of,
    sorting,
    with_range,
)
from orchestrator.stats import bootstrap
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column

ACCURACY_STEP = 5  # the research reads validation accuracy at epochs 5, 10, ...


def fraction(value: float) -> str:
    """Accuracy as the results table shows it: three decimals."""
    return f"{value:.3f}"


def accuracy_epochs(last: int, step: int = ACCURACY_STEP) -> list[int]:
    """Epochs 5, 10, … and the last one; every epoch when there are fewer than `step`."""
    step = step if last >= step else 1
    return [e for e in range(1, last + 1) if e % step == 0 or e == last]


def accuracy(db: Database, sel: Selection) -> Table:
    """One row per configuration; a column per epoch read, median over repeats and runs (min–max)."""
    rows, machines, notes = load(sel, db)
    title = "validation accuracy (fraction 0–1) after the epoch: median over repeats and runs (min–max)"
    table = new_table("accuracy", title, sel, machines, notes)
    keys = keys_of(rows, ("framework", "optimizer", "lr"), ())
    rows.sort(key=lambda r: sort_key(r, sorting(keys)))
    epochs = accuracy_epochs(max((r["epochs"] for r in rows), default=0))
    values = _accuracies(db, sel, epochs)
    for r in rows:
        found = values.get((r["fingerprint"], r["config_hash"], r["ran_mode"], r["ran_precision"]), {})
        r["accuracy"] = {e: _cell(found.get(e, {})) for e in epochs}
        for e in epochs:
            r[f"val_accuracy_epoch_{e}"] = r["accuracy"][e][0]
    table.rows = rows
    table.columns = [*key_columns(keys), Column("outcome", "outcome", lambda r: r["outcome"])]
    table.columns += [_accuracy_column(e) for e in epochs]
    table.record_keys = [*keys, "epoch", "outcome", *ACCURACY_KEYS, "config_hash"]
    # One record per configuration and epoch it trained for (an epoch past its last is not a value).
    table.records = [
        {**record_of(r, keys), "epoch": e, "outcome": r["outcome"], "config_hash": r["config_hash"]}
        | dict(zip(ACCURACY_KEYS, r["accuracy"][e], strict=True))
        for r in rows
        for e in epochs
        if e <= r["epochs"]
    ]
    return table


ACCURACY_KEYS = [
    "val_accuracy_median",
    "val_accuracy_min",
    "val_accuracy_max",
    "values",
    "n",
    "val_accuracy_low",
    "val_accuracy_high",
]


def _cell(by_run: dict[int, list[float]]) -> tuple[Any, ...]:
    """(median, min, max, values, n runs, interval low, high) of one epoch's accuracies. The
    median is over runs of each run's median over its repeats (one run: over its repeats, as
    always); min–max over every value; the interval only where two or more runs have a value."""
    values = [v for run in by_run.values() for v in run]
    if len(by_run) < 2:
        return (*spread(values), len(values), len(by_run), None, None)
    estimate = bootstrap.cell_estimate(list(by_run.values()), positive=False)
    _, low, high = spread(values)
    return (estimate.centre, low, high, len(values), len(by_run), estimate.low, estimate.high)


def _accuracy_column(epoch: int) -> Column:
    def cell(r: dict[str, Any]) -> str:
        median, low, high, _, n, interval_low, interval_high = r["accuracy"][epoch]
        if interval_low is None or interval_high is None:
            return with_range(median, low, high, text=fraction)
        return f"{fraction(median)} [{fraction(interval_low)}–{fraction(interval_high)}] n={n}"

    return Column(f"epoch {epoch} val acc", f"val_accuracy_epoch_{epoch}", cell)


def _accuracies(
    db: Database, sel: Selection, epochs: list[int]
) -> dict[tuple[str, str, str, str], dict[int, dict[int, list[float]]]]:
    """Validation accuracy of ok runs at the epochs asked for, every repeat, by machine, config and
    what ran (the summaries' groups: select.GROUP_KEYS), then epoch, then run. A disturbed run's
    accuracy is kept: other load slows a run, it does not change what it learns."""
    e, r, s = db.epochs, db.runs, db.sweeps
    ran = (execution.ran_mode(db).label("ran_mode"), execution.ran_precision(db).label("ran_precision"))
    query = (
        sa.select(
            run_machine(db).label("machine"), r.c.config_hash, *ran, r.c.id, e.c.epoch, e.c.val_accuracy
        )
        .join(r, r.c.id == e.c.run_id)
        .join(s, s.c.id == r.c.sweep_id)
        .where(r.c.id.in_(latest_ids(db, sel)), r.c.outcome == "ok", e.c.epoch.in_(epochs))
        .where(e.c.val_accuracy.is_not(None), sa.or_(e.c.extra.is_(None), e.c.extra == 0))
    )
    found: dict[tuple[str, str, str, str], dict[int, dict[int, list[float]]]] = {}
    for row in db.rows(query):
        by_epoch = found.setdefault(tuple(row[k] for k in GROUP_KEYS), {}).setdefault(row["epoch"], {})
        by_epoch.setdefault(row["id"], []).append(row["val_accuracy"])
    return found

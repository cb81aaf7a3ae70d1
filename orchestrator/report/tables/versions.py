"""`bench report --table versions`: each configuration's figure per framework release, and the
releases at which it changed beyond the noise (issue 43). See docs/reports.md.

One row per configuration and release (query/versions.py: the release each run recorded, ordered by
PEP 440). A cell is the median ms per image over its runs with the 95 % interval and n, as every
table's. Between consecutive releases of a configuration (those with at least two ok runs; a
release between them with fewer is passed over, and said so), a change is called by the rule tie
groups use (stats/ranking.py): the two-sided Mann–Whitney test on the runs, its p-value corrected
by Holm over the configuration's steps, below 5 %, and the 95 % bootstrap interval of the ratio
(this release over the one before) excluding 1. Both, because the exact test alone and the
interval alone each split same-speed releases at their own rates; a change is claimed only where
neither can be read as noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import NOT_IDENTITY
from orchestrator.report.query.select import (
    DISTURBANCE_KEYS,
    Selection,
    disturbed_mark,
    machine_labels,
    machine_note,
    node_machine_label,
    sort_key,
)
from orchestrator.report.query.versions import (
    VERSION_SETTING,
    by_configuration,
    release_summaries,
    release_text,
)
from orchestrator.report.tables.base import (
    INTERVAL_KEYS,
    Table,
    interval_columns,
    key_columns,
    keys_of,
    label_execution,
    new_table,
    outcome_text,
    record_of,
    sample_columns,
    sorting,
    throughput,
    with_range,
)
from orchestrator.stats import comparison as stats
from orchestrator.stats import mannwhitney
from orchestrator.stats.planning import ALPHA
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column

Row = dict[str, Any]
TITLE = (
    "framework releases: the median ms per image over runs (min–max over epochs) per release, in "
    "version order; change: this release against the one before, ms per image (above ×1: slower)"
)
RULE = (
    "changed: between consecutive releases with at least two ok runs each, the two-sided "
    "Mann-Whitney test on the runs' times per image, Holm-corrected over the configuration's "
    "steps, below 5 %, and the 95 % bootstrap interval of the ratio excluding 1 (the rule tie "
    "groups use); the ratio is this release's median over the one before's"
)
ONE_RELEASE = "one release only"
FIRST = "first release"


def versions(db: Database, sel: Selection) -> Table:
    cells = release_summaries(db, sel)
    labels = machine_labels(sel.sweeps)
    for cell in cells:  # a Ray sweep's nodes of another kind than the driver's machine
        labels.setdefault(cell["machine"], node_machine_label(cell["machine"]))
    order = {fp: i for i, fp in enumerate(labels)}  # machines in the order of their first sweep
    for cell in cells:
        cell["fingerprint"] = cell["machine"]
        cell["machine"] = labels[cell["machine"]]
        cell["machine_order"] = order[cell["fingerprint"]]
        label_execution(cell)
        throughput(cell)
        cell["release"] = release_text(cell["framework_version"])
    used = {fp: label for fp, label in labels.items() if any(c["fingerprint"] == fp for c in cells)}
    note = machine_note(used)
    table = new_table("versions", TITLE, sel, used, [note] if note else [])
    keys = keys_of(cells, ("framework", "model", "device"), (VERSION_SETTING, *NOT_IDENTITY))
    groups = by_configuration(cells)
    groups.sort(key=lambda g: sort_key(g[0], sorting(keys)))
    changes = [_steps(g) for g in groups]
    table.rows = [cell for g in groups for cell in g]
    table.columns = key_columns(keys) + [
        Column("release", "release", lambda r: r["release"]),
        Column("outcome", "outcome", outcome_text),
        Column("ms/image (median, min–max)", "seconds_per_image_median", _ms_cell),
        *interval_columns(table.rows),
        Column("change", "change", lambda r: r["change"]),
        Column("runs", "runs"),
        *sample_columns(),
    ]
    table.record_keys = [*keys, "framework_version", *RECORD_KEYS, *INTERVAL_KEYS, *samples.SAMPLE_KEYS]
    table.record_keys += [*DISTURBANCE_KEYS, "config_hash"]
    table.records = [record_of(r, table.record_keys) for r in table.rows]
    table.notes += _notes(groups, changes, keys)
    table.notes += samples.mark_notes(table.rows)
    return table


RECORD_KEYS = [
    "outcome",
    "runs",
    "ok_runs",
    "seconds_per_image_median",
    "seconds_per_image_min",
    "seconds_per_image_max",
    "releases",
    "previous_version",
    "change",
    "changed",
    "change_ratio",
    "change_low",
    "change_high",
    "p_value",
    "adjusted_p",
]


def _measured(cell: Row) -> bool:
    return len(cell.get("run_figures") or ()) >= 2


def _steps(group: list[Row]) -> list[Row]:
    """Each release's change from the measured release before it, the configuration's p-values
    corrected together; the cells at which it changed."""
    for cell in group:
        cell.update(releases=len(group), previous_version=None, changed=None, change=FIRST)
        cell.update(change_ratio=None, change_low=None, change_high=None, p_value=None, adjusted_p=None)
    if len(group) == 1:
        group[0]["change"] = ONE_RELEASE
        return []
    # An unrecorded release has no place in the order: its runs are shown, never a step's side.
    measured = [c for c in group if _measured(c) and c["framework_version"] is not None]
    for cell in group[1:]:
        if cell["framework_version"] is None:
            cell["change"] = "release not recorded: no verdict"
        elif not _measured(cell):
            cell["change"] = "fewer than 2 ok runs: no verdict"
        else:  # until a step below says otherwise: the first release measured enough
            cell["change"] = "no earlier release with 2 ok runs"
    place = {id(c): i for i, c in enumerate(group)}
    steps = list(zip(measured, measured[1:], strict=False))
    found = stats.compare_table([(a["run_figures"], b["run_figures"]) for a, b in steps], correction="holm")
    for (before, cell), c in zip(steps, found, strict=True):
        changed = c.adjusted_p < ALPHA and c.ratio.excludes_one()
        cell.update(previous_version=before["framework_version"], changed=changed, p_value=c.p_value)
        cell.update(change_ratio=c.ratio.centre, change_low=c.ratio.low, change_high=c.ratio.high)
        cell["adjusted_p"] = c.adjusted_p
        size = _ratio_text(cell)
        if changed:
            cell["change"] = f"{'slower' if c.ratio.centre > 1 else 'faster'} {size}"
        elif c.ratio.excludes_one() and _floor(before, cell, len(steps)) >= ALPHA:
            # the runs lie apart, but at these n no p-value can fall below ALPHA: "within the noise"
            # would claim what the test could never have refused
            cell["change"] = f"not shown at n={c.n}: the test cannot reach {ALPHA:.0%} there {size}"
        else:
            cell["change"] = f"within the noise {size} (n={c.n})"
        if place[id(cell)] - place[id(before)] > 1:  # a release between them had too few runs
            cell["change"] += f", against {release_text(before['framework_version'])}"
    return [cell for (_, cell) in steps if cell["changed"]]


def _floor(before: Row, cell: Row, steps: int) -> float:
    """The smallest p-value the exact test can give for this step after Holm over `steps`."""
    m, n = len(before["run_figures"]), len(cell["run_figures"])
    return min(1.0, mannwhitney.smallest_p(m, n) * steps)


def _ratio_text(cell: Row) -> str:
    text = f"×{cell['change_ratio']:.2f}"
    if cell["change_low"] is None or cell["change_high"] is None:
        return text
    return f"{text} [{cell['change_low']:.2f}–{cell['change_high']:.2f}]"


def _ms_cell(r: Row) -> str:
    spi = ("seconds_per_image_median", "seconds_per_image_min", "seconds_per_image_max")
    median, low, high = (r.get(k) for k in spi)
    if not r.get("ok_runs") or median is None:
        return "—"
    return with_range(median, low, high, scale=1000) + disturbed_mark(r)


def _name(cell: Row, keys: Sequence[str]) -> str:
    return " ".join(str(cell.get(k)) for k in keys if cell.get(k) is not None)


def _notes(groups: list[list[Row]], changes: list[list[Row]], keys: Sequence[str]) -> list[str]:
    notes = []
    several = [g for g in groups if len(g) > 1]
    if several:
        notes.append(RULE)
    for changed in changes:
        for cell in changed:
            before = release_text(cell["previous_version"])
            way = "slower" if cell["change_ratio"] > 1 else "faster"
            where = f"{_name(cell, keys)} at {cell['release']} (from {before})"
            notes.append(f"changed: {where}: {way} {_ratio_text(cell)}")
    single = len(groups) - len(several)
    if single:
        notes.append(
            f"{single} configurations ran one release only: nothing to compare "
            "(--sweep all reads every sweep; a version axis runs several releases in one)"
        )
    if any(c["framework_version"] is None for g in groups for c in g):
        notes.append(
            "unrecorded: runs with no recorded framework version (they ended before the worker "
            "reported its environment)"
        )
    return notes

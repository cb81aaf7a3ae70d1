"""`bench report --compare version:A version:B`: two releases of a framework side by side, as two
sweeps are (tables/compare.py's table, verdicts and notes), issue 43.

A side is the runs that recorded that framework version (environments.framework_version), in the
sweeps read (--sweep; all of them by default, since a release's runs are wherever they were made)
and filtered by --where. A configuration is matched to its pair by its settings less the version
setting, its machine and what it ran (query/versions.config_key): never across machines, since a
release's difference must not be a machine's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.config.values import cut
from orchestrator.errors import BenchError
from orchestrator.report.query.select import Selection, machine_labels, machine_note, node_machine_label
from orchestrator.report.query.versions import (
    VERSION_SETTING,
    Release,
    release_key,
    release_summaries,
    split_sides,
)
from orchestrator.report.tables.base import Table
from orchestrator.report.tables.compare import side_by_side
from orchestrator.storage.db import Database

RECORDED_SHOWN = 10  # releases named in the message that refuses a release no run recorded


def compare_versions(db: Database, sel: Selection, a: Release, b: Release) -> Table:
    cells = release_summaries(db, sel)
    _missing(cells, (a, b))
    labels = machine_labels(sel.sweeps)
    for cell in cells:
        labels.setdefault(cell["machine"], node_machine_label(cell["machine"]))
        cell["fingerprint"], cell["machine"] = cell["machine"], labels[cell["machine"]]
    a_side, b_side = split_sides(cells, a, b)
    used = {c["fingerprint"]: c["machine"] for c in (*a_side.values(), *b_side.values())}
    frameworks = sorted({str(c["framework"]) for c in (*a_side.values(), *b_side.values())})
    title = (
        f"{'/'.join(frameworks)} {cut(a.version)} (A) against {cut(b.version)} (B), the releases the runs "
        "recorded: ratios are B/A, above 1 means B took longer"
    )
    lead = ["machine"] if len(used) > 1 else []
    table = side_by_side(a_side, b_side, title, lead=lead, skip=(VERSION_SETTING,))
    table.sweeps = sel.sweeps
    table.machines = {label: fp for fp, label in used.items()}
    note = machine_note(used)
    if note:  # pairs never cross machines; the note says which is which
        table.notes.insert(0, note)
    return table


def _missing(cells: Sequence[dict[str, Any]], sides: tuple[Release, Release]) -> None:
    """Refuse, in one line, a release that no selected run recorded, naming those that were."""
    recorded = {c["framework_version"] for c in cells if isinstance(c["framework_version"], str)}
    for side in sides:
        if side.version not in recorded:
            known = sorted(recorded, key=release_key)
            shown = ", ".join(cut(v, 40) for v in known[:RECORDED_SHOWN])
            more = f" and {len(known) - RECORDED_SHOWN} more" if len(known) > RECORDED_SHOWN else ""
            listed = f"recorded: {shown}{more}" if known else "none recorded a version"
            raise BenchError(f"--compare {cut(str(side))}: no run read recorded that version ({listed})")

"""The `ratios:` section of a study.yaml: the scaling ratios a study shows (791 → 6003 photos, batch
250 → 5000), each refused in one line naming the file, the line and the key, as loader.py refuses
the rest of the file.

loader.py hands over its reader and its checks of a setting's name and value (Checks), so a ratio's
settings are held to the same rules as a claim's: a setting bench knows, a value the study's
matrices run. The published levels are checked against the table's CSV here, at load: a ratio
whose levels the table does not hold would otherwise fail only when a report is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from yaml.nodes import Node

from orchestrator.config import matrix as matrix_loader
from orchestrator.config.values import cut, shown
from orchestrator.errors import ConfigError
from orchestrator.studies import published
from orchestrator.studies.spec import REFERENCES, ScalingRatio, StudyMatrix, Table

KEYS = ("name", "table", "axis", "from", "to", "measured", "where", "reference", "why")
MAX_RATIOS = 1000


@dataclass(frozen=True)
class Checks:
    """loader.py's checks, bound to the study being loaded."""

    name: Callable[[Node, str], str]
    setting: Callable[[Node, str], str]
    where: Callable[[Node | None, str, tuple[StudyMatrix, ...]], tuple[tuple[str, Any], ...]]


def load(
    read: matrix_loader.Reader,
    node: Node | None,
    tables: Sequence[Table],
    matrices: tuple[StudyMatrix, ...],
    checks: Checks,
) -> tuple[ScalingRatio, ...]:
    if node is None:
        return ()
    entries = read.sequence(node, "ratios", "a list")
    if len(entries) > MAX_RATIOS:
        raise read.node_error(node, "ratios", f"{len(entries)} entries (at most {MAX_RATIOS})")
    by_name = {t.name: t for t in tables}
    found = [_ratio(read, entry, by_name, matrices, checks) for entry in entries]
    seen: dict[str, int] = {}
    for r in found:
        if r.name in seen:
            raise read.error(r.line, "ratios", f"{r.name}: given twice (first on line {seen[r.name]})")
        seen[r.name] = r.line
    return tuple(found)


def _ratio(
    read: matrix_loader.Reader,
    node: Node,
    tables: dict[str, Table],
    matrices: tuple[StudyMatrix, ...],
    checks: Checks,
) -> ScalingRatio:
    keys = read.mapping(node, "ratios", KEYS)
    line = node.start_mark.line + 1
    for needed in ("name", "table", "axis", "from", "to"):
        if needed not in keys:
            raise read.error(line, "ratios", f"each ratio needs {needed}")
    sides = [k for k in ("measured", "reference") if k in keys]
    if len(sides) != 1:
        raise read.error(line, "ratios", "a ratio gives one of measured or reference (bench's side)")
    name = read.text(keys["table"], "table", allow_empty=False)
    if name not in tables:
        known = cut(", ".join(tables) or "none", 200)
        raise read.node_error(keys["table"], "table", f"{shown(name)}: no such published table ({known})")
    ratio = ScalingRatio(
        name=checks.name(keys["name"], "name"),
        table=tables[name],
        axis=read.text(keys["axis"], "axis", allow_empty=False),
        low=_level(read, keys["from"], "from"),
        high=_level(read, keys["to"], "to"),
        why=read.text(keys.get("why"), "why"),
        line=line,
    )
    if ratio.low == ratio.high:
        raise read.node_error(keys["to"], "to", f"{ratio.low}: the same level as from")
    if "reference" in keys:
        ratio = _reference(read, keys, ratio)
    else:
        ratio = replace(
            ratio,
            measured=checks.setting(keys["measured"], "measured"),
            where=checks.where(keys.get("where"), "where", matrices),
        )
        _same_role(read, keys["measured"], ratio)
    _levels_published(read, keys, ratio)
    return ratio


def _same_role(read: matrix_loader.Reader, node: Node, ratio: ScalingRatio) -> None:
    """Bench's rows must be the published rows: where the axis is one of the table's dimensions
    (batch_size as msu's items) bench varies that same setting; otherwise a setting of neither."""
    t = ratio.table
    roles = (t.items, t.columns)
    if ratio.axis in roles and ratio.measured != ratio.axis:
        raise read.node_error(
            node, "measured", f"{ratio.measured}: the axis is the table's {ratio.axis}: vary it"
        )
    if ratio.axis not in roles and ratio.measured in roles:
        message = f"{ratio.measured}: the table's rows are per {ratio.measured}: vary another setting"
        raise read.node_error(node, "measured", message)
    pinned = [k for k, _ in (*t.measured, *ratio.where)]
    if ratio.measured in pinned:
        message = (
            f"{ratio.measured} is pinned (the table's measured or the ratio's where): bench cannot vary it"
        )
        raise read.node_error(node, "measured", message)


def _level(read: matrix_loader.Reader, node: Node, key: str) -> str:
    """A level as the CSV writes it: 791, 250, k80 (a YAML number is compared as its text)."""
    value = read.scalar(node, key)
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not str(value).strip():
        raise read.node_error(
            node, key, f"{shown(value)}: expected a level of the axis, as the CSV writes it"
        )
    return f"{value:g}" if isinstance(value, float) else str(value)


def _reference(read: matrix_loader.Reader, keys: dict[str, Node], ratio: ScalingRatio) -> ScalingRatio:
    node = keys["reference"]
    text = read.text(node, "reference", allow_empty=False)
    if text not in REFERENCES:
        raise read.node_error(node, "reference", f"{shown(text)}: expected one of {', '.join(REFERENCES)}")
    if "where" in keys:
        raise read.node_error(keys["where"], "where", "a reference ratio measures nothing to pin")
    try:
        low, high = float(ratio.low), float(ratio.high)
    except ValueError:
        low = high = 0.0
    if not (low > 0 and high > 0):
        message = f"{ratio.low} → {ratio.high}: linear scaling needs two positive numbers"
        raise read.node_error(node, "reference", message)
    if not ratio.why.strip():
        message = "say why bench's figure cannot change with the axis (why:)"
        raise read.node_error(node, "reference", message)
    return replace(ratio, reference=text)


def _levels_published(read: matrix_loader.Reader, keys: dict[str, Node], ratio: ScalingRatio) -> None:
    """Both levels must be in the table's CSV (a typo'd level would show an empty row forever)."""
    try:
        low, high = levels(ratio)
    except ConfigError as exc:
        raise read.node_error(keys["axis"], "axis", str(exc)) from None
    for level, which in ((low, "from"), (high, "to")):
        if not level.cells:
            message = f"{ratio.axis} {cut(ratio.low if which == 'from' else ratio.high)}: no row of the table"
            raise read.node_error(keys[which], which, f"{message} {ratio.table.name} holds it")


def levels(ratio: ScalingRatio) -> tuple[published.Published, published.Published]:
    """The table's figures at each of the two levels, keyed as published.Published keys them (the
    axis's own dimension then holds one level only)."""
    t = ratio.table
    pinned = tuple((k, v) for k, v in t.where if k != ratio.axis)
    if ratio.axis in (t.items, t.columns):
        whole = published.read_table(replace(t, where=pinned))
        return _only(whole, ratio, ratio.low), _only(whole, ratio, ratio.high)
    found = []
    for level in (ratio.low, ratio.high):
        try:
            found.append(published.read_table(replace(t, where=(*pinned, (ratio.axis, level)))))
        except ConfigError as exc:
            if "no row matches" not in str(exc):
                raise
            found.append(published.Published(t))
    return found[0], found[1]


def _only(whole: published.Published, ratio: ScalingRatio, level: str) -> published.Published:
    t = ratio.table
    kept = published.Published(t, lacking=dict(whole.lacking))
    for column, cells in whole.cells.items():
        for item, cell in cells.items():
            if (item if ratio.axis == t.items else column) == level:
                kept.cells.setdefault(column, {})[item] = cell
    return kept

"""Accuracy claims: each run's learning curve read as one figure, so that the claims' statistics over
runs (claims.py: Mann–Whitney, the bootstrap, Holm) judge an accuracy as they judge a time.

A claim names `metric: val_accuracy` with `epoch: N` (the validation accuracy after epoch N),
`at: last` (after the run's last epoch) or `at: every` (each epoch its own column, so that the
claim holds only where it holds at every epoch, all of them corrected together); or
`metric: epochs_to_final`, the epochs a run takes to reach `fraction` (0.95 by default) of its own
final accuracy, lower is better: the first epoch whose accuracy reaches it, interpolated linearly
from the epoch before (a run already there after epoch 1 counts 1: nothing is measured before it).

Seeds, not repeated processes, make accuracies independent: two runs of one seed replay the same
data order and initial weights. So a study runs one configuration per seed (`seed` an axis), the
configurations that differ only in their seed are read as one cell, and each seed is one figure
(the median over its runs, where a seed ran more than once). A seed found twice is not pooled: the
grid then says which sweeps hold it, as for any cell.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from yaml.nodes import Node

from orchestrator.config import matrix as matrix_loader
from orchestrator.config.values import shown
from orchestrator.studies import measured
from orchestrator.studies.spec import AT, Claim, StudyMatrix

ACCURACY_KEYS = ("epoch", "at", "fraction")
POOLED = "pooled"  # the seed of a cell that holds several seeds' runs
MAX_EPOCH = 10_000  # the matrix's bound on `epochs`

Runs = dict[tuple[str, str, str], list[float]]


def claim_fields(
    read: matrix_loader.Reader, keys: dict[str, Node], metric: str, matrices: Sequence[StudyMatrix]
) -> dict[str, Any]:
    """The accuracy keys of a claim, checked against its metric and the study's matrices."""
    given = [k for k in ACCURACY_KEYS if k in keys]
    wanted = {"val_accuracy": ("epoch", "at"), "epochs_to_final": ("fraction",)}.get(metric, ())
    for key in given:
        if key not in wanted:
            needs = "val_accuracy" if key in ("epoch", "at") else "epochs_to_final"
            raise read.node_error(
                keys[key], key, f"only a claim of metric {needs} takes {key} (this one reads {metric})"
            )
    if metric == "val_accuracy":
        if len(given) != 1:
            line = next(iter(keys.values())).start_mark.line + 1
            raise read.error(line, "metric", "a val_accuracy claim gives one of epoch: N or at: every | last")
        if "at" in keys:
            at = read.text(keys["at"], "at", allow_empty=False)
            if at not in AT:
                raise read.node_error(keys["at"], "at", f"{shown(at)}: expected one of {', '.join(AT)}")
            return {"at": at}
        return {"epoch": _epoch(read, keys["epoch"], matrices)}
    if "fraction" in keys:
        value = read.scalar(keys["fraction"], "fraction")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise read.node_error(
                keys["fraction"], "fraction", f"{shown(value)}: expected a number, 0 < f <= 1"
            )
        return {"fraction": float(value)}
    return {}


def _epoch(read: matrix_loader.Reader, node: Node, matrices: Sequence[StudyMatrix]) -> int:
    value = read.scalar(node, "epoch")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EPOCH:
        raise read.node_error(node, "epoch", f"{shown(value)}: expected an epoch, 1 to {MAX_EPOCH}")
    most = max(c.epochs for m in matrices for c in m.matrix.configs)
    if value > most:
        raise read.node_error(
            node, "epoch", f"epoch {value}: the study's matrices train at most {most} epochs"
        )
    return value


# --- figures ---------------------------------------------------------------------------------


def figures(claim: Claim, cells: Iterable[measured.Cell], invert: bool) -> tuple[Runs, list[str], str | None]:
    """The claim's runs keyed as claims.py keys them (column, item, axis level), each figure one
    seed's; why each empty cell is empty; and a problem that leaves the claim uncheckable."""
    kept = [c for c in cells if all(measured.same(c.settings.get(k), v) for k, v in claim.where)]
    g = measured.grid(pooled(kept), (), claim.items, claim.columns, claim.axis)
    if g.problem:
        return {}, [], g.problem
    if claim.kind in ("order", "ratio"):  # only its items count, and their empty cells
        g = measured.Grid({k: c for k, c in g.cells.items() if k[1] in claim.subjects})
    runs: Runs = {}
    empty: list[str] = []
    for (column, item, level), cell in sorted(g.cells.items()):
        found = per_epoch(cell, claim)
        if not found:
            label = " ".join(k for k in (item, column if column != measured.ALL else "", level) if k)
            empty.append(f"{label}: {why_empty(cell, claim)}")
        for epoch, values in found.items():
            key = (column if epoch is None else epoch_column(column, epoch), item, level)
            runs[key] = [1 / v if invert and v > 0 else v for v in values]
    return runs, empty, None


def medians(claim: Claim, runs: Runs, inverted: bool) -> tuple[str, ...]:
    """Per column, each item's median figure over its seeds and their count: the accuracies (or
    epochs) the claim's ratios are made of, as stored."""
    by_column: dict[str, list[str]] = {}
    for (column, item, level), values in runs.items():
        figures = [1 / v if v > 0 else v for v in values] if inverted else values  # undone
        name = f"{item} {level}" if level else item
        by_column.setdefault(column, []).append(f"{name} {statistics.median(figures):.3g} (n={len(values)})")
    what = "validation accuracy"
    if claim.metric == "epochs_to_final":
        what = f"epochs to {claim.fraction:g} of the final accuracy"
    return tuple(
        f"{'' if column == measured.ALL else column + ': '}{what}, median over seeds: " + ", ".join(found)
        for column, found in sorted(by_column.items(), key=lambda kv: _natural(kv[0]))
    )


def _natural(text: str) -> tuple[str, float]:
    """Columns in their order, "epoch 2" before "epoch 10" (claims.level_key's rule for names)."""
    head, _, tail = text.rpartition(" ")
    return (head, float(tail)) if tail.isdigit() else (text, 0.0)


def epoch_column(column: str, epoch: int) -> str:
    return f"epoch {epoch}" if column == measured.ALL else f"{column}, epoch {epoch}"


def per_epoch(cell: measured.Cell, claim: Claim) -> dict[int | None, list[float]]:
    """The cell's figures, one a seed: under None, or per epoch where the claim reads every one."""
    by_seed: dict[int, list[dict[int, float]]] = {}
    for seed, curve in cell.curves.values():
        if curve:
            by_seed.setdefault(seed, []).append(curve)
    found: dict[int | None, list[float]] = {}
    for _, curves in sorted(by_seed.items(), key=lambda kv: repr(kv[0])):  # a stored seed may be text
        for epoch, value in _seed_figures(curves, claim).items():
            found.setdefault(epoch, []).append(value)
    return found


def _seed_figures(curves: list[dict[int, float]], claim: Claim) -> dict[int | None, float]:
    """One seed's figures (the median over its runs, where it ran more than once)."""
    if claim.at == "every":
        epochs = sorted({e for c in curves for e in c})
        return {e: statistics.median(c[e] for c in curves if e in c) for e in epochs}
    values = [v for v in (_figure(c, claim) for c in curves) if v is not None]
    return {None: statistics.median(values)} if values else {}


def _figure(curve: dict[int, float], claim: Claim) -> float | None:
    if claim.metric == "epochs_to_final":
        return epochs_to(curve, claim.fraction)
    if claim.at == "last":
        return curve[max(curve)]
    return curve.get(claim.epoch or 0)


def epochs_to(curve: dict[int, float], fraction: float) -> float | None:
    """The epoch at which the run first reaches `fraction` of its final accuracy, interpolated
    linearly between the evaluated epochs either side; None where the final accuracy is not positive."""
    epochs = sorted(curve)
    target = fraction * curve[epochs[-1]]
    if target <= 0:
        return None
    before: tuple[int, float] | None = None
    for epoch in epochs:
        value = curve[epoch]
        if value >= target:
            if before is None or value == before[1]:
                return float(epoch)
            start, low = before
            return start + (epoch - start) * (target - low) / (value - low)
        before = (epoch, value)
    return float(epochs[-1])  # unreachable: the last epoch reaches any fraction <= 1 of itself


def why_empty(cell: measured.Cell, claim: Claim) -> str:
    if not cell.curves:
        return cell.why_empty("val_accuracy")
    if claim.epoch is not None:
        return f"no validation accuracy recorded at epoch {claim.epoch}"
    return "no validation accuracy recorded"


def pooled(cells: Iterable[measured.Cell]) -> list[measured.Cell]:
    """The cells that differ only in their seed as one cell, its seed POOLED; a cell whose seed
    another of its group already has stays apart, so the grid reports the clash."""
    groups: dict[tuple[tuple[str, str], ...], list[measured.Cell]] = {}
    for cell in cells:
        key = tuple(sorted((k, repr(v)) for k, v in cell.settings.items() if k != "seed"))
        groups.setdefault(key, []).append(cell)
    found: list[measured.Cell] = []
    for members in groups.values():
        seeds = [c.settings.get("seed") for c in members]
        if len(members) == 1 or len(set(seeds)) < len(seeds):
            found += members
            continue
        merged = measured.Cell({**members[0].settings, "seed": POOLED})
        for cell in members:
            merged.ok += cell.ok
            merged.failed += cell.failed
            merged.disturbed += cell.disturbed
            merged.curves.update(cell.curves)
        found.append(merged)
    return found

"""`bench report --kernels` and the kernels part of `bench inspect`: where a traced run's time went.

The research's table: per framework, the time in each class of kernel or operator (gemm against
batched gemm, convolution, ...) side by side, then the GEMM kernels tile shape by tile shape, then
each framework's top names. Only runs with `trace: kernels` that ended ok have records. Runs of one
configuration in several selected sweeps are pooled (their times added); runs of different
machines are never pooled (the machine is part of the group).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.query import execution
from orchestrator.report.query.select import (
    Selection,
    latest_ids,
    machine_labels,
    run_machine,
    selection,
    sort_key,
    varying,
)
from orchestrator.storage.db import Database
from orchestrator.storage.setting_columns import setting_column
from orchestrator.text.formats import Column, number, render
from profiler import kernels as kernel_classes
from profiler.kernels import CLASSES, DATA_TYPES, TILED

TOP = 10
RUN_COLUMNS = ("id", "config_hash", "outcome", "reason", "trace_backend", "trace_status", "trace_seconds")
PERTURBED = "traced runs: their epoch times include the profiler's overhead (docs/kernels.md)"


def _runs(db: Database, sel: Selection) -> list[dict[str, Any]]:
    r, s = db.runs, db.sweeps
    fields = [setting_column(r, name).label(name) for name in FIELD_NAMES]
    query = (
        sa.select(
            run_machine(db).label("machine"),
            execution.ran_mode(db).label("ran_mode"),
            execution.ran_precision(db).label("ran_precision"),
            *fields,
            *(r.c[k] for k in RUN_COLUMNS),
        )
        .join(s, s.c.id == r.c.sweep_id)
        .where(r.c.id.in_(latest_ids(db, sel)), r.c.trace == "kernels")
        .order_by(r.c.id)
    )
    return list(db.rows(query))


def _kernels(db: Database, run_ids: Sequence[int]) -> dict[int, list[dict[str, Any]]]:
    k = db.kernels
    found: dict[int, list[dict[str, Any]]] = {i: [] for i in run_ids}
    if run_ids:
        query = sa.select(k).where(k.c.run_id.in_(list(run_ids))).order_by(k.c.run_id, k.c.seq)
        for row in db.rows(query):
            found[row["run_id"]].append(_known_class(row))
    return found


def _known_class(row: dict[str, Any]) -> dict[str, Any]:
    """A row whose stored class is not one bench knows (a database any program can write) is
    classified again from its name, as bench classified it when it recorded it."""
    if row.get("class") in CLASSES:
        return row
    cls, tile = kernel_classes.classify(str(row.get("name") or ""))
    return {**row, "class": cls, "tile": tile}


def _labels(runs: list[dict[str, Any]]) -> dict[int, str]:
    """Each run's group: one configuration on one machine (the same one in several sweeps pools),
    named by its framework and whichever settings differ among the runs. The mode and precision are
    those the run ran (execution.mode_label), named where a framework ran more than one: runs that
    ran different ones are never pooled."""
    fields = varying(runs, skip=("framework", "trace", "mode", "precision"))
    frameworks = {r["framework"] for r in runs}
    # Named only where one framework's runs ran more than one: each framework's default mode
    # differs, and the framework's name already tells those groups apart.
    ran = [
        (name, label)
        for name, label in (("mode", execution.mode_label), ("precision", execution.precision_label))
        if any(len({label(r) for r in runs if r["framework"] == f}) > 1 for f in frameworks)
    ]
    machines = machine_labels([{"machine": r["machine"], "host": r["machine"]} for r in runs])
    labels = {}
    for r in runs:
        parts = [str(r["framework"])] + [f"{name}={label(r)}" for name, label in ran]
        parts += [f"{f}={r[f]}" for f in fields]
        if len(machines) > 1:
            parts.append(machines[r["machine"]])
        labels[r["id"]] = " ".join(parts)
    return labels


def gather(db: Database, sel: Selection) -> dict[str, Any]:
    """Groups (label -> their runs and merged kernel rows) and the traced runs without records."""
    runs = sorted(_runs(db, sel), key=lambda r: sort_key(r, FIELD_NAMES))
    kernels = _kernels(db, [r["id"] for r in runs])
    labels = _labels(runs)
    groups: dict[str, dict[str, Any]] = {}
    missing = []
    for run in runs:
        if not kernels[run["id"]]:
            missing.append(run)
            continue
        group = groups.setdefault(labels[run["id"]], {"runs": [], "names": {}})
        group["runs"].append(run)
        for row in kernels[run["id"]]:
            merged = group["names"].setdefault(
                (row["name"], row["device"]), {**row, "calls": 0, "total_seconds": 0.0}
            )
            merged["calls"] += row["calls"]
            merged["total_seconds"] += row["total_seconds"]
    for group in groups.values():
        total = sum(n["total_seconds"] for n in group["names"].values())
        group["total"] = total
        group["rows"] = sorted(group["names"].values(), key=lambda n: -n["total_seconds"])
        for n in group["rows"]:
            n["share"] = n["total_seconds"] / total if total else None
    return {"groups": groups, "missing": missing}


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else number(seconds * 1000, 4)


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.1f}%"


def class_rows(groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per class: each group's time and share of its traced time."""
    rows = []
    for cls in CLASSES:
        row: dict[str, Any] = {"class": cls}
        for label, group in groups.items():
            seconds = sum(n["total_seconds"] for n in group["rows"] if n["class"] == cls)
            calls = sum(n["calls"] for n in group["rows"] if n["class"] == cls)
            row[label] = {
                "seconds": seconds,
                "calls": calls,
                "share": seconds / group["total"] if group["total"] else None,
            }
        rows.append(row)
    return rows


def tile_rows(groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """GEMM and convolution kernels by tile shape: calls and time per group (the research's table)."""
    keys = sorted({(n["class"], n["tile"]) for g in groups.values() for n in g["rows"] if n["tile"]})
    rows = []
    for cls, tile in sorted(keys, key=lambda k: (CLASSES.index(k[0]), k[1])):
        row: dict[str, Any] = {"class": cls, "tile": tile}
        for label, group in groups.items():
            hits = [n for n in group["rows"] if n["class"] == cls and n["tile"] == tile]
            row[label] = {
                "calls": sum(n["calls"] for n in hits),
                "seconds": sum(n["total_seconds"] for n in hits),
            }
        rows.append(row)
    return rows


def precision_rows(groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """GEMM and convolution time by the data type their names show (profiler.kernels.data_type):
    per group, the time and its share of the group's GEMM and convolution time. `unknown` is the
    time of names that carry no type (most CPU operator names): never guessed."""
    rows = []
    for dtype in DATA_TYPES:
        row: dict[str, Any] = {"data_type": dtype}
        for label, group in groups.items():
            products = [n for n in group["rows"] if n["class"] in TILED]
            total = sum(n["total_seconds"] for n in products)
            seconds = sum(
                n["total_seconds"] for n in products if kernel_classes.data_type(n["name"]) == dtype
            )
            row[label] = {"seconds": seconds, "share": seconds / total if total else None}
        rows.append(row)
    return rows


# --- rendering ------------------------------------------------------------------------------------


def _group_summary(groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for label, group in groups.items():
        runs = group["runs"]
        region = [r["trace_seconds"] for r in runs if r["trace_seconds"] is not None]
        rows.append(
            {
                "group": label,
                "runs": ", ".join(str(r["id"]) for r in runs),
                "backend": ", ".join(sorted({str(r["trace_backend"]) for r in runs})),
                "region_seconds": sum(region) if region else None,
                "total_seconds": group["total"],
            }
        )
    return rows


SUMMARY_COLUMNS = [
    Column("group", "group", lambda r: r["group"]),
    Column("runs", "runs", lambda r: r["runs"]),
    Column("backend", "backend", lambda r: r["backend"]),
    Column("traced region s", "region_seconds"),
    Column("kernel/operator s", "total_seconds"),
]


def _time_share(label: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: f"{_ms(row[label]['seconds'])} ({_percent(row[label]['share'])})"


def _calls_time(label: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: f"{row[label]['calls']} / {_ms(row[label]['seconds'])}"


def _class_columns(labels: Sequence[str]) -> list[Column]:
    return [Column("class", "class", lambda r: r["class"])] + [Column(k, k, _time_share(k)) for k in labels]


PRECISION_TITLE = (
    "GEMM and convolution time by the data type the kernel names show: ms (share of the group's GEMM "
    "and convolution time); unknown: names without a type, most CPU operators (docs/kernels.md)"
)


def _precision_columns(labels: Sequence[str]) -> list[Column]:
    first = Column("data type", "data_type", lambda r: r["data_type"])
    return [first] + [Column(k, k, _time_share(k)) for k in labels]


def _tile_columns(labels: Sequence[str]) -> list[Column]:
    columns = [Column("class", "class", lambda r: r["class"]), Column("tile", "tile", lambda r: r["tile"])]
    return columns + [Column(k, k, _calls_time(k)) for k in labels]


TOP_COLUMNS = [
    Column("class", "class", lambda r: r["class"]),
    Column("name", "name", lambda r: r["name"] if len(r["name"]) <= 90 else r["name"][:87] + "..."),
    Column("tile", "tile", lambda r: r["tile"] or ""),
    Column("calls", "calls"),
    Column("total ms", "total_seconds", lambda r: _ms(r["total_seconds"])),
    Column("share", "share", lambda r: _percent(r["share"])),
]


def _missing_lines(missing: list[dict[str, Any]]) -> list[str]:
    lines = []
    for run in missing:
        why = run["trace_status"] if run["outcome"] == "ok" else f"{run['outcome']}: {run['reason'] or ''}"
        lines.append(f"  run {run['id']} {run['framework']}/{run['model']}/{run['device']}: {why}".rstrip())
    return ["", "traced runs without records:", *lines] if lines else []


def text(data: dict[str, Any], fmt: str, top: int = TOP) -> str:
    groups = data["groups"]
    labels = list(groups)
    out = []
    if groups:
        out += ["traced runs", render(_group_summary(groups), SUMMARY_COLUMNS, fmt), ""]
        out += ["time by class: ms (share of the group's kernel/operator time)"]
        out += [render(class_rows(groups), _class_columns(labels), fmt)]
        out += ["", PRECISION_TITLE]
        out += [render(precision_rows(groups), _precision_columns(labels), fmt)]
        tiles = tile_rows(groups)
        if tiles:
            out += ["", "GEMM and convolution kernels by tile shape: calls / ms"]
            out += [render(tiles, _tile_columns(labels), fmt)]
        for label, group in groups.items():
            out += ["", f"{label}: top {min(top, len(group['rows']))} of {len(group['rows'])} names"]
            out += [render(group["rows"][:top], TOP_COLUMNS, fmt)]
        out += ["", f"note: {PERTURBED}"]
    else:
        out.append("no kernel records in this selection: run a configuration with `trace: kernels`")
    out += _missing_lines(data["missing"])
    return "\n".join(out)


LONG_KEYS = ("class", "tile", "name", "device", "backend", "calls", "total_seconds", "share")


def long_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per group and name, for CSV and JSON."""
    rows = []
    for label, group in data["groups"].items():
        ids = " ".join(str(r["id"]) for r in group["runs"])
        for n in group["rows"]:
            rows.append(
                {
                    "group": label,
                    "framework": group["runs"][0]["framework"],
                    "runs": ids,
                    **{k: n[k] for k in LONG_KEYS},
                }
            )
    return rows


def report(db: Database, sweeps: Sequence[str] = (), where: str | None = None, fmt: str = "table") -> str:
    data = gather(db, selection(db, sweeps, where))
    if fmt == "json":
        document = {
            "groups": _group_summary(data["groups"]),
            "classes": class_rows(data["groups"]),
            "tiles": tile_rows(data["groups"]),
            "data_types": precision_rows(data["groups"]),
            "kernels": long_rows(data),
            "without_records": data["missing"],
            "note": PERTURBED,
        }
        return json.dumps(document, indent=2, default=str)
    if fmt == "csv":
        columns = [Column(k, k) for k in ("group", "framework", "runs", *LONG_KEYS)]
        return render(long_rows(data), columns, "csv")
    return text(data, fmt)


# --- bench inspect ---------------------------------------------------------------------------------


def run_kernels(db: Database, run_id: int) -> list[dict[str, Any]]:
    k = db.kernels
    return [_known_class(r) for r in db.rows(sa.select(k).where(k.c.run_id == run_id).order_by(k.c.seq))]


def inspect_lines(run: dict[str, Any], kernels: list[dict[str, Any]], top: int = TOP) -> list[str]:
    """The trace part of `bench inspect`: backend and status, the class totals, the top names."""
    if run.get("trace") != "kernels":
        return []
    lines = ["", "kernels (trace: kernels; this run's timings are perturbed by the profiler):"]
    lines.append(
        f"  backend: {run.get('trace_backend') or '—'}, status: {run.get('trace_status') or '—'}, "
        f"traced region {number(run.get('trace_seconds'))} s, {len(kernels)} names"
    )
    if not kernels:
        return lines
    total = sum(k["total_seconds"] for k in kernels)
    by_class = {c: sum(k["total_seconds"] for k in kernels if k["class"] == c) for c in CLASSES}
    shares = ", ".join(f"{c} {_percent(s / total if total else None)}" for c, s in by_class.items() if s > 0)
    lines.append(f"  by class: {shares}")
    for k in kernels[:top]:
        tile = f" [{k['tile']}]" if k["tile"] else ""
        lines.append(
            f"  {_percent(k['share']):>6}  {_ms(k['total_seconds']):>9} ms  {k['calls']:>6} calls  "
            f"{k['class']:<13} {k['name']}{tile}"
        )
    if len(kernels) > top:
        lines.append(
            f"  ... {len(kernels) - top} more (bench report --kernels --where ..., or --format json)"
        )
    return lines

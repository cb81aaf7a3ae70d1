"""The UMONS poster's CPU ranking against bench's runs: per model, bench's frameworks in tie groups
with their intervals, each one's "× the fastest" beside the poster's, and Kendall's τ-b between
bench's tied ranks and the poster's order.

It reads a database that `bench study run umons` filled (studies/umons/cpu-ranking.yaml, each
configuration `runs` times, each run its own process) and the poster's figures (CSV: framework,
model, device, photos, value; the poster's training time at 791 and 6003 photos, the unit not
stated). Only ok runs that no disturbance flagged count, as in every verdict bench gives; the
groups, intervals and τ-b are orchestrator/stats's own (ranking.tie_groups, bootstrap.times_fastest,
ranking.kendall_tau_b), so this prints what `bench report --table comparison` ranks.

    .venv/bin/python -m benchmarks.harness.poster_ranking --db poster.db \\
        --published studies/umons/published/umons-poster.csv --photos 791 --json poster.json

A benchmark's report, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

from orchestrator.stats import bootstrap, ranking

MODELS = ("alexnet", "mobilenet_v2", "resnet50", "vgg16")


def measured(db: Path) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    """Per model, per framework: the quiet ok runs' seconds per image (the latest sweep's rows of
    each run index), and per framework how many runs were left out as disturbed or not ok."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT framework, model, outcome, seconds_per_image, disturbed FROM runs "
            "WHERE device = 'cpu' ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    cells: dict[str, dict[str, list[float]]] = {}
    left_out: dict[str, int] = {}
    for framework, model, outcome, spi, disturbed in rows:
        if outcome != "ok" or spi is None or disturbed == 1:
            why = f"{framework} {model} {outcome}" + (" disturbed" if disturbed == 1 else "")
            left_out[why] = left_out.get(why, 0) + 1
            continue
        cells.setdefault(model, {}).setdefault(framework, []).append(float(spi))
    return cells, left_out


def published(path: Path, photos: int) -> dict[str, dict[str, float]]:
    """The poster's CPU figures at `photos`, per model and framework (empty cells left out)."""
    found: dict[str, dict[str, float]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["device"] == "cpu" and int(row["photos"]) == photos and row["value"].strip():
                found.setdefault(row["model"], {})[row["framework"]] = float(row["value"])
    return found


def order_ranks(values: dict[str, float]) -> dict[str, float]:
    """Competition ranks by value, lowest first (equal values share a rank)."""
    ordered = sorted(values.values())
    return {k: float(ordered.index(v) + 1) for k, v in values.items()}


def model_result(runs: dict[str, list[float]], poster: dict[str, float]) -> dict[str, Any]:
    groups = ranking.tie_groups(runs)
    ranks = ranking.ranks(groups)
    labels = ranking.rank_labels(groups)
    times = bootstrap.times_fastest(runs)
    fastest_poster = min(poster.values()) if poster else None
    rows = []
    for framework in [k for group in groups for k in group]:
        estimate = bootstrap.cell_estimate(runs[framework])
        ratio = times[framework]
        rows.append(
            {
                "framework": framework,
                "rank": labels[framework],
                "n": estimate.n,
                "ms_per_image": estimate.centre * 1000,
                "ms_low": None if estimate.low is None else estimate.low * 1000,
                "ms_high": None if estimate.high is None else estimate.high * 1000,
                "times_fastest": ratio.centre,
                "times_low": ratio.low,
                "times_high": ratio.high,
                "poster_value": poster.get(framework),
                "poster_times_fastest": poster[framework] / fastest_poster
                if framework in poster and fastest_poster
                else None,
            }
        )
    common = sorted(set(ranks) & set(poster))
    tau = (
        ranking.kendall_tau_b(
            {k: float(ranks[k]) for k in common}, order_ranks({k: poster[k] for k in common})
        )
        if len(common) >= 2
        else None
    )
    return {
        "groups": groups,
        "rows": rows,
        "tau_b": tau,
        "frameworks_compared": common,
        "poster_order": sorted(poster, key=poster.__getitem__),
    }


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(results: dict[str, dict[str, Any]], photos: int) -> str:
    lines = [
        "| model | framework | bench rank | ms/image [95 %] | n | × fastest [95 %] "
        f"| poster ({photos} photos) | poster × fastest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, found in results.items():
        for r in found["rows"]:
            interval = f" [{_num(r['ms_low'], 0)}–{_num(r['ms_high'], 0)}]" if r["ms_low"] is not None else ""
            times = f" [{_num(r['times_low'])}–{_num(r['times_high'])}]" if r["times_low"] is not None else ""
            poster = "—" if r["poster_value"] is None else f"{r['poster_value']:g}"
            ms = _num(r["ms_per_image"], 0) + interval
            lines.append(
                f"| {model} | {r['framework']} | {r['rank']} | {ms} | {r['n']} "
                f"| {_num(r['times_fastest'])}{times} | {poster} | {_num(r['poster_times_fastest'])} |"
            )
    lines.append("")
    lines.append("| model | bench's tie groups, fastest first | poster's order | Kendall's τ-b |")
    lines.append("|---|---|---|---|")
    for model, found in results.items():
        groups = " > ".join("{" + ", ".join(g) + "}" if len(g) > 1 else g[0] for g in found["groups"])
        lines.append(f"| {model} | {groups} | {', '.join(found['poster_order'])} | {_num(found['tau_b'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--published", type=Path, default=Path("studies/umons/published/umons-poster.csv"))
    parser.add_argument("--photos", type=int, default=791, choices=[791, 6003])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    cells, left_out = measured(args.db)
    poster = published(args.published, args.photos)
    results = {m: model_result(cells[m], poster.get(m, {})) for m in MODELS if m in cells}
    print(markdown(results, args.photos))
    taus = [r["tau_b"] for r in results.values() if r["tau_b"] is not None]
    if taus:
        print(f"\nmean τ-b over {len(taus)} models: {sum(taus) / len(taus):.2f}")
    if left_out:
        print("left out: " + ", ".join(f"{k} ×{v}" for k, v in sorted(left_out.items())))
    if args.json:
        document = {"photos": args.photos, "models": results, "left_out": left_out}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""`bench report --compare A B`: the same configurations in two sweeps, side by side.

Configurations are matched by config_hash alone (every setting equal), never by a looser likeness.
Per configuration: median epoch seconds of each side with its min–max, the ratio B/A, peak RSS
of each side and its ratio, and a verdict that calls a difference only where it exceeds the noise.
Where both sides ran at least twice (`runs: N`), the verdict is on runs: the Mann–Whitney test on
the runs' figures, corrected over the table by Holm, with B/A's bootstrap interval and the smallest
difference the runs could detect (stats/comparison.py); disturbed runs are left out and counted.
Where a side ran once, the older rule on its timed epochs (`verdict` below), which cannot see how
far apart processes land, and says so (docs/reports.md). Sweeps from two machines may be
compared — that is one of the uses — and the report says so. `side_by_side` is the table of any
two sides so matched: compare_versions.py gives it two framework releases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.report.query.execution import modes_note
from orchestrator.report.query.select import (
    Selection,
    disturbed_mark,
    machine_labels,
    pick_sweeps,
    sort_key,
    summaries,
    varying,
)
from orchestrator.report.tables.base import (
    LABELS,
    Table,
    key_columns,
    label_execution,
    throughput,
    with_range,
)
from orchestrator.stats import comparison as stats
from orchestrator.storage.db import Database
from orchestrator.text.formats import Column, mib, number

# Below this many timed epochs a side, a min–max range says too little about the noise: with n
# epochs a side and no real difference, the ranges still miss each other with chance 2/C(2n, n)
# (33% at 2, 10% at 3, 3% at 4).
MIN_EPOCHS = 3
RULE = (
    "verdict: faster/slower where every timed epoch of one side beat every one of the other and the "
    "medians differ by more than the wider (max−min)/median; at least "
    f"{MIN_EPOCHS} timed epochs a side"
)
SIDE_KEYS = (
    "outcome",
    "runs",
    "timed_epochs",
    "timed_steps",
    "timed_seconds",
    "epoch_seconds_median",
    "epoch_seconds_min",
    "epoch_seconds_max",
    "seconds_per_image_median",
    "rss_peak_bytes_median",
    "disturbed",
    "other_cpu_percent_mean",
)
NO_VERDICT = "disturbed: no verdict"


def relative_spread(side: dict[str, Any]) -> float:
    return (side["epoch_seconds_max"] - side["epoch_seconds_min"]) / side["epoch_seconds_median"]


def verdict(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """faster / slower (B against A), same (within the noise), or why there is no verdict."""
    if a is None or b is None:
        return "only in A" if b is None else "only in B"
    if not a["ok_runs"] or not b["ok_runs"]:
        return f"{a['outcome']} → {b['outcome']}" if a["outcome"] != b["outcome"] else f"both {a['outcome']}"
    if a.get("disturbed") or b.get("disturbed"):  # a slower side may be the other load, not the change
        return NO_VERDICT
    if min(a["timed_epochs"], b["timed_epochs"]) < MIN_EPOCHS or not a["epoch_seconds_median"]:
        return "too few epochs"
    ratio = b["epoch_seconds_median"] / a["epoch_seconds_median"]
    apart = max(ratio, 1 / ratio) - 1 > max(relative_spread(a), relative_spread(b))
    if apart and b["epoch_seconds_min"] > a["epoch_seconds_max"]:
        return "slower"
    if apart and b["epoch_seconds_max"] < a["epoch_seconds_min"]:
        return "faster"
    return "same"


def _ratio(b: float | None, a: float | None) -> float | None:
    return b / a if a and b is not None else None


def pair(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    """One configuration's row: its settings, both sides' numbers (a_…, b_…), ratios and verdict."""
    both = a or b
    assert both is not None
    row = {
        k: both[k]
        for k in ("machine", "config_hash", "ran_mode", "ran_precision", *LABELS.values(), *FIELD_NAMES)
    }
    for side, summary in (("a", a), ("b", b)):
        row[side] = summary
        for k in SIDE_KEYS:
            row[f"{side}_{k}"] = summary[k] if summary else None
    row["epoch_ratio"] = _ratio(row["b_epoch_seconds_median"], row["a_epoch_seconds_median"])
    row["rss_ratio"] = _ratio(row["b_rss_peak_bytes_median"], row["a_rss_peak_bytes_median"])
    row["verdict"] = verdict(a, b)
    row["advice"] = _advice(a, b) if row["verdict"] == "too few epochs" else None
    return row


def _advice(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """What to change so that the next sweep can decide: from the side with fewer timed epochs."""
    name, fewer = min((("A", a), ("B", b)), key=lambda p: p[1]["timed_epochs"] if p[1] else 0)
    assert fewer is not None
    text = samples.advice(
        fewer["epochs"] * fewer["repeats"],
        fewer["timed_epochs"],
        fewer.get("timed_steps"),
        fewer.get("timed_seconds"),
        MIN_EPOCHS,
    )
    return text.replace("(now ", f"(now {name}: ", 1)


def compare(db: Database, sweep_a: int, sweep_b: int, where: dict[str, frozenset[Any]]) -> Table:
    sweeps = {s["id"]: s for s in pick_sweeps(db, [sweep_a, sweep_b])}
    # A configuration is matched by its hash and what it ran: the same settings run in another mode
    # or precision (a default that changed between the sweeps) are two rows, never one pair.
    a_side = {_match(r): r for r in summaries(db, Selection((sweeps[sweep_a],), where))}
    b_side = {_match(r): r for r in summaries(db, Selection((sweeps[sweep_b],), where))}
    title = f"sweep {sweep_a} (A) against sweep {sweep_b} (B): ratios are B/A, above 1 means B took longer"
    table = side_by_side(a_side, b_side, title)
    table.sweeps = (sweeps[sweep_a], sweeps[sweep_b])
    labels = machine_labels([sweeps[sweep_a], sweeps[sweep_b]])
    table.machines = {label: fp for fp, label in labels.items()}
    a, b = sweeps[sweep_a], sweeps[sweep_b]
    if a["machine"] != b["machine"]:  # first: every figure below compares the machines too
        table.notes.insert(
            0,
            f"note: the two sweeps ran on different machines (A on {labels[a['machine']]}, B on "
            f"{labels[b['machine']]}; the fingerprint covers the CPU model and its kernel-choosing "
            "features): the ratios compare the machines too",
        )
    return table


def side_by_side(
    a_side: dict[Any, dict[str, Any]],
    b_side: dict[Any, dict[str, Any]],
    title: str,
    lead: Sequence[str] = (),
    skip: Sequence[str] = (),
) -> Table:
    """The table of two sides' cells, each side by what matches a cell to its pair: the pairs in
    the order of the settings, a verdict each (on runs where both sides ran twice or more). `lead`:
    keys shown first (a machine label); `skip`: settings never shown as columns."""
    for summary in (*a_side.values(), *b_side.values()):
        throughput(summary)  # the images per epoch and the samples mark
        label_execution(summary)
    matches = list(a_side) + [h for h in b_side if h not in a_side]
    rows = [pair(a_side.get(h), b_side.get(h)) for h in matches]
    on_runs = _on_runs(rows)
    keys = [*lead, "framework", "model", "device"]
    keys += [label for label in LABELS.values() if len({r[label] for r in rows}) > 1]
    keys += [f for f in varying(rows, skip) if f not in keys and f not in LABELS]
    rows.sort(key=lambda r: sort_key(r, keys))
    table = Table("compare", title, rows=rows)
    table.columns = key_columns(keys) + COLUMNS + (RUNS_COLUMNS if on_runs else [])
    table.record_keys = [*keys, "config_hash", "ran_mode", "ran_precision", *RECORD_KEYS]
    table.records = [{k: r.get(k) for k in table.record_keys} for r in rows]
    table.notes = _notes(rows)
    if len(on_runs) == len(rows):  # every verdict is on runs: the epochs' rule decided none
        table.notes.remove(RULE)
    table.notes += _runs_notes(rows, on_runs)
    table.notes += modes_note([s for s in (*a_side.values(), *b_side.values())])
    return table


CORRECTION = "holm"
RUNS_RULE = (
    "verdict on runs (both sides n >= 2): two-sided Mann-Whitney test on the runs' times per image, "
    "{method}; B/A [95 % bootstrap interval]; 'could detect': the smallest difference these runs "
    "could detect (5 % level, 80 % power)"
)
ONE_RUN = (
    "{count} configurations ran once on a side: their verdict rests on the epochs of one process "
    "each, which cannot see how far apart processes land; set runs: N (N >= 4) to decide on runs"
)


def _on_runs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each pair whose sides both have two runs or more its verdict on runs, the table's
    p-values corrected together; the pairs so decided."""
    decided = [r for r in rows if _both_ok(r) and min(r["a"]["n"], r["b"]["n"]) >= 2]
    found = stats.compare_table(
        [(r["a"]["run_figures"], r["b"]["run_figures"]) for r in decided], correction=CORRECTION
    )
    for r, c in zip(decided, found, strict=True):
        r.update(
            verdict=c.verdict,
            advice=None,
            n=c.n,
            ratio_low=c.ratio.low,
            ratio_high=c.ratio.high,
            p_value=c.p_value,
            adjusted_p=c.adjusted_p,
            method=c.method,
            detectable=c.detectable,
        )
    return decided


def _both_ok(r: dict[str, Any]) -> bool:
    return bool(r["a"] and r["b"] and r["a"]["ok_runs"] and r["b"]["ok_runs"])


def _runs_notes(rows: list[dict[str, Any]], decided: list[dict[str, Any]]) -> list[str]:
    notes = []
    if decided:
        notes.append(RUNS_RULE.format(method=decided[0]["method"]))
        left_out = sum((r[s].get("disturbed_runs") or 0) for r in decided for s in ("a", "b"))
        if left_out:
            notes.append(f"{left_out} disturbed runs left out of the verdicts on runs (bench inspect RUN)")
    on_runs = {id(r) for r in decided}
    one = [r for r in rows if id(r) not in on_runs and _both_ok(r)]
    if one:
        notes.append(ONE_RUN.format(count=len(one)))
    return notes


def _interval(r: dict[str, Any]) -> str:
    if r.get("ratio_low") is None or r.get("ratio_high") is None:
        return "—"
    return f"×{r['ratio_low']:.2f}–{r['ratio_high']:.2f}"


def _detectable(r: dict[str, Any]) -> str:
    if "detectable" not in r:
        return "—"
    return "none at this n" if r["detectable"] is None else f"{r['detectable']:.1%}"


def _match(summary: dict[str, Any]) -> tuple[str, str, str]:
    return summary["config_hash"], summary["ran_mode"], summary["ran_precision"]


def _side_cell(side: str) -> Column:
    def cell(r: dict[str, Any]) -> str:
        s = r[side]
        if s is None:
            return "—"
        if not s["ok_runs"]:
            return s["outcome"]
        cell = with_range(s["epoch_seconds_median"], s["epoch_seconds_min"], s["epoch_seconds_max"])
        return cell + disturbed_mark(s)

    return Column(f"{side.upper()} epoch s (median, min–max)", f"{side}_epoch_seconds_median", cell)


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else number(seconds * 1000)


def _times(value: float | None) -> str:
    return "—" if value is None else f"×{value:.2f}"


COLUMNS = [
    _side_cell("a"),
    _side_cell("b"),
    Column("epoch B/A", "epoch_ratio", lambda r: _times(r["epoch_ratio"])),
    Column("A ms/image", "a_seconds_per_image_median", lambda r: _ms(r["a_seconds_per_image_median"])),
    Column("B ms/image", "b_seconds_per_image_median", lambda r: _ms(r["b_seconds_per_image_median"])),
    Column("A RSS peak MiB", "a_rss_peak_bytes_median", lambda r: mib(r["a_rss_peak_bytes_median"])),
    Column("B RSS peak MiB", "b_rss_peak_bytes_median", lambda r: mib(r["b_rss_peak_bytes_median"])),
    Column("RSS B/A", "rss_ratio", lambda r: _times(r["rss_ratio"])),
    Column("verdict", "verdict", lambda r: r["verdict"]),
]
RUNS_COLUMNS = [
    Column("n", "n", lambda r: r.get("n") or "1"),
    Column("ms B/A 95 %", "ratio_low", _interval),
    Column("could detect", "detectable", _detectable),
]
RECORD_KEYS = [f"{side}_{k}" for side in ("a", "b") for k in SIDE_KEYS] + [
    "epoch_ratio",
    "rss_ratio",
    "verdict",
    "advice",
    "n",
    "ratio_low",
    "ratio_high",
    "p_value",
    "adjusted_p",
    "method",
    "detectable",
]
ADVICE_NOTES = 5  # distinct pieces of advice shown under the table; the records carry every row's


def _advice_notes(rows: list[dict[str, Any]]) -> list[str]:
    """`too few epochs (2 configurations, e.g. pytorch/small_cnn/...): run with epochs: 3 or …`"""
    by_advice: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("advice"):
            by_advice.setdefault(r["advice"], []).append(r)
    notes = []
    for text, group in list(by_advice.items())[:ADVICE_NOTES]:
        first = (group[0]["a"] or group[0]["b"])["config_hash"]
        which = f"{len(group)} configurations, e.g. {first}" if len(group) > 1 else first
        notes.append(f"too few epochs ({which}): {text}")
    if len(by_advice) > ADVICE_NOTES:
        notes.append(f"… and {len(by_advice) - ADVICE_NOTES} more pieces of advice (the CSV's advice column)")
    return notes


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no configurations"
    notes = [f"{len(rows)} configurations: {summary}", RULE]
    notes += _advice_notes(rows)
    notes += _disturbed_notes(rows)
    return notes


def _disturbed_notes(rows: list[dict[str, Any]]) -> list[str]:
    """Which side of each refused pair was disturbed, by how much, and what to do about it."""
    refused = [r for r in rows if r["verdict"] == NO_VERDICT]
    if not refused:
        return []
    notes = [
        f"! {NO_VERDICT}: {len(refused)} configurations where a side's timed epochs ran beside other "
        "load past the threshold (docs/profiler.md), so a difference may be that load, not the "
        "change; re-run the disturbed side with bench run --wait-idle SECONDS --retry-disturbed N"
    ]
    for r in refused:
        sides = [_disturbed_side(side, r[side]) for side in ("a", "b") if r[side]["disturbed"]]
        notes.append(f"  {r['framework']} {r['model']} {r['config_hash'][:8]}: disturbed {', '.join(sides)}")
    return notes


def _disturbed_side(side: str, summary: dict[str, Any]) -> str:
    other = number(summary["other_cpu_percent_mean"])
    return f"{side.upper()} (run {summary['last_run']}, other load {other}% of its CPUs)"

"""How often bench's verdict on runs is wrong: A/A (nothing differs) and power (a known slowdown).

The verdict is the one `bench report --compare` gives where both sides ran several times
(orchestrator/stats/comparison.py: Mann–Whitney on the runs' times per image, Holm over a table).
Both experiments run real `bench run` sweeps, each its own process as a user runs it, and decide
from the figures the database holds.

- **power**: one sweep a trial of the fault worker with two configurations, A with `work: W` and B
  with `work: W × (1 + d)` (real CPU work each step, orchestrator/config/settings.py), `runs: n`
  each, interleaved and shuffled as bench orders runs; the share of trials whose verdict is "slower"
  is the power at n for a slowdown of about d of the step's extra work.
- **aa**: two identical sweeps a trial of a real matrix (default: PyTorch and TensorFlow small_cnn at
  a small size, `runs: n`); every configuration's sweep-2-against-sweep-1 verdict, Holm-corrected
  over the trial's table; the share of comparisons called different is the false-positive rate
  (nominal: at most 5 %).

A benchmark, not a test: it asserts nothing and exits 0 once it has measured. Other load during
each trial is read from /proc/stat and printed: a rate measured beside other load says so.

    .venv/bin/python -m benchmarks.harness.aa_power power --trials 20 --runs 6 --json power.json
    .venv/bin/python -m benchmarks.harness.aa_power aa --trials 20 --runs 5 --json aa.json
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.stats import comparison

BENCH = [sys.executable, "-c", "from orchestrator.cli.main import main; main()"]
POWER_MATRIX = """
name: power
settings: {{framework: fault, dataset_size: 160, batch_size: 8, epochs: 3, warmup_steps: 1,
           min_time: 0, min_steps: 1, runs: {runs}}}
axes:
  work: [{base}, {slow}]
"""
AA_MATRIX = """
name: aa
settings: {{model: small_cnn, image_size: 32, dataset_size: 96, batch_size: 16, epochs: 3,
           warmup_steps: 2, threads: 1, runs: {runs}}}
axes:
  framework: [{frameworks}]
"""


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of every CPU since boot (/proc/stat)."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


def sweep(matrix: str, folder: Path, db: Path) -> float:
    """One `bench run` of the matrix into db; its wall seconds."""
    path = folder / "m.yaml"
    path.write_text(matrix)
    start = time.monotonic()
    done = subprocess.run(
        [*BENCH, "run", "--matrix", str(path), "--db", str(db), "--no-calibrate"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench run failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - start


def figures(db: Path, sweep_id: int) -> dict[str, list[float]]:
    """Each configuration's quiet ok runs' seconds per image in one sweep, by its label (work or
    framework). A disturbed run is left out, as the verdict leaves it out; disturbed_runs counts them."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT framework, json_extract(fault, '$.work'), seconds_per_image, disturbed FROM runs "
            "WHERE sweep_id = ? AND outcome = 'ok' AND seconds_per_image IS NOT NULL",
            (sweep_id,),
        ).fetchall()
    finally:
        conn.close()
    cells: dict[str, list[float]] = {}
    for framework, work, spi, disturbed in rows:
        if disturbed == 1:
            DISTURBED.append((sweep_id, framework, spi))
            continue
        cells.setdefault(str(work) if framework == "fault" else framework, []).append(spi)
    return cells


DISTURBED: list[tuple[int, str, float]] = []


def other_load(before: tuple[float, float], after: tuple[float, float], own: float) -> float:
    """Cores busy beside bench during a trial: all busy time less bench's own (its children's)."""
    busy = (after[0] - before[0]) / os.sysconf("SC_CLK_TCK")
    seconds = (after[1] - before[1]) / os.sysconf("SC_CLK_TCK") / (os.cpu_count() or 1)
    return max(0.0, (busy - own) / seconds) if seconds else 0.0


def children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def power(args: argparse.Namespace) -> dict[str, Any]:
    slow = int(args.work * (1 + args.difference))
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for trial in range(1, args.trials + 1):
            before, own = cpu_busy(), children_cpu()
            db = folder / f"power-{trial}.db"
            wall = sweep(POWER_MATRIX.format(runs=args.runs, base=args.work, slow=slow), folder, db)
            cells = figures(db, 1)
            found = comparison.compare(cells[str(args.work)], cells[str(slow)])
            load = other_load(before, cpu_busy(), children_cpu() - own)
            trials.append(
                {
                    "trial": trial,
                    "verdict": found.verdict,
                    "ratio": found.ratio.centre,
                    "p": found.p_value,
                    "wall_seconds": wall,
                    "other_load_cores": load,
                }
            )
            print(
                f"trial {trial}: B/A {found.ratio.centre:.3f}, p {found.p_value:.3g}, {found.verdict}, "
                f"{wall:.0f} s, other load {load:.2f} cores",
                flush=True,
            )
    detected = sum(t["verdict"] == "slower" for t in trials)
    return {
        "experiment": "power",
        "runs": args.runs,
        "work": args.work,
        "slow_work": slow,
        "trials": trials,
        "detected": detected,
        "share": detected / len(trials),
    }


def aa(args: argparse.Namespace) -> dict[str, Any]:
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        matrix = AA_MATRIX.format(runs=args.runs, frameworks=", ".join(args.frameworks))
        for trial in range(1, args.trials + 1):
            before, own = cpu_busy(), children_cpu()
            db = folder / f"aa-{trial}.db"
            wall = sweep(matrix, folder, db) + sweep(matrix, folder, db)
            a, b = figures(db, 1), figures(db, 2)
            keys = sorted(set(a) & set(b))
            found = comparison.compare_table([(a[k], b[k]) for k in keys], correction="holm")
            load = other_load(before, cpu_busy(), children_cpu() - own)
            calls = {k: c.verdict for k, c in zip(keys, found, strict=True)}
            sizes = {k: [len(a[k]), len(b[k])] for k in keys}
            p_values = {k: c.p_value for k, c in zip(keys, found, strict=True)}
            ratios = {k: c.ratio.centre for k, c in zip(keys, found, strict=True)}
            trials.append(
                {
                    "trial": trial,
                    "verdicts": calls,
                    "p": p_values,
                    "ratio": ratios,
                    "sizes": sizes,
                    "wall_seconds": wall,
                    "other_load_cores": load,
                }
            )
            print(f"trial {trial}: {calls}, {wall:.0f} s, other load {load:.2f} cores", flush=True)
    comparisons = sum(len(t["verdicts"]) for t in trials)
    different = sum(v in ("faster", "slower") for t in trials for v in t["verdicts"].values())
    return {
        "experiment": "aa",
        "runs": args.runs,
        "frameworks": args.frameworks,
        "trials": trials,
        "comparisons": comparisons,
        "called_different": different,
        "share": different / comparisons if comparisons else None,
        "disturbed_runs_left_out": len(DISTURBED),
        "fewest_runs_a_side": min((min(v) for t in trials for v in t["sizes"].values()), default=None),
        "uncorrected_p_below_5_percent": sum(p < 0.05 for t in trials for p in t["p"].values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=["power", "aa"])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--runs", type=int, default=6, help="runs a configuration (runs: N)")
    parser.add_argument("--work", type=int, default=2_000_000, help="power: arm A's work a step")
    parser.add_argument("--difference", type=float, default=0.10, help="power: B's extra work (0.10: 10 %%)")
    parser.add_argument("--frameworks", nargs="+", default=["pytorch", "tensorflow"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    started = time.monotonic()
    result = power(args) if args.experiment == "power" else aa(args)
    result["seconds"] = time.monotonic() - started
    print(json.dumps({k: v for k, v in result.items() if k != "trials"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

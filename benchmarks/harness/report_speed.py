"""How long `bench report` takes on a database of a long study, and whether its memory follows the samples.

Builds (once, with make_big_db.py) databases of the same runs with different numbers of samples
per run, then times each report command as a fresh process, several times, alternating between
the databases: wall time, CPU time and peak RSS of the process (from wait4's rusage).

    .venv/bin/python -m benchmarks.harness.report_speed [--runs 100000 --samples 0,20,60 --repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = [sys.executable, "-c", "from orchestrator.cli.main import main; main()"]
COMMANDS = {
    "report (default table)": ["report"],
    "report --format csv": ["report", "--format", "csv"],
    "report --crashes": ["report", "--crashes"],
    "report --resources": ["report", "--resources"],
    "report --table comparison": ["report", "--table", "comparison"],
}


def timed(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (bytes) of one fresh process."""
    start = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", default="0,20,60", help="samples per run, one database each")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="keep the databases here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-report-speed-") as tmp:
        where = args.dir or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        dbs = {}
        for samples in (int(s) for s in args.samples.split(",")):
            path = where / f"runs{args.runs}-samples{samples}.db"
            if not path.exists():
                make = [
                    sys.executable,
                    "-m",
                    "benchmarks.harness.make_big_db",
                    str(path),
                    "--runs",
                    str(args.runs),
                ]
                command = [*make, "--samples", str(samples)]
                subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
            dbs[samples] = path
        print(f"{args.runs} runs; samples per run: {', '.join(map(str, dbs))}; {args.repeat} times each")
        print(f"{'command':28} {'samples/run':>11} {'wall s (median)':>15} {'CPU s':>7} {'peak RSS MiB':>12}")
        for name, command in COMMANDS.items():
            results: dict[int, list[tuple[float, float, int]]] = {s: [] for s in dbs}
            for _ in range(args.repeat):  # alternate the databases, so drift touches each alike
                for samples, path in dbs.items():
                    results[samples].append(timed([*BENCH, *command, "--db", str(path)]))
            for samples, rows in results.items():
                wall = statistics.median(r[0] for r in rows)
                cpu = statistics.median(r[1] for r in rows)
                rss = max(r[2] for r in rows) / (1 << 20)
                print(f"{name:28} {samples:>11} {wall:>15.2f} {cpu:>7.2f} {rss:>12.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

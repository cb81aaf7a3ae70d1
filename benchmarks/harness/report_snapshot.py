"""Everything `bench report` and `bench inspect` print for one database, saved to a folder, so that a
change meant to leave the reports alone (a move of modules, a refactor) can be shown to: take a
snapshot before, one after, and compare them byte for byte.

    .venv/bin/python -m benchmarks.harness.report_snapshot --db before.db --out /tmp/snap-before
    .venv/bin/python -m benchmarks.harness.report_snapshot --db before.db --out /tmp/snap-after \
        --compare /tmp/snap-before

Each command runs as a fresh process of the CLI (what a user runs), its stdout, stderr and exit
status written to one file. The HTML page is saved with its generation time blanked (the only line
that changes between two writes); its plots are compared as files.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = [sys.executable, "-c", "from orchestrator.cli.main import main; main()"]
TABLES = ("results", "comparison", "batch", "inference", "accuracy", "modes", "scaling", "resources")
FORMATS = ("table", "markdown", "csv", "json")
# "generated 2026-11-27 17:50 UTC": the page's one line that depends on when it was written
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def commands(db: Path) -> dict[str, list[str]]:
    """Each snapshot's name and the CLI arguments that print it."""
    with sqlite3.connect(db) as conn:
        runs = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id")]
        sweeps = [r[0] for r in conn.execute("SELECT id FROM sweeps ORDER BY id")]
    found: dict[str, list[str]] = {}
    for table in TABLES:
        for fmt in FORMATS:
            found[f"table-{table}-{fmt}"] = ["report", "--table", table, "--format", fmt]
        found[f"table-{table}-all"] = ["report", "--table", table, "--sweep", "all"]
    for fmt in FORMATS:
        found[f"crashes-{fmt}"] = ["report", "--crashes", "--format", fmt]
        found[f"kernels-{fmt}"] = ["report", "--kernels", "--format", fmt, "--sweep", "all"]
    found["resources-grouped"] = ["report", "--resources", "--group-by", "framework"]
    found["where"] = ["report", "--where", "framework=fault"]
    if len(sweeps) >= 2:
        pair = [str(sweeps[0]), str(sweeps[-1])]
        for fmt in FORMATS:
            found[f"compare-{fmt}"] = ["report", "--compare", *pair, "--format", fmt]
    for run in runs:
        found[f"inspect-{run}"] = ["inspect", str(run)]
        found[f"timeline-{run}"] = ["timeline", str(run), "--format", "csv"]
    found["clash"] = ["report", "--crashes", "--resources"]  # a refusal's message is output too
    return found


def snapshot(db: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, args in commands(db).items():
        done = subprocess.run([*BENCH, *args, "--db", str(db)], capture_output=True, text=True)
        (out / f"{name}.txt").write_text(f"exit {done.returncode}\n{done.stdout}\n--- stderr\n{done.stderr}")
    with tempfile.TemporaryDirectory() as tmp:
        args = [*BENCH, "report", "--html", tmp, "--sweep", "all", "--db", str(db)]
        done = subprocess.run(args, capture_output=True, text=True)
        page = Path(tmp) / "index.html"
        text = page.read_text() if page.exists() else ""
        (out / "html.txt").write_text(f"exit {done.returncode}\n{done.stderr}\n{STAMP.sub('<when>', text)}")
        plots = out / "plots"
        plots.mkdir(exist_ok=True)
        for png in sorted((Path(tmp) / "plots").glob("*.png")):
            (plots / png.name).write_bytes(png.read_bytes())


def differences(before: Path, after: Path) -> list[str]:
    """The snapshot files that are not byte-identical (or are in one folder only)."""
    found = []
    for folder in ("", "plots"):
        cmp = filecmp.dircmp(before / folder, after / folder)
        found += [f"{folder}/{n}: differs" for n in sorted(cmp.diff_files)]
        found += [f"{folder}/{n}: only before" for n in sorted(cmp.left_only) if n != "plots"]
        found += [f"{folder}/{n}: only after" for n in sorted(cmp.right_only) if n != "plots"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="an SQLite results database")
    parser.add_argument("--out", type=Path, required=True, help="the folder the snapshot is written to")
    parser.add_argument("--compare", type=Path, help="an earlier snapshot to compare this one with")
    args = parser.parse_args()
    snapshot(args.db, args.out)
    written = len(list(args.out.glob("*.txt")))
    if args.compare is None:
        print(f"{written} outputs written to {args.out}")
        return
    found = differences(args.compare, args.out)
    print("\n".join(found) or f"{written} outputs, all byte-identical to {args.compare}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()

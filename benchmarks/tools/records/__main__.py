"""Render the records (docs/records/*.json) into their pages.

    .venv/bin/python -m benchmarks.tools.records           # write every page whose blocks differ
    .venv/bin/python -m benchmarks.tools.records --check   # write nothing; exit 1 if one differs

A figure is changed by adding a record (naming the one it supersedes) and running this, never by
editing the table in the page: the next check would fail on it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.tools.records import record, render

REPO = Path(__file__).resolve().parents[3]
COMMAND = render.COMMAND


def pages(root: Path = REPO) -> dict[str, str]:
    """Each page that shows a record, with its text as the records make it now."""
    records = record.load_folder(root / render.FOLDER)
    chains = record.chains(records)
    names = sorted({chain[0].page for chain in chains.values()})
    made = {}
    for name in names:
        path = root / name
        if not path.exists():
            raise render.MarkerError(f"{name}: a record is shown there, and there is no such page")
        made[name] = render.replaced(path.read_text(), name, chains)
    return made


def stale(root: Path = REPO) -> list[str]:
    """The pages whose text differs from what the records make."""
    return [name for name, text in pages(root).items() if (root / name).read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the records' tables into their pages.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args(argv)
    try:
        made = pages(REPO)
    except (record.RecordError, render.MarkerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    differing = [name for name, text in made.items() if (REPO / name).read_text() != text]
    if args.check:
        for name in differing:
            print(f"{name} differs from its records: run {COMMAND}")
        return 1 if differing else 0
    for name in differing:
        (REPO / name).write_text(made[name])
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write docs/reference/ from the code, and docs/matrix.md's field table with it.

    .venv/bin/python -m benchmarks.tools.reference           # write every page that differs
    .venv/bin/python -m benchmarks.tools.reference --check   # write nothing; exit 1 if one differs

One command for every generated reference, so a change to the CLI, a setting or the schema is one
regeneration, whoever merged it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
COMMAND = "python -m benchmarks.tools.reference"


def footer(source: str) -> str:
    return f"Generated from {source} by `{COMMAND}`: change the code, not this page, and run it again.\n"


def _cli() -> str:
    from benchmarks.tools.reference import cli
    from orchestrator.cli.main import cli as bench

    return cli.page(bench) + "\n" + footer("the click tree (`orchestrator/cli/`)")


def _matrix() -> str:
    from benchmarks.tools.reference import matrix

    return matrix.page() + "\n" + footer("`orchestrator/config/settings.py`")


def _schema() -> str:
    from benchmarks.tools.reference import schema

    return schema.page((REPO / "schema.sql").read_text()) + "\n" + footer("`schema.sql`")


def _matrix_table() -> str:
    from orchestrator.config import field_docs

    return field_docs.replaced((REPO / "docs" / "matrix.md").read_text())


# Each generated page, relative to the repository, and what makes it.
PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/cli.md": _cli,
    "docs/reference/matrix.md": _matrix,
    "docs/reference/schema.md": _schema,
    "docs/matrix.md": _matrix_table,
}


def stale() -> list[str]:
    """The pages whose text differs from what the code makes now."""
    found = []
    for name, make in PAGES.items():
        path = REPO / name
        if not path.exists() or path.read_text() != make():
            found.append(name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the reference pages generated from the code.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs")
    args = parser.parse_args(argv)
    differing = stale()
    if args.check:
        for name in differing:
            print(f"{name} differs from the code: run {COMMAND}")
        return 1 if differing else 0
    for name in differing:
        (REPO / name).parent.mkdir(parents=True, exist_ok=True)
        (REPO / name).write_text(PAGES[name]())
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

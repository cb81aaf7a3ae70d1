"""The maps stay true: each package's `__init__` docstring names every module and sub-package it
holds, and docs/architecture.md names every package and the project's top-level folders. A module
added without a line in its package's map fails here, not months later in a reader's hands."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("orchestrator", "profiler", "workers")
TOP_FOLDERS = (
    "orchestrator",
    "workers",
    "profiler",
    "tests",
    "docs",
    "matrices",
    "studies",
    "benchmarks",
    "envs",
)


def packages() -> list[Path]:
    found = []
    for root in ROOTS:
        inits = sorted((REPO / root).rglob("__init__.py"))
        found += [p.parent for p in inits if "__pycache__" not in p.parts]
    return found


def members(package: Path) -> list[str]:
    """What a reader of the package meets: its modules (name.py) and sub-packages (name/)."""
    names = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    names += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()]
    return sorted(names)


def named(docstring: str, member: str) -> bool:
    stem = member.removesuffix(".py").removesuffix("/")
    return re.search(rf"(?<![\w.]){re.escape(stem)}(\.py|/|\b)", docstring) is not None


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_each_package_map_names_its_modules(package: Path):
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    missing = [m for m in members(package) if not named(docstring, m)]
    assert not missing, f"{package.relative_to(REPO)}/__init__.py's docstring does not name {missing}"


def test_the_architecture_page_names_every_package_and_top_folder():
    page = (REPO / "docs" / "architecture.md").read_text()
    wanted = [f"{p.relative_to(REPO).as_posix()}/" for p in packages()] + [f"{f}/" for f in TOP_FOLDERS]
    missing = []
    for folder in wanted:
        last = folder.rstrip("/").rsplit("/", 1)[-1] + "/"
        if folder not in page and last not in page:
            missing.append(folder)
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_a_planted_module_is_found_missing(tmp_path: Path):
    (tmp_path / "__init__.py").write_text('"""pkg\n\n    known.py   what it is\n"""\n')
    (tmp_path / "known.py").write_text("")
    (tmp_path / "stray.py").write_text("")
    docstring = ast.get_docstring(ast.parse((tmp_path / "__init__.py").read_text())) or ""
    assert [m for m in members(tmp_path) if not named(docstring, m)] == ["stray.py"]

"""The orchestrator's packages import one another only downwards (docs/architecture.md).

Each package is a stage of the flow; a package may import only the packages listed for it in
`orchestrator/__init__.py`'s LAYERS, so the flow reads from the tree and stays so. The walk reads
every import statement, at the top of a module or inside a function, with `ast`: nothing is
imported, so the test is fast and cannot be fooled by an import that only runs on some path.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator import LAYERS
from orchestrator.report import GROUPS

REPO = Path(__file__).resolve().parent.parent
ROOT_MODULES = {"errors", "shipped"}  # modules at the package root, below every package


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:  # `from orchestrator import errors`, `from workers import adapters`
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level:
            yield node.lineno, "." * node.level + (node.module or "")


def _stage(parts: tuple[str, ...]) -> str:
    """The package a module belongs to: its first folder under orchestrator/, or the root module."""
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def violations(root: Path) -> list[str]:
    """Every import in `root`/orchestrator that breaks the layering, as `file:line: why`."""
    found = []
    for path in sorted((root / "orchestrator").rglob("*.py")):
        parts = path.relative_to(root / "orchestrator").parts
        here = _stage(parts)
        where = path.relative_to(root)
        for line, name in _imports(path):
            top, _, rest = name.partition(".")
            if name.startswith("."):
                found.append(f"{where}:{line}: relative import {name}: name the package")
            elif top == "click" and here != "cli":
                found.append(f"{where}:{line}: imports click; only orchestrator/cli/ may")
            elif name.startswith("workers.adapters"):
                found.append(f"{where}:{line}: imports {name}; the orchestrator never imports an adapter")
            elif top == "orchestrator" and rest:
                there = rest.split(".")[0]
                if there in ("__version__", here):
                    continue
                if there not in LAYERS and there not in ROOT_MODULES:
                    found.append(f"{where}:{line}: imports {name}: no such package in LAYERS")
                elif here in LAYERS and there not in LAYERS[here] and there not in ROOT_MODULES:
                    allowed = ", ".join(sorted(LAYERS[here])) or "no other package"
                    found.append(
                        f"{where}:{line}: {here} imports {there} ({name}); {here} may import {allowed}"
                    )
                elif here in ROOT_MODULES and there != "errors":  # errors.py is below the others
                    found.append(f"{where}:{line}: {here} is below every package and imports {name}")
    return found


def test_every_package_imports_only_the_layers_below_it():
    assert violations(REPO) == []


def private_imports(root: Path) -> list[str]:
    """Every `from orchestrator.x import _y` (or profiler's) in orchestrator/ and profiler/: a
    module's private name is its own, and one another module needs is not private."""
    found = []
    for package in ("orchestrator", "profiler"):
        for path in sorted((root / package).rglob("*.py")):
            where = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                    continue
                if node.module.split(".")[0] not in ("orchestrator", "profiler"):
                    continue
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{where}:{node.lineno}: imports {alias.name}, private to {node.module}")
    return found


def test_no_module_imports_another_modules_private_name():
    assert private_imports(REPO) == []


def test_a_private_import_is_caught(tmp_path):
    root = _copy(tmp_path)
    shutil.copytree(REPO / "profiler", root / "profiler", ignore=shutil.ignore_patterns("__pycache__"))
    for module, line in [
        ("orchestrator/sweep/run.py", "    from orchestrator.sweep.progress import _fmt"),
        ("profiler/sampler.py", "from profiler.timeline import _x as y"),
    ]:
        path = root / module
        text = path.read_text()
        path.write_text(f"{text}\n\ndef _added():\n{line}\n" if line.startswith(" ") else f"{line}\n{text}")
        found = [v for v in private_imports(root) if v.startswith(f"{module}:")]
        assert len(found) == 1 and "private to" in found[0], found


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Each module of orchestrator/ and profiler/ and the modules of theirs it imports."""
    paths = {}
    for package in ("orchestrator", "profiler"):
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            paths[name] = path
    graph = {}
    for name, path in paths.items():
        wanted = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:  # `from orchestrator.launch import outcomes`: the module
                    full = f"{node.module}.{alias.name}"
                    wanted.add(full if full in paths else node.module)
            elif isinstance(node, ast.Import):
                wanted.update(alias.name for alias in node.names)
        graph[name] = (wanted & set(paths)) - {name}
    return graph


def import_cycles(root: Path) -> list[list[str]]:
    """The modules that import one another, directly or through others (lazy imports too)."""
    graph, cycles = _module_graph(root), []
    for name in sorted(graph):
        below = _reach(graph, name)
        if name in below and not any(name in cycle for cycle in cycles):
            cycles.append(sorted(m for m in below if name in _reach(graph, m)))
    return cycles


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for there in graph[todo.pop()] - seen:
            seen.add(there)
            todo.append(there)
    return seen


def test_no_module_imports_a_module_that_imports_it():
    """Following a run from the sweep to the worker goes down the modules, never back."""
    assert import_cycles(REPO) == []


def test_an_import_cycle_is_caught(tmp_path):
    root = _copy(tmp_path)
    shutil.copytree(REPO / "profiler", root / "profiler", ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "orchestrator" / "launch" / "replicas.py"
    path.write_text(path.read_text() + "\n\ndef _added():\n    from orchestrator.launch import execute\n")
    assert import_cycles(root) == [
        ["orchestrator.launch.execute", "orchestrator.launch.lifecycle", "orchestrator.launch.replicas"]
    ]


def test_every_package_has_a_layer_and_a_map():
    packages = {p.parent.name for p in (REPO / "orchestrator").glob("*/__init__.py")}
    packages.discard("datafiles")
    assert packages == set(LAYERS)
    for name in packages:
        doc = ast.get_docstring(ast.parse((REPO / "orchestrator" / name / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()) >= 3, (
            f"orchestrator/{name}/__init__.py: its docstring is its map"
        )
    # nothing at the root but the root modules and the package's own __init__
    loose = {p.stem for p in (REPO / "orchestrator").glob("*.py")} - ROOT_MODULES - {"__init__"}
    assert not loose, f"modules outside every package: {sorted(loose)}"


def test_the_layers_have_no_cycle():
    """An order exists in which each package comes after every package it may import."""
    placed: list[str] = []
    pending = dict(LAYERS)
    while pending:
        ready = [name for name, below in pending.items() if set(below) <= set(placed)]
        assert ready, f"a cycle among {sorted(pending)}"
        placed.extend(sorted(ready))
        for name in ready:
            del pending[name]


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(
        REPO / "orchestrator", tmp_path / "orchestrator", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


@pytest.mark.parametrize(
    ("module", "line", "says"),
    [
        ("launch/execute.py", "from orchestrator.storage.db import Database", "launch imports storage"),
        ("executors/local.py", "from orchestrator.sweep import recording", "executors imports sweep"),
        ("report/tables/results.py", "from orchestrator.launch import outcomes", "report imports launch"),
        (
            "report/tables/results.py",
            "    from orchestrator.sweep.run import latest_sweep",
            "report imports sweep",
        ),
        ("config/matrix.py", "from orchestrator.cli import options", "config imports cli"),
        ("storage/db.py", "import click", "only orchestrator/cli/ may"),
        ("config/run_config.py", "from workers.adapters import pytorch", "never imports an adapter"),
        ("errors.py", "from orchestrator.text import terminal", "below every package"),
        ("sweep/run.py", "from . import progress", "relative import"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path, module, line, says):
    root = _copy(tmp_path)
    path = root / "orchestrator" / module
    text = path.read_text()
    if line.startswith("    "):  # inside a function, where a lazy import hides
        text += f"\n\ndef _added():\n{line}\n"
    else:
        text = f"{line}\n{text}"
    path.write_text(text)
    found = [v for v in violations(root) if v.startswith(f"orchestrator/{module}:")]
    assert len(found) == 1 and says in found[0], found


def _group(parts: tuple[str, ...]) -> str:
    """The group of report/ a module belongs to: its sub-package, or a root module's own name."""
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def report_violations(root: Path) -> list[str]:
    """Every import inside orchestrator/report/ that breaks report/__init__.py's GROUPS, as
    `file:line: why`: a group imports only the groups listed for it, so a reader goes from the
    entry (dispatch) down through the page and the tables to the queries, never back."""
    found = []
    base = root / "orchestrator" / "report"
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(base).parts
        if parts == ("__init__.py",):
            continue
        here, where = _group(parts), path.relative_to(root)
        if here not in GROUPS:
            found.append(f"{where}: outside every group of report/ (GROUPS)")
            continue
        for line, name in _imports(path):
            if not name.startswith("orchestrator.report."):
                continue
            there = name.split(".")[2]
            if there == here or there == "GROUPS":
                continue
            if there not in GROUPS:
                found.append(f"{where}:{line}: imports {name}: no such group in report/'s GROUPS")
            elif there not in GROUPS[here]:
                allowed = ", ".join(GROUPS[here]) or "no other group"
                found.append(f"{where}:{line}: {here} imports {there} ({name}); {here} may import {allowed}")
    return found


def test_each_group_of_report_imports_only_the_groups_below_it():
    assert report_violations(REPO) == []


def test_the_groups_of_report_have_no_cycle_and_each_is_a_folder():
    placed: list[str] = []
    pending = dict(GROUPS)
    while pending:
        ready = [name for name, below in pending.items() if set(below) <= set(placed)]
        assert ready, f"a cycle among {sorted(pending)}"
        placed.extend(sorted(ready))
        for name in ready:
            del pending[name]
    base = REPO / "orchestrator" / "report"
    folders = {p.parent.name for p in base.glob("*/__init__.py")}
    assert folders | {"dispatch"} == set(GROUPS)
    assert not any("dispatch" in below for below in GROUPS.values()), "nothing imports dispatch"


@pytest.mark.parametrize(
    ("module", "line", "says"),
    [
        ("query/select.py", "from orchestrator.report.tables.base import Table", "query imports tables"),
        ("notes/fairness.py", "    from orchestrator.report.tables import results", "notes imports tables"),
        (
            "tables/modes.py",
            "from orchestrator.report.postmortem import crashes",
            "tables imports postmortem",
        ),
        ("tables/base.py", "    from orchestrator.report.html import plots", "tables imports html"),
        ("html/page.py", "from orchestrator.report import dispatch", "html imports dispatch"),
        ("postmortem/inspect.py", "from orchestrator.report.reports import x", "no such group"),
        ("stray.py", "", "outside every group"),
    ],
)
def test_a_forbidden_import_between_report_groups_is_caught(tmp_path, module, line, says):
    root = _copy(tmp_path)
    path = root / "orchestrator" / "report" / module
    text = path.read_text() if path.exists() else ""
    if line.startswith("    "):  # inside a function, where a lazy import hides
        text += f"\n\ndef _added():\n{line}\n"
    elif line:
        text = f"{line}\n{text}"
    path.write_text(text)
    found = [v for v in report_violations(root) if v.startswith(f"orchestrator/report/{module}:")]
    assert len(found) == 1 and says in found[0], found


def profiler_violations(root: Path) -> list[str]:
    """profiler/ is both the sidecar (its own processes) and a library the orchestrator imports
    (docs/architecture.md, the top-level folders): in either role it stands below the orchestrator,
    so it imports none of it, and no adapter (a framework would enter the sampler's process)."""
    found = []
    for path in sorted((root / "profiler").rglob("*.py")):
        for line, name in _imports(path):
            top = name.partition(".")[0]
            where = path.relative_to(root)
            if top == "orchestrator" or name.startswith("workers.adapters"):
                found.append(f"{where}:{line}: imports {name}; profiler/ stands below the orchestrator")
            elif name.startswith("."):
                found.append(f"{where}:{line}: relative import {name}: name the package")
    return found


def test_profiler_imports_nothing_of_the_orchestrator():
    assert profiler_violations(REPO) == []


def test_a_profiler_import_of_the_orchestrator_is_caught(tmp_path):
    shutil.copytree(REPO / "profiler", tmp_path / "profiler", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "profiler" / "timeline.py", "a") as f:
        f.write("\nfrom orchestrator.storage.db import Database\n")
    assert profiler_violations(tmp_path) == [
        f"profiler/timeline.py:{len((tmp_path / 'profiler' / 'timeline.py').read_text().splitlines())}: "
        "imports orchestrator.storage.db.Database; profiler/ stands below the orchestrator"
    ]

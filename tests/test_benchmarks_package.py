"""benchmarks/ stays a package one runs with `python -m`: no script edits sys.path, none reads
another module's private attributes (an adapter's `_state`, a module's `_import`), the helpers
run by a framework's interpreter stay Python 3.6 code, and benchmarks/README.md names every
module in its group's table."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCHMARKS = REPO / "benchmarks"
GROUPS = ("harness", "inside", "gpu", "frameworks", "tools")
# Modules that import their framework at the top: run only by that framework's interpreter.
FRAMEWORK_AT_TOP = {"frameworks.jax_depthwise", "frameworks.mxnet_relu6", "frameworks.mxnet_relu_activation"}
OWN = {"self", "cls"}  # an object's own private attributes are its business


def modules() -> list[Path]:
    return sorted(p for p in BENCHMARKS.rglob("*.py") if "__pycache__" not in p.parts)


def scripts() -> list[Path]:
    """What a reader runs or reads: every module and shell script but the packages' __init__."""
    found = [p for p in modules() if p.name != "__init__.py"]
    return found + sorted(BENCHMARKS.rglob("*.sh"))


def dotted(path: Path) -> str:
    return path.relative_to(BENCHMARKS).with_suffix("").as_posix().replace("/", ".")


def private_reads(source: str) -> list[str]:
    """`name._attr` where name is not self or cls: another object's private attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        private = node.attr.startswith("_") and not node.attr.startswith("__")
        if private and node.value.id not in OWN:
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def path_edits(source: str) -> list[str]:
    """Any use of sys.path (an insert, an assignment to a slice, an append)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "path":
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"{node.lineno}: sys.path")
    return found


def test_every_script_sits_in_a_group():
    loose = [p.name for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh") and p.name != "__init__.py"]
    assert not loose, f"benchmarks/ holds {loose} outside its groups {GROUPS}"
    groups = sorted(p.name for p in BENCHMARKS.iterdir() if (p / "__init__.py").exists())
    assert groups == sorted(GROUPS)


@pytest.mark.parametrize("path", modules(), ids=dotted)
def test_no_benchmark_edits_sys_path_or_silences_e402(path: Path):
    source = path.read_text()
    assert not path_edits(source), f"{path.relative_to(REPO)} edits sys.path: {path_edits(source)}"
    assert "noqa: E402" not in source


@pytest.mark.parametrize("path", modules(), ids=dotted)
def test_no_benchmark_reads_another_modules_private_attributes(path: Path):
    found = private_reads(path.read_text())
    assert not found, f"{path.relative_to(REPO)} reads private attributes: {found}"


def test_a_planted_private_read_and_path_edit_are_caught():
    planted = (
        "import sys\nsys.path.insert(0, 'x')\n"
        "def on_adapter(adapter, adapter_module):\n"
        "    sg = adapter_module._import()\n"
        "    adapter._state, loss = step(adapter._state)\n"
        "    return self._own, adapter.__class__, adapter.state()\n"
    )
    assert private_reads(planted) == ["4: adapter_module._import", "5: adapter._state", "5: adapter._state"]
    assert path_edits(planted) == ["2: sys.path"]
    assert not private_reads("adapter.state()\nself._state = 1\n") and not path_edits(
        "import sys\nsys.argv\n"
    )


@pytest.mark.parametrize("path", [*sorted((BENCHMARKS / "inside").glob("*.py")), BENCHMARKS / "__init__.py"])
def test_what_a_framework_interpreter_imports_parses_as_python_3_6(path: Path):
    """Singa's interpreter is Python 3.6: it imports benchmarks/__init__.py and inside/."""
    ast.parse(path.read_text(), feature_version=(3, 6))
    imports = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ImportFrom)]
    assert not [n for n in imports if n.module == "__future__" and n.names[0].name == "annotations"]
    tops = {(n.module or "").split(".")[0] for n in imports} - {"", "benchmarks", "workers"}
    assert not tops & {"orchestrator", "profiler"}, f"{path.name} imports {tops}"


@pytest.mark.parametrize(
    "module", [dotted(p) for p in modules() if dotted(p) not in FRAMEWORK_AT_TOP], ids=str
)
def test_every_module_imports_as_part_of_the_package(module: str):
    importlib.import_module(f"benchmarks.{module}")


def test_the_readme_names_every_module_in_its_group():
    readme = (BENCHMARKS / "README.md").read_text()
    sections = dict(re.findall(r"^## (\w+)/:.*?\n(.*?)(?=^## |\Z)", readme, flags=re.M | re.S))
    assert sorted(sections) == sorted(GROUPS)
    missing = []
    for path in scripts():
        group, name = path.relative_to(BENCHMARKS).parts[0], path.stem if path.suffix == ".py" else path.name
        if f"`{name}`" not in sections[group]:
            missing.append(f"{group}/{path.name}")
    assert not missing, f"benchmarks/README.md's tables do not name {missing}"


def test_every_group_map_names_its_modules():
    for group in GROUPS:
        docstring = ast.get_docstring(ast.parse((BENCHMARKS / group / "__init__.py").read_text())) or ""
        names = [p.stem for p in (BENCHMARKS / group).glob("*.py") if p.name != "__init__.py"]
        missing = [n for n in names if not re.search(rf"(?<![\w.<]){re.escape(n)}\b", docstring)]
        assert not missing, f"benchmarks/{group}/__init__.py's docstring does not name {missing}"

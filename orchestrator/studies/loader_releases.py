"""The `releases:` key of a study.yaml: which of the study's matrices runs its frameworks at several
releases (`version` an axis) and which published table it answers, refused in one line naming the
file, the line and the key, as loader.py refuses the rest of the file.

    releases:
      matrix: cpu-releases.yaml      # one of the study's matrices:
      published: poster-cpu-791      # one of its published tables (a time table per framework)
      columns: model                 # optional: the table's own columns, said again
      note: the poster's releases were those of 2019 and 2020   # optional, shown in the report

Everything a report would otherwise find wrong hours later is checked here: a matrix the study
does not run, one that runs every framework at one release only, a table that is not a framework
comparison of times, a matrix that runs none of the configurations the table is measured at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from yaml.nodes import MappingNode, Node

from orchestrator.config import matrix as matrix_loader
from orchestrator.config.values import cut, shown
from orchestrator.studies import measured, releases
from orchestrator.studies.keys import RELEASES_KEYS
from orchestrator.studies.spec import TIME_UNITS, Releases, StudyMatrix, Table


def load(
    read: matrix_loader.Reader,
    node: Node | None,
    matrices: Sequence[StudyMatrix],
    tables: Sequence[Table],
    setting: Callable[[Node, str], str],
) -> Releases | None:
    if node is None:
        return None
    if not isinstance(node, MappingNode):
        raise read.node_error(node, "releases", "expected a mapping: matrix, published (docs/studies.md)")
    keys = read.mapping(node, "releases", RELEASES_KEYS)
    line = node.start_mark.line + 1
    for needed in ("matrix", "published"):
        if needed not in keys:
            raise read.error(line, "releases", f"releases needs {needed}")
    matrix = _matrix(read, keys["matrix"], matrices)
    table = _table(read, keys["published"], tables)
    if "columns" in keys and setting(keys["columns"], "columns") != table.columns:
        message = f"the table {table.name} compares per {table.columns}: the releases are read per its own"
        raise read.node_error(keys["columns"], "columns", message)
    configs = [
        c for c in matrix.matrix.configs if all(measured.same(getattr(c, k), v) for k, v in table.measured)
    ]
    if not configs:
        wanted = ", ".join(f"{k} {v}" for k, v in table.measured)
        message = f"{matrix.path.name} runs none of the configurations {table.name} is measured at ({wanted})"
        raise read.node_error(keys["matrix"], "matrix", message)
    several = releases.planned(configs)
    if not any(len(v) > 1 for v in several.values()):
        message = (
            f"{matrix.path.name} runs each framework at one release: a releases matrix makes version "
            "an axis (version: [...])"
        )
        raise read.node_error(keys["matrix"], "matrix", message)
    note = read.text(keys.get("note"), "note")
    return Releases(matrix, table, note, line)


def _matrix(read: matrix_loader.Reader, node: Node, matrices: Sequence[StudyMatrix]) -> StudyMatrix:
    text = read.text(node, "matrix", allow_empty=False)
    for entry in matrices:
        if entry.path.name == text or entry.path.as_posix().endswith("/" + text):
            return entry
    known = cut(", ".join(m.path.name for m in matrices), 200)
    raise read.node_error(node, "matrix", f"{shown(text)}: not one of the study's matrices ({known})")


def _table(read: matrix_loader.Reader, node: Node, tables: Sequence[Table]) -> Table:
    name = read.text(node, "published", allow_empty=False)
    found = {t.name: t for t in tables}
    if name not in found:
        known = cut(", ".join(found) or "none", 200)
        raise read.node_error(node, "published", f"{shown(name)}: no such published table ({known})")
    table = found[name]
    if table.published_only:
        raise read.node_error(node, "published", f"{name} is published only: no runs are set beside it")
    if table.items != "framework" or table.unit not in TIME_UNITS:
        message = f"{name} is not a table of times per framework: releases are a framework's"
        raise read.node_error(node, "published", message)
    return table

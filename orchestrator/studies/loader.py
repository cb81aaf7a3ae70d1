"""Load `studies/<name>/study.yaml` into a Study, or refuse it in one line naming file, line and key.

The file is read with the matrix loader's YAML reader (config/matrix.py: composed into nodes, so
every value keeps its line; nesting, size and merge keys bounded alike). Its matrices are loaded by
the matrix loader itself, and a claim or a table that names a setting, a framework or a column the
study does not run is refused here, before anything runs or is read from a database: a typo in a
claim would otherwise end as "not checkable" long after the runs it was meant to judge.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node

from orchestrator.config import matrix as matrix_loader
from orchestrator.config.filters import did_you_mean
from orchestrator.config.run_config import FIELD_NAMES, validate_field
from orchestrator.config.values import cut, shown
from orchestrator.errors import ConfigError
from orchestrator.studies import accuracy, loader_ratios, loader_releases, published, since
from orchestrator.studies.keys import CLAIM_KEYS, MATRIX_KEYS, NEEDS, SECTIONS, TABLE_KEYS, TAKES
from orchestrator.studies.spec import (
    ACCURACY_METRICS,
    ACCURACY_UNITS,
    AGGREGATES,
    KINDS,
    METRICS,
    POLICIES,
    RELATIONS,
    RESOURCE_METRICS,
    UNITS,
    Claim,
    Study,
    StudyMatrix,
    Table,
)

FILE = "study.yaml"
EPOCH = published.EPOCH
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MAX_ITEMS = 1000  # claims, tables or matrices in one study: a study has tens


def load_study(folder: str | os.PathLike[str]) -> Study:
    """Read, validate and load a study folder's study.yaml and everything it names."""
    base = Path(folder)
    path = base / FILE
    label = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read(matrix_loader.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read study file: {exc.strerror or exc}") from None
    if len(data) > matrix_loader.MAX_FILE_BYTES:
        raise ConfigError(
            f"{label}:1: study: the file is larger than {matrix_loader.MAX_FILE_BYTES >> 10} KiB"
        )
    return _Study(label, base).load(matrix_loader.compose(label, data))


class _Study:
    def __init__(self, label: str, base: Path) -> None:
        self.read = matrix_loader.Reader(label)
        self.label, self.base = label, base
        self.ran: dict[str, set[Any]] = {}  # per setting, the values the study's matrices run

    def load(self, root: Node) -> Study:
        sections = {
            k: v
            for k, v in self.read.mapping(root, "study", SECTIONS).items()
            if not matrix_loader.is_null(v)
        }
        for key in ("name", "title", "citation", "matrices"):
            if key not in sections:
                raise self.read.error(root.start_mark.line + 1, key, "missing: every study names it")
        name = self._name(sections["name"], "name")
        matrices = tuple(self._matrix(n) for n in self._list(sections["matrices"], "matrices"))
        if not matrices:
            raise self.read.node_error(sections["matrices"], "matrices", "a study runs at least one matrix")
        tables = tuple(self._table(n, matrices) for n in self._list(sections.get("published"), "published"))
        _unique(self.read, [(t.name, t.line) for t in tables], "published")
        claims = tuple(self._claim(n, matrices) for n in self._list(sections.get("claims"), "claims"))
        _unique(self.read, [(c.id, c.line) for c in claims], "claims")
        checks = loader_ratios.Checks(self._name, self._setting, self._where)
        ratios = loader_ratios.load(self.read, sections.get("ratios"), tables, matrices, checks)
        return Study(
            name=name,
            title=self.read.text(sections["title"], "title", allow_empty=False),
            citation=self.read.text(sections["citation"], "citation", allow_empty=False),
            folder=self.base,
            matrices=matrices,
            tables=tables,
            claims=claims,
            notes=self.read.text(sections.get("notes"), "notes"),
            scales=tuple(dict.fromkeys(m.scale for m in matrices)),
            ratios=ratios,
            since=since.parse(self.read, self._list(sections.get("since"), "since"), [c.id for c in claims]),
            releases=loader_releases.load(
                self.read, sections.get("releases"), matrices, tables, self._setting
            ),
        )

    # --- pieces -------------------------------------------------------------------------------

    def _list(self, node: Node | None, key: str) -> list[Node]:
        if node is None:
            return []
        items = self.read.sequence(node, key, "a list")
        if len(items) > MAX_ITEMS:
            raise self.read.node_error(node, key, f"{len(items)} entries (at most {MAX_ITEMS})")
        return items

    def _name(self, node: Node, key: str) -> str:
        text = self.read.text(node, key, allow_empty=False)
        if not NAME.fullmatch(text):
            message = f"{shown(text)}: expected a short name of a-z, 0-9, '-' and '_'"
            raise self.read.node_error(node, key, message)
        return text

    def _inside(self, node: Node, key: str) -> Path:
        """A path the study names, relative to its folder and inside it: a study file must not
        point bench at a matrix or a CSV elsewhere on the machine."""
        text = self.read.text(node, key, allow_empty=False)
        relative = Path(text)
        if relative.is_absolute() or ".." in relative.parts:
            raise self.read.node_error(node, key, f"{shown(text)}: a path inside the study's folder")
        return self.base / relative

    def _matrix(self, node: Node) -> StudyMatrix:
        keys = self.read.mapping(node, "matrices", MATRIX_KEYS)
        if "path" not in keys or "scale" not in keys:
            raise self.read.node_error(node, "matrices", "each entry needs a path and a scale")
        path = self._inside(keys["path"], "path")
        note = self.read.text(keys.get("note"), "note")
        return StudyMatrix(path, self._name(keys["scale"], "scale"), matrix_loader.load_matrix(path), note)

    def _setting(self, node: Node, key: str) -> str:
        text = self.read.text(node, key, allow_empty=False)
        if text not in FIELD_NAMES:
            raise self.read.node_error(
                node, key, f"{shown(text)} is not a setting{did_you_mean(text, FIELD_NAMES)}"
            )
        return text

    def _value(self, node: Node, key: str, setting: str, matrices: tuple[StudyMatrix, ...]) -> Any:
        """A setting's value, validated, and one the study's matrices run (else nothing could
        ever be measured for it)."""
        raw = self.read.scalar(node, key)
        try:
            value = validate_field(setting, raw)
        except ValueError as exc:
            raise self.read.node_error(node, key, f"{setting}: {exc}") from None
        # Each setting's values gathered once: a hostile file of many claims must stay linear.
        if setting not in self.ran:
            self.ran[setting] = {getattr(c, setting) for m in matrices for c in m.matrix.configs}
        ran = self.ran[setting]
        if value not in ran:
            listed = cut(", ".join(sorted(map(str, ran))), 200)
            message = f"{setting} {shown(value)} is not run by the study's matrices (they run {listed})"
            raise self.read.node_error(node, key, message)
        return value

    def _where(
        self, node: Node | None, key: str, matrices: tuple[StudyMatrix, ...]
    ) -> tuple[tuple[str, Any], ...]:
        if node is None:
            return ()
        found: list[tuple[str, Any]] = []
        for setting, value in self.read.mapping(node, key, FIELD_NAMES).items():
            found.append((setting, self._value(value, setting, setting, matrices)))
        return tuple(found)

    def _choice(self, node: Node, key: str, options: tuple[str, ...]) -> str:
        text = self.read.text(node, key, allow_empty=False)
        if text not in options:
            raise self.read.node_error(node, key, f"{shown(text)}: expected one of {', '.join(options)}")
        return text

    def _columns(self, node: Node, unit: Node) -> str:
        """A table's columns: a setting, or `epoch` for a published accuracy per epoch."""
        if getattr(unit, "value", None) in ACCURACY_UNITS:
            if getattr(node, "value", None) != EPOCH:
                raise self.read.node_error(node, "columns", f"an accuracy table's columns are {EPOCH}")
            return EPOCH
        return self._setting(node, "columns")

    def _table(self, node: Node, matrices: tuple[StudyMatrix, ...]) -> Table:
        keys = self.read.mapping(node, "published", TABLE_KEYS)
        # A published-only table (its rows are GPU kernels, say, not frameworks) is shown as printed,
        # with why bench has no figure beside it: nothing in it is matched against runs.
        only = "published_only" in keys
        for needed in ("name", "file", "unit", "row", "value", *(() if only else ("columns",))):
            if needed not in keys:
                raise self.read.node_error(node, "published", f"each table needs {needed}")
        for key in ("items", "columns", "measured", "missing", "unknown", "absent") if only else ():
            if key in keys:
                raise self.read.node_error(
                    keys[key], key, "a published_only table is matched against no runs"
                )
        table = Table(
            name=self._name(keys["name"], "name"),
            file=self._inside(keys["file"], "file"),
            unit=self._choice(keys["unit"], "unit", UNITS),
            row=self.read.text(keys["row"], "row", allow_empty=False),
            value=self.read.text(keys["value"], "value", allow_empty=False),
            items=self._setting(keys["items"], "items") if "items" in keys else ("" if only else "framework"),
            columns="" if only else self._columns(keys["columns"], keys["unit"]),
            where=tuple(self._rows_kept(keys).items()),
            measured=self._where(keys.get("measured"), "measured", matrices),
            missing=self._choice(keys["missing"], "missing", POLICIES) if "missing" in keys else "refuse",
            unknown=self._choice(keys["unknown"], "unknown", POLICIES) if "unknown" in keys else "refuse",
            notes=self.read.text(keys.get("notes"), "notes"),
            line=node.start_mark.line + 1,
            published_only=self.read.text(keys["published_only"], "published_only", allow_empty=False)
            if only
            else "",
            absent=tuple(self._rows_kept(keys, "absent").items()),
        )
        if only:
            published.read_rows(table)  # its CSV refused at load too
            return table
        if table.items == table.columns:
            raise self.read.node_error(
                keys["columns"], "columns", f"the columns and items are both {table.items}"
            )
        found = published.read_table(table)  # a bad CSV is refused at load, not when a report is asked for
        for name, _ in table.absent:
            if name not in found.lacking_items():
                message = f"{shown(name)}: not one of the table's {table.items}s that bench lacks"
                raise self.read.node_error(keys["absent"], "absent", message)
        return table

    def _rows_kept(self, keys: dict[str, Node], key: str = "where") -> dict[str, str]:
        """A mapping whose keys come from the CSV (its columns, or its rows' items): text to text."""
        found: dict[str, str] = {}
        if key in keys:
            for name, value in self.read.mapping(keys[key], key, _any_key(keys[key])).items():
                found[name] = str(self.read.scalar(value, name))
        return found

    def _claim(self, node: Node, matrices: tuple[StudyMatrix, ...]) -> Claim:
        keys = self.read.mapping(node, "claims", CLAIM_KEYS)
        line = node.start_mark.line + 1
        for needed in ("id", "kind", "text", "source"):
            if needed not in keys:
                raise self.read.error(line, "claims", f"each claim needs {needed}")
        kind = self._choice(keys["kind"], "kind", KINDS)
        allowed = ("id", "kind", "text", "source", *NEEDS[kind], *TAKES[kind])
        for key in keys:
            if key not in allowed:
                raise self.read.node_error(keys[key], key, f"a {kind} claim does not take {key}")
        for key in NEEDS[kind]:
            if key not in keys:
                raise self.read.error(line, key, f"a {kind} claim needs {key}")
        items = self._setting(keys["items"], "items") if "items" in keys else "framework"
        fields: dict[str, Any] = {
            "id": self._name(keys["id"], "id"),
            "kind": kind,
            "text": self.read.text(keys["text"], "text", allow_empty=False),
            "source": self.read.text(keys["source"], "source", allow_empty=False),
            "line": line,
            "items": items,
            "where": self._where(keys.get("where"), "where", matrices),
            "reason": self.read.text(keys.get("reason"), "reason"),
        }
        if "columns" in keys:
            fields["columns"] = self._setting(keys["columns"], "columns")
            if fields["columns"] == items:
                raise self.read.node_error(
                    keys["columns"], "columns", f"the columns and items are both {items}"
                )
        if kind == "not_checkable" and not fields["reason"].strip():
            raise self.read.node_error(keys["reason"], "reason", "say why the claim cannot be checked here")
        if "metric" in keys:
            metrics = RESOURCE_METRICS if kind == "resource" else METRICS + ACCURACY_METRICS
            fields["metric"] = self._choice(keys["metric"], "metric", metrics)
        fields.update(
            accuracy.claim_fields(self.read, keys, fields.get("metric", "seconds_per_image"), matrices)
        )
        fields.update(self._kind_fields(kind, keys, items, matrices))
        return Claim(**fields)

    def _kind_fields(
        self, kind: str, keys: dict[str, Node], items: str, matrices: tuple[StudyMatrix, ...]
    ) -> dict[str, Any]:
        def subject(node: Node, key: str) -> str:
            return str(self._value(node, key, items, matrices))

        if kind == "fastest":
            ins = keys["in"]
            nodes = self.read.sequence(ins, "in", "a list") if not isinstance(ins, MappingNode) else []
            if not nodes:
                raise self.read.node_error(ins, "in", f"expected a list of {', '.join(AGGREGATES)}")
            aggregates = tuple(self._choice(n, "in", AGGREGATES) for n in nodes)
            return {"subjects": (subject(keys["who"], "who"),), "aggregates": aggregates}
        if kind == "order":
            nodes = self.read.sequence(keys["order"], "order", "a list, best first")
            if len(nodes) < 2:
                raise self.read.node_error(keys["order"], "order", "an order needs at least two")
            return {"subjects": tuple(subject(n, "order") for n in nodes)}
        if kind in ("ratio", "resource"):
            found: dict[str, Any] = {"subjects": (subject(keys["a"], "a"), subject(keys["b"], "b"))}
            if kind == "resource":
                found["direction"] = self._choice(keys["relation"], "relation", RELATIONS)
            else:
                found.update(self._threshold(keys))
            return found
        if kind in ("similar", "spread"):
            found = {"threshold": self._within(keys["within"])}
            if kind == "similar":
                found["subjects"] = (subject(keys["a"], "a"), subject(keys["b"], "b"))
            return found
        if kind in ("rises_with", "rises_beyond"):
            axis = self._setting(keys["axis"], "axis")
            if axis == items:
                raise self.read.node_error(keys["axis"], "axis", f"the axis and items are both {axis}")
            return {"axis": axis}
        return {}

    def _threshold(self, keys: dict[str, Node]) -> dict[str, Any]:
        given = [k for k in ("above", "below") if k in keys]
        if len(given) != 1:
            line = next(iter(keys.values())).start_mark.line + 1
            raise self.read.error(line, "ratio", "a ratio claim gives one of above or below")
        node = keys[given[0]]
        value = self.read.scalar(node, given[0])
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
            raise self.read.node_error(node, given[0], f"{shown(value)}: expected a positive ratio")
        return {"threshold": float(value), "direction": given[0]}

    def _within(self, node: Node) -> float:
        """A band's factor: 1.25 is "within 1.25× either way"; 1 or less would be no band at all."""
        value = self.read.scalar(node, "within")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 1 < value < 1e6:
            raise self.read.node_error(node, "within", f"{shown(value)}: expected a factor above 1")
        return float(value)


def _any_key(node: Node) -> tuple[str, ...]:
    """A CSV filter's keys are the CSV's columns, checked against the file's header when it is read:
    here any name is accepted (duplicates are still refused by the reader)."""
    return tuple(str(getattr(k, "value", "")) for k, _ in getattr(node, "value", ()))


def _unique(read: matrix_loader.Reader, named: list[tuple[str, int]], key: str) -> None:
    seen: dict[str, int] = {}
    for name, line in named:
        if name in seen:
            raise read.error(line, key, f"{name}: given twice (first on line {seen[name]})")
        seen[name] = line


def study_folders(root: Path) -> list[Path]:
    """The study folders under `root`: each sub-folder that holds a study.yaml, by name."""
    if not root.is_dir():
        raise ConfigError(f"{root}: no such studies folder (give one with --studies)")
    return sorted(p for p in root.iterdir() if (p / FILE).is_file())


def load_named(root: Path, name: str) -> Study:
    """The study called `name` under `root` (its folder's name)."""
    if not NAME.fullmatch(name):
        raise ConfigError(f"study {shown(name)}: expected a study's name (bench study list shows them)")
    folders = {p.name: p for p in study_folders(root)}
    if name not in folders:
        known = ", ".join(folders) or "none"
        raise ConfigError(f"no study {name} in {root} (known: {known}){did_you_mean(name, list(folders))}")
    study = load_study(folders[name])
    if study.name != name:
        raise ConfigError(f"{folders[name] / FILE}: name: {study.name} in the folder {name}: they must agree")
    return study

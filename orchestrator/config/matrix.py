"""Load a matrix file into typed run configurations, and filter them with ``--only``.

The YAML is composed into nodes (safe loader) rather than loaded into Python objects, so every value
keeps its line: each error names the file, the line and the key. Values are built from the nodes
here, scalar by scalar, and checked with ``orchestrator.config.run_config.validate_field``.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from orchestrator.config.checks import cross_field_problem
from orchestrator.config.filters import parse_only as parse_only  # re-exported: `bench run --only`
from orchestrator.config.filters import select as select
from orchestrator.config.filters import unknown_key, value_message
from orchestrator.config.run_config import (
    FAULT_PARTS,
    FIELD_NAMES,
    LANGUAGE_MODELS,
    RunConfig,
    validate_field,
)
from orchestrator.config.values import shown
from orchestrator.errors import ConfigError

logger = logging.getLogger(__name__)

SECTIONS = ("name", "description", "settings", "axes", "exclude", "include")
# A typo such as a long axis pasted twice should fail at load, not exhaust memory while expanding.
MAX_CONFIGS = 100_000
# The shipped matrices are a few KiB. The limit keeps everything after it linear in a small input:
# YAML aliases let one short line name a large node many times, so counts are bounded as well.
MAX_FILE_BYTES = 1 << 20
MAX_ENTRIES = 10_000  # exclude or include entries
MAX_DEPTH = 20  # YAML nesting; a matrix needs 4 (matrix, axes, a cpus axis, one CPU list)
# Excluding is one set look-up per combination and distinct set of exclude keys.
MAX_EXCLUDE_WORK = 2_000_000
# Settings whose single value may itself be a list (on an axis: a list of lists).
LIST_FIELDS = ("cpus",)

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


@dataclass(frozen=True)
class Matrix:
    """A loaded matrix: its configurations in run order, and the identity of its file."""

    name: str
    path: Path
    file_hash: str
    configs: tuple[RunConfig, ...]
    description: str = ""


@dataclass(frozen=True)
class _Value:
    """A validated setting and the 1-based line it was written on."""

    value: Any
    line: int


_Layer = dict[str, _Value]


def load_matrix(path: str | os.PathLike[str]) -> Matrix:
    """Read, validate and expand a matrix file; every problem is a one-line ``ConfigError``."""
    label = os.fspath(path)
    try:
        with open(path, "rb") as f:  # at most one byte past the limit, whatever the file is
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read matrix file: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{label}:1: matrix: the file is larger than {MAX_FILE_BYTES >> 10} KiB")
    reader = _Reader(label)
    root = _compose(label, data)
    # A section written as `settings:` with nothing after is null: the same as leaving it out.
    sections = {
        key: node for key, node in reader.mapping(root, "matrix", SECTIONS).items() if not _is_null(node)
    }
    name_node = sections.get("name")
    name = reader.text(name_node, "name", allow_empty=False) if name_node is not None else Path(path).stem
    description = reader.text(sections.get("description"), "description")
    settings = reader.fields(sections.get("settings"), "settings")
    configs = _expand(reader, sections, settings)
    includes = [settings | entry for entry in reader.entries(sections.get("include"), "include")]
    if len(configs) + len(includes) > MAX_CONFIGS:
        total = len(configs) + len(includes)
        message = f"{total} configurations (at most {MAX_CONFIGS})"
        raise reader.error(_key_line(root, "include"), "include", message)
    configs += [(_resolve(layer), layer) for layer in includes]
    if not configs:
        message = "no configurations: every combination is excluded and nothing is included"
        raise reader.error(_key_line(root, "exclude"), "exclude", message)
    base = Path(path).resolve().parent
    configs = [(_absolute_data_dir(config, base), layer) for config, layer in configs]
    configs = [_general_sequence_length(config, layer, settings) for config, layer in configs]
    for config, layer in configs:
        _check(reader, config, layer, settings)
    return Matrix(
        name=name,
        path=Path(path),
        file_hash=hashlib.sha256(data).hexdigest(),
        configs=_dedupe(config for config, _ in configs),
        description=description,
    )


def _compose(label: str, data: bytes) -> Node:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{label}:{line}: matrix: the file is not UTF-8 text") from None
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        problem = "; ".join(part for part in (exc.context, exc.problem) if part)
        raise ConfigError(f"{label}:{line}: yaml: {problem}") from None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise ConfigError(f"{label}:{line}: yaml: {exc.reason} character {shown(exc.character)}") from None
    if root is None:
        raise ConfigError(f"{label}:1: matrix: the file is empty")
    return root


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting deeper than MAX_DEPTH as soon as it is met.

    The composer recurses once per level (a RecursionError near 1000), and the scanner's work per
    token grows with the open flow levels: a file of 100,000 `[` took 35 s to refuse after the fact.
    """

    depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Reader:
    """Builds values from YAML nodes; every error it raises points at the offending node's line."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._constructor = yaml.constructor.SafeConstructor()

    def error(self, line: int, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.label}:{line}: {key or repr(key)}: {message}")

    def node_error(self, node: Node, key: str, message: str) -> ConfigError:
        return self.error(node.start_mark.line + 1, key, message)

    def mapping(self, node: Node, key: str, valid: Sequence[str]) -> dict[str, Node]:
        """The values of a mapping by key name, refusing unknown and duplicate keys."""
        if not isinstance(node, MappingNode) or node.tag != _MAP_TAG:
            raise self.node_error(node, key, f"expected a mapping, got {_describe(node)}")
        values: dict[str, Node] = {}
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise self.node_error(key_node, key, f"expected a name as key, got {_describe(key_node)}")
            name, line = key_node.value, key_node.start_mark.line + 1
            if name in lines:
                raise self.error(line, name, f"duplicate key (first given on line {lines[name]})")
            if key_node.tag == "tag:yaml.org,2002:merge":
                message = "merge keys are not supported: put shared values under settings"
                raise self.error(line, name, message)
            if name not in valid:
                raise self.error(line, name, unknown_key(name, valid))
            values[name], lines[name] = value_node, line
        return values

    def sequence(self, node: Node, key: str, what: str, hint: str = "") -> list[Node]:
        if not isinstance(node, SequenceNode) or node.tag != _SEQ_TAG:
            raise self.node_error(node, key, f"expected {what}, got {_describe(node)}{hint}")
        return list(node.value)

    def scalar(self, node: Node, key: str) -> Any:
        if not isinstance(node, ScalarNode):
            raise self.node_error(node, key, f"expected a single value, got {_describe(node)}")
        try:
            return self._constructor.construct_object(node, deep=True)
        except Exception as exc:  # PyYAML's scalar constructors fail with many exception types
            detail = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else exc
            message = f"cannot read value {shown(node.value)}: {shown(str(detail))}"
            raise self.node_error(node, key, message) from None

    def text(self, node: Node | None, key: str, allow_empty: bool = True) -> str:
        if node is None:
            return ""
        value = self.scalar(node, key)
        if not isinstance(value, str) or not (allow_empty or value.strip()):
            raise self.node_error(node, key, f"expected a non-empty string, got {shown(value)}")
        return value

    def field(self, key: str, node: Node) -> _Value:
        if key in LIST_FIELDS and isinstance(node, SequenceNode):
            value = [self.scalar(item, key) for item in node.value]
        else:
            value = self.scalar(node, key)
        try:
            return _Value(validate_field(key, value), node.start_mark.line + 1)
        except ValueError as exc:
            raise self.node_error(node, key, value_message(key, value, exc)) from None

    def fields(self, node: Node | None, key: str) -> _Layer:
        """A mapping of run settings, each validated and remembered with its line."""
        layer: _Layer = {}
        for name, value in self.mapping(node, key, FIELD_NAMES).items() if node is not None else ():
            layer = self.merged(layer, self.setting(name, value), value)
        return layer

    def setting(self, key: str, node: Node) -> _Layer:
        """The settings one key gives: itself, or the fault worker's, written as one value."""
        if key != "fault" or not isinstance(node, MappingNode):
            return {key: self.field(key, node)}
        parts = self.mapping(node, key, tuple(FAULT_PARTS))
        if not parts:
            message = "an empty mapping: write {kind: ok} for the fault that does nothing"
            raise self.node_error(node, key, message)
        return {FAULT_PARTS[part]: self.field(FAULT_PARTS[part], value) for part, value in parts.items()}

    def merged(self, layer: _Layer, more: _Layer, node: Node) -> _Layer:
        """Two groups of settings of one mapping; a setting in both (`after_steps` beside a `fault`
        mapping that gives it too) is an error, as a duplicate key is."""
        twice = sorted(set(layer) & set(more))
        if twice:
            first = layer[twice[0]].line
            raise self.node_error(node, twice[0], f"given twice (first on line {first})")
        return layer | more

    def entries(self, node: Node | None, key: str) -> list[_Layer]:
        """The mappings of an exclude or include list."""
        if node is None:
            return []
        layers = []
        items = self.sequence(node, key, "a list of mappings")
        if len(items) > MAX_ENTRIES:
            raise self.node_error(node, key, f"{len(items)} entries (at most {MAX_ENTRIES})")
        for item in items:
            layer = self.fields(item, key)
            if key == "exclude" and not layer:
                raise self.node_error(item, key, "an empty entry would exclude everything")
            layers.append(layer)
        return layers


def _expand(reader: _Reader, sections: dict[str, Node], settings: _Layer) -> list[tuple[RunConfig, _Layer]]:
    """The cartesian product of the axes over the settings, less the excluded combinations."""
    axes = reader.mapping(sections["axes"], "axes", FIELD_NAMES) if "axes" in sections else {}
    # The size is known from the lists alone: a huge product is refused before any value is read.
    size = math.prod(len(node.value) if isinstance(node, SequenceNode) else 1 for node in axes.values())
    if size > MAX_CONFIGS:
        raise reader.node_error(sections["axes"], "axes", f"{size} combinations (at most {MAX_CONFIGS})")
    columns = [(key, _axis(reader, key, node)) for key, node in axes.items()]
    _disjoint(reader, axes, columns)
    if not columns and sections.get("include") is not None:
        # Only includes: the settings are their defaults, not a configuration of their own.
        return []
    excludes = reader.entries(sections.get("exclude"), "exclude")
    groups = _exclude_groups(excludes)
    if size * len(groups) > MAX_EXCLUDE_WORK:
        message = (
            f"{size} combinations against exclude entries of {len(groups)} different sets of keys"
            f" is too much to check (at most {MAX_EXCLUDE_WORK} pairs): use fewer sets of keys"
        )
        raise reader.node_error(sections["exclude"], "exclude", message)
    layers = [
        settings | {key: value for part in combo for key, value in part.items()}
        for combo in itertools.product(*(v for _, v in columns))
    ]
    return _exclude(reader, [(_resolve(layer), layer) for layer in layers], excludes, groups)


_Groups = dict[tuple[str, ...], set[tuple[Any, ...]]]


def _exclude_groups(excludes: list[_Layer]) -> _Groups:
    """Exclude entries grouped by their set of keys: each combination then costs one set look-up
    per group, not one comparison per entry."""
    groups: _Groups = {}
    for entry in excludes:
        keys = tuple(sorted(entry))
        groups.setdefault(keys, set()).add(tuple(entry[k].value for k in keys))
    return groups


def _exclude(
    reader: _Reader, configs: list[tuple[RunConfig, _Layer]], excludes: list[_Layer], groups: _Groups
) -> list[tuple[RunConfig, _Layer]]:
    """The configurations no exclude entry matches; a warning for each entry that matched none."""
    matched: set[tuple[tuple[str, ...], tuple[Any, ...]]] = set()
    kept = []
    for config, layer in configs:
        hits = [(keys, v) for keys, values in groups.items() if (v := _values(config, keys)) in values]
        matched.update(hits)
        if not hits:
            kept.append((config, layer))
    for entry in excludes:
        keys = tuple(sorted(entry))
        if (keys, tuple(entry[k].value for k in keys)) not in matched:
            line = min(setting.line for setting in entry.values())
            logger.warning("%s:%d: exclude entry matches no configuration", reader.label, line)
    return kept


def _values(config: RunConfig, keys: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(getattr(config, k) for k in keys)


def _axis(reader: _Reader, key: str, node: Node) -> list[_Layer]:
    """The values of one axis, each the settings it gives (several for a `fault` mapping)."""
    hint = f" (write [{node.value}] for a single value)" if _is_value(node) else ""
    items = reader.sequence(node, key, "a list of values", hint)
    if not items:
        raise reader.node_error(node, key, "an axis needs at least one value")
    return [reader.setting(key, item) for item in items]


def _disjoint(reader: _Reader, axes: dict[str, Node], columns: list[tuple[str, list[_Layer]]]) -> None:
    """No setting on two axes (`after_steps` as an axis and inside a `fault` axis's mappings)."""
    seen: dict[str, str] = {}
    for key, values in columns:
        for name in {name for value in values for name in value}:
            if seen.setdefault(name, key) != key:
                message = f"{name} is set by axis {seen[name]} too: give it on one axis"
                raise reader.node_error(axes[key], key, message)


def _resolve(layer: _Layer) -> RunConfig:
    return RunConfig(**{key: setting.value for key, setting in layer.items()})


def _check(reader: _Reader, config: RunConfig, layer: _Layer, settings: _Layer) -> None:
    """Rules that span fields, blamed on the line that set the most specific culprit."""
    problem = cross_field_problem(config, layer)
    if problem is not None:
        keys, message = problem
        key, line = _blame(layer, settings, keys)
        raise reader.error(line, key, message)


def _general_sequence_length(config: RunConfig, layer: _Layer, settings: _Layer) -> tuple[RunConfig, _Layer]:
    """A sequence_length from `settings` is for the language models: the other models' configurations
    drop it, so one matrix can hold both (as image_size does not apply to a token model). Set by an
    axis item or an include entry on another model, it is still refused (checks.sequence_problem)."""
    value = layer.get("sequence_length")
    if value is None or value is not settings.get("sequence_length") or config.model in LANGUAGE_MODELS:
        return config, layer
    kept = {key: setting for key, setting in layer.items() if key != "sequence_length"}
    return replace(config, sequence_length=None), kept


def _absolute_data_dir(config: RunConfig, base: Path) -> RunConfig:
    """A relative data_dir is relative to the matrix file, wherever bench is started from."""
    if config.data_dir is None or Path(config.data_dir).is_absolute():
        return config
    return replace(config, data_dir=str((base / config.data_dir).resolve()))


def _blame(layer: _Layer, settings: _Layer, keys: Sequence[str]) -> tuple[str, int]:
    """The key to report: one set by an axis item or include entry first, then one from settings.

    Product configurations share the settings layer's objects, so identity tells the two apart.
    """
    specific = [key for key in keys if key in layer and layer[key] is not settings.get(key)]
    general = [key for key in keys if key in layer]
    # Only defaults involved cannot happen while RunConfig's defaults are consistent; line 1 then.
    key = (specific or general or [keys[0]])[0]
    return key, layer[key].line if key in layer else 1


def _dedupe(configs: Iterable[RunConfig]) -> tuple[RunConfig, ...]:
    seen: dict[str, RunConfig] = {}
    for config in configs:
        seen.setdefault(config.config_hash, config)
    return tuple(seen.values())


def _is_null(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping" if node.tag == _MAP_TAG else f"a {node.tag} mapping"
    if isinstance(node, SequenceNode):
        return "a list" if node.tag == _SEQ_TAG else f"a {node.tag} list"
    if _is_null(node):
        return "null"
    return repr(node.value)


def _key_line(mapping: Node, name: str) -> int:
    lines = [k.start_mark.line + 1 for k, _ in mapping.value if getattr(k, "value", None) == name]
    return lines[0] if lines else mapping.start_mark.line + 1


def _is_value(node: Node) -> bool:
    return isinstance(node, ScalarNode) and not _is_null(node)


# A study file (orchestrator/studies/loader.py) is read the same way as a matrix, so that its errors
# name the file, the line and the key alike: these are its public names for the matrix's readers.
Reader = _Reader
compose = _compose
is_null = _is_null

"""Load a matrix file into typed run configurations, and filter them with ``--only``.

The YAML is composed into nodes (safe loader) rather than loaded into Python objects, so every value
keeps its line: each error names the file, the line and the key. Values are built from the nodes
here, scalar by scalar, and checked with ``orchestrator.config.validate_field``.
"""

from __future__ import annotations

import difflib
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

from orchestrator.config import (
    DATASETS,
    DEVICES,
    FAULTS,
    FIELD_NAMES,
    FRAMEWORKS,
    MODELS,
    OPTIMIZERS,
    RunConfig,
    validate_field,
)
from orchestrator.config_checks import cross_field_problem
from orchestrator.errors import ConfigError

logger = logging.getLogger(__name__)

SECTIONS = ("name", "description", "settings", "axes", "exclude", "include")
# A typo such as a long axis pasted twice should fail at load, not exhaust memory while expanding.
MAX_CONFIGS = 100_000
# Settings whose single value may itself be a list (on an axis: a list of lists).
LIST_FIELDS = ("cpus",)

_CHOICES: dict[str, tuple[str, ...]] = {
    "framework": FRAMEWORKS,
    "model": MODELS,
    "device": DEVICES,
    "optimizer": OPTIMIZERS,
    "dataset": DATASETS,
    "fault": FAULTS,
}
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
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read matrix file: {exc.strerror or exc}") from None
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
    configs += [(_resolve(layer), layer) for layer in includes]
    if not configs:
        message = "no configurations: every combination is excluded and nothing is included"
        raise reader.error(_key_line(root, "exclude"), "exclude", message)
    base = Path(path).resolve().parent
    configs = [(_absolute_data_dir(config, base), layer) for config, layer in configs]
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
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        problem = "; ".join(part for part in (exc.context, exc.problem) if part)
        raise ConfigError(f"{label}:{line}: yaml: {problem}") from None
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise ConfigError(f"{label}:{line}: yaml: {exc.reason} character {exc.character!r}") from None
    except RecursionError:
        # PyYAML's composer recurses per nesting level; absurd nesting is a bad file, not a crash.
        raise ConfigError(f"{label}:1: yaml: nesting too deep") from None
    if root is None:
        raise ConfigError(f"{label}:1: matrix: the file is empty")
    return root


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
                raise self.error(line, name, _unknown_key(name, valid))
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
            raise self.node_error(node, key, f"cannot read value {node.value!r}: {detail}") from None

    def text(self, node: Node | None, key: str, allow_empty: bool = True) -> str:
        if node is None:
            return ""
        value = self.scalar(node, key)
        if not isinstance(value, str) or not (allow_empty or value.strip()):
            raise self.node_error(node, key, f"expected a non-empty string, got {value!r}")
        return value

    def field(self, key: str, node: Node) -> _Value:
        if key in LIST_FIELDS and isinstance(node, SequenceNode):
            value = [self.scalar(item, key) for item in node.value]
        else:
            value = self.scalar(node, key)
        try:
            return _Value(validate_field(key, value), node.start_mark.line + 1)
        except ValueError as exc:
            raise self.node_error(node, key, _value_message(key, value, exc)) from None

    def fields(self, node: Node | None, key: str) -> _Layer:
        """A mapping of run settings, each validated and remembered with its line."""
        if node is None:
            return {}
        return {name: self.field(name, value) for name, value in self.mapping(node, key, FIELD_NAMES).items()}

    def entries(self, node: Node | None, key: str) -> list[_Layer]:
        """The mappings of an exclude or include list."""
        if node is None:
            return []
        layers = []
        for item in self.sequence(node, key, "a list of mappings"):
            layer = self.fields(item, key)
            if key == "exclude" and not layer:
                raise self.node_error(item, key, "an empty entry would exclude everything")
            layers.append(layer)
        return layers


def _expand(reader: _Reader, sections: dict[str, Node], settings: _Layer) -> list[tuple[RunConfig, _Layer]]:
    """The cartesian product of the axes over the settings, less the excluded combinations."""
    axes = reader.mapping(sections["axes"], "axes", FIELD_NAMES) if "axes" in sections else {}
    columns = [(key, _axis(reader, key, node)) for key, node in axes.items()]
    size = math.prod(len(values) for _, values in columns)
    if size > MAX_CONFIGS:
        raise reader.node_error(sections["axes"], "axes", f"{size} combinations (at most {MAX_CONFIGS})")
    if not columns and sections.get("include") is not None:
        # Only includes: the settings are their defaults, not a configuration of their own.
        return []
    layers = [
        settings | dict(zip(axes, combo, strict=True))
        for combo in itertools.product(*(v for _, v in columns))
    ]
    configs = [(_resolve(layer), layer) for layer in layers]
    excludes = reader.entries(sections.get("exclude"), "exclude")
    for entry in excludes:
        if not any(_matches(config, entry) for config, _ in configs):
            line = min(setting.line for setting in entry.values())
            logger.warning("%s:%d: exclude entry matches no configuration", reader.label, line)
    return [(c, layer) for c, layer in configs if not any(_matches(c, e) for e in excludes)]


def _axis(reader: _Reader, key: str, node: Node) -> list[_Value]:
    hint = f" (write [{node.value}] for a single value)" if _is_value(node) else ""
    items = reader.sequence(node, key, "a list of values", hint)
    if not items:
        raise reader.node_error(node, key, "an axis needs at least one value")
    return [reader.field(key, item) for item in items]


def _resolve(layer: _Layer) -> RunConfig:
    config = RunConfig(**{key: setting.value for key, setting in layer.items()})
    if config.framework == "fault" and config.fault is None:
        config = replace(config, fault="ok")
    return config


def _matches(config: RunConfig, entry: _Layer) -> bool:
    return all(getattr(config, key) == setting.value for key, setting in entry.items())


def _check(reader: _Reader, config: RunConfig, layer: _Layer, settings: _Layer) -> None:
    """Rules that span fields, blamed on the line that set the most specific culprit."""
    problem = cross_field_problem(config, layer)
    if problem is not None:
        keys, message = problem
        key, line = _blame(layer, settings, keys)
        raise reader.error(line, key, message)


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


def parse_only(text: str, option: str = "--only") -> dict[str, frozenset[Any]]:
    """Parse ``key=value,key=value``; a key given twice accepts either value."""
    only: dict[str, set[Any]] = {}
    for item in text.split(","):
        key, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or not key or not raw:
            raise ConfigError(f"{option}: expected key=value, got {item.strip()!r}")
        if key not in FIELD_NAMES:
            raise ConfigError(f"{option}: {key}: {_unknown_key(key, FIELD_NAMES)}")
        value = raw if key in _CHOICES else _typed(raw)
        try:
            only.setdefault(key, set()).add(validate_field(key, value))
        except ValueError as exc:
            raise ConfigError(f"{option}: {key}: {_value_message(key, value, exc)}") from None
    return {key: frozenset(values) for key, values in only.items()}


def select(configs: Iterable[RunConfig], only: dict[str, frozenset[Any]]) -> list[RunConfig]:
    """The configurations whose every filtered field has one of the accepted values, in order."""
    return [c for c in configs if all(getattr(c, key) in values for key, values in only.items())]


def _typed(raw: str) -> Any:
    # Command-line text has no YAML quirks to honour: 1e-3 is a number here, `yes` is not a boolean.
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def _value_message(key: str, value: Any, exc: ValueError) -> str:
    message = str(exc)
    if isinstance(value, str) and key in _CHOICES:
        return message + _did_you_mean(value, _CHOICES[key])
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return message
        # YAML 1.1 reads 1e-3 (no dot) as text, a frequent surprise for learning rates.
        message += " (quoted numbers and ones like 1e-3 are text in YAML: write 0.001 or 1.0e-3)"
    return message


def _unknown_key(key: str, valid: Sequence[str]) -> str:
    hint = _did_you_mean(key, valid)
    if not hint and len(valid) <= len(SECTIONS):
        hint = f" (expected one of: {', '.join(valid)})"
    return "unknown key" + hint


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


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

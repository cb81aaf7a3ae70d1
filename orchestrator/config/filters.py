"""Filters on configuration fields from the command line (`--only`, `--where`, `--timeline-config`),
one setting from the command line (`bench train --lr 0.1`), and the wording of value errors that the
matrix loader shares.

Command-line text is parsed strictly: numbers are ASCII digits only (``int`` and ``float`` would also
take other scripts' digits, underscores and ``nan``), and every value passes the same validator as a
matrix value, with its bounds, before it reaches a query.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from orchestrator.config import run_config
from orchestrator.config.run_config import (
    FIELD_NAMES,
    SQLITE_INT_MAX,
    THREADS_ALL,
    RunConfig,
    all_threads,
    validate_field,
)
from orchestrator.config.values import cut, shown
from orchestrator.errors import ConfigError

# The named fields whose command-line text is taken as it is; trace and task are typed first, as
# YAML would read them (`trace=false` is untraced).
CHOICES = {
    key: run_config.CHOICES[key] for key in ("framework", "model", "device", "optimizer", "dataset", "fault")
}
# Each value of a filter is one bound parameter of an SQL `IN (...)`; SQLite before 3.32 allows 999
# parameters a statement. No real filter comes near this many values.
MAX_FILTER_VALUES = 256
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
# An integer longer than this is out of every field's range; refusing its text first spares Python's
# 4300-digit conversion limit (a ValueError with a message about sys.set_int_max_str_digits).
_MAX_DIGITS = 40


def parse_only(text: str, option: str = "--only") -> dict[str, frozenset[Any]]:
    """Parse ``key=value,key=value``; a key given twice accepts either value.

    An empty text is an error, not "no filter": `--only ""` must not run the whole matrix.
    """
    only: dict[str, set[Any]] = {}
    items = text.split(",")
    if len(items) > MAX_FILTER_VALUES:
        raise ConfigError(f"{option}: {len(items)} values (at most {MAX_FILTER_VALUES})")
    for item in items:
        key, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or not key or not raw:
            raise ConfigError(f"{option}: expected key=value, got {shown(item.strip())}")
        only.setdefault(key, set()).add(parse_value(key, raw, option))
    return {key: frozenset(values) for key, values in only.items()}


def parse_value(key: str, raw: str, option: str) -> Any:
    """One field's value from command-line text, validated; errors start with ``option: key:``."""
    if key not in FIELD_NAMES:
        raise ConfigError(f"{option}: {cut(key)}: {unknown_key(key, FIELD_NAMES)}")
    # A release is text whatever it looks like: 2.10 is not the number 2.1.
    value = raw if key in CHOICES or key == "version" else _typed(raw)
    try:
        valid = validate_field(key, value)
    except ValueError as exc:
        raise ConfigError(f"{option}: {key}: {value_message(key, value, exc)}") from None
    if key == "threads" and valid == THREADS_ALL:  # as a matrix reads it here: this machine's CPUs
        return all_threads(None)
    return valid


def select(configs: Iterable[RunConfig], only: dict[str, frozenset[Any]]) -> list[RunConfig]:
    """The configurations whose every filtered field has one of the accepted values, in order."""
    return [c for c in configs if all(getattr(c, key) in values for key, values in only.items())]


def _typed(raw: str) -> Any:
    # Command-line text has no YAML quirks to honour: 1e-3 is a number here, `yes` is not a boolean.
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    if len(raw) <= _MAX_DIGITS and _INT.fullmatch(raw):
        return int(raw)
    if len(raw) <= _MAX_DIGITS and _FLOAT.fullmatch(raw):
        return float(raw)
    return raw


def value_message(key: str, value: Any, exc: ValueError) -> str:
    message = str(exc)
    if isinstance(value, str) and key in CHOICES:
        return message + did_you_mean(value, CHOICES[key])
    if isinstance(value, str) and len(value) <= _MAX_DIGITS and _FLOAT.fullmatch(value.strip()):
        # YAML 1.1 reads 1e-3 (no dot) as text, a frequent surprise for learning rates.
        message += " (quoted numbers and ones like 1e-3 are text in YAML: write 0.001 or 1.0e-3)"
    return message


def unknown_key(key: str, valid: Sequence[str], few: int = 6) -> str:
    hint = did_you_mean(key, valid)
    if not hint and len(valid) <= few:
        hint = f" (expected one of: {', '.join(valid)})"
    return "unknown key" + hint


def did_you_mean(word: str, options: Sequence[str]) -> str:
    if len(word) > 100:  # no name is this long; difflib's cost grows with the word
        return ""
    # Two letters swapped is the commonest typo: a name with exactly the word's letters goes first
    # (modle is model, not mode).
    swapped = [o for o in options if sorted(o) == sorted(word)]
    close = difflib.get_close_matches(word, swapped, n=1) or difflib.get_close_matches(word, options, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def parse_id(text: str, what: str) -> int:
    """A database id (a run, a sweep) from command-line text: ASCII digits, 1 to 2**63 - 1.

    A larger integer cannot be an id, and SQLite would fail on it with an OverflowError.
    """
    raw = text.strip()
    if len(raw) > _MAX_DIGITS or not _INT.fullmatch(raw) or not 1 <= int(raw) <= SQLITE_INT_MAX:
        raise ConfigError(f"{what}: expected an id (a positive integer below 2**63), got {shown(text)}")
    return int(raw)

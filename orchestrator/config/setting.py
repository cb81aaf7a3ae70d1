"""What a setting of a run is declared with (``Setting``), and the checks most settings share.

A check returns the normalised value or raises ``ValueError`` with the text that follows ``key:``
in the error (values.py's parsers raise the same way). The declarations themselves are one list,
settings.py; everything else about a setting is derived from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.config.values import shown

Check = Callable[[Any], Any]


@dataclass(frozen=True)
class Setting:
    """One setting of a run, declared once.

    ``type`` and ``default`` are RunConfig's field's own (a test holds the two one-for-one);
    ``check`` may be left out where ``choices`` or ``limits`` say everything. ``help`` is what
    `bench train --help` says; ``doc``, ``doc_values`` and ``doc_default`` are docs/matrix.md's
    richer words where they say more than the derived ones. ``since`` is the schema version that
    first stored it; ``group`` names the settings that apply to one framework only (``fault``: the
    fault worker's), which a matrix may write as one value, a mapping of their ``part`` names, and
    the runs table stores as one JSON column named after the group. A setting that is not part of a
    configuration's ``identity`` (``runs``: how many times it runs) stays out of its hash: runs of
    the same configuration asked for by different counts are one cell.
    """

    name: str
    type: str
    default: Any
    help: str
    since: int
    check: Check | None = None
    choices: tuple[str, ...] | None = None
    limits: tuple[int, int] | None = None
    also: str = ""  # a word accepted besides the type's values (`threads: all`)
    values: str = ""  # the values in words, where neither choices nor limits give them
    column: str = ""
    group: str = ""
    part: str = ""  # its key inside the group's one value (`fault: {kind: segfault, replica: 1}`)
    doc: str = ""
    doc_values: str = ""
    doc_default: str = ""
    identity: bool = True

    @property
    def validator(self) -> Check:
        if self.check is not None:
            return self.check
        if self.choices is not None:
            return choice(self.choices, self.name)
        if self.limits is not None:
            return integer(*self.limits)
        raise TypeError(f"setting {self.name}: no check, choices or limits")  # caught by settings.py

    @property
    def runs_column(self) -> str:
        """Its column in runs: a group's settings share one, named after the group (JSON)."""
        return self.column or self.group or self.name

    @property
    def part_name(self) -> str:
        return self.part or self.name


def integer(low: int, high: int) -> Check:
    word = {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")
    word = "an integer" if low < 0 else word

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"expected {word}, got {shown(value)}")
        if value > high:
            raise ValueError(f"expected at most {high}, got {shown(value)}")
        return value

    return check


def number(positive: bool, maximum: float | None = None) -> Check:
    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        # An integer beyond a float's range is refused here: math.isfinite and float() would raise.
        ok = ok and (isinstance(value, float) or abs(value) < 2**1000) and math.isfinite(value)
        if ok and (value <= 0 if positive else value < 0):
            ok = False
        if ok and maximum is not None and value >= maximum:
            ok = False
        if not ok:
            word = "a positive number" if positive else "a non-negative number"
            if maximum is not None:
                word += f" below {maximum:g}"
            raise ValueError(f"expected {word}, got {shown(value)}")
        return float(value)

    return check


def choice(options: tuple[str, ...], what: str) -> Check:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise ValueError(f"unknown {what} {shown(value)} (known: {', '.join(options)})")
        return value

    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


def true_or_unset(value: Any) -> bool | None:
    """A flag whose false is stored as None, so the configurations from before it keep their hash."""
    return boolean(value) or None


def folder_path(value: Any) -> str:
    # A NUL cannot be in a path: the operating system would refuse it, Python with a ValueError.
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError(f"expected a folder path, got {shown(value)}")
    return value

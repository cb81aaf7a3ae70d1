"""Values a setting is written in, read and shown: sizes (512MiB), CPU lists ("0-3,6"), and how a
bad value is quoted in a one-line error (cut short, control characters escaped).

A validator of run_config.py returns the normalised value or raises ValueError with the text that
follows ``key:`` in the error; the functions here raise the same way.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from orchestrator.text.terminal import safe_line

MAX_CPUS = 8192  # Linux's largest NR_CPUS: CPU numbers are 0 to 8191
MAX_SIZE = 2**62  # bytes, for memory budgets: 4 EiB, far beyond any machine, far below 2**63

SIZE_UNITS = {
    "": 1 << 20,  # a bare number means MiB
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def cut(text: str, limit: int = 80) -> str:
    """Text for a one-line error message: control characters escaped, cut short where it is long
    (a pasted file, a 10,000-digit number)."""
    text = safe_line(text)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} characters)"


def shown(value: Any) -> str:
    """A value for an error message, cut short: a 5000-digit integer is not worth printing whole
    (and Python refuses to convert one above 4300 digits to text)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    return cut(repr(value))


# ASCII digits only: \d and str.isdigit also accept other scripts' digits and superscripts.
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*", re.ASCII)
_CPU_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
# Longer text is no size or CPU number bench accepts; refusing it first keeps the regexes and the
# integer conversion (Python refuses above 4300 digits) cheap on any input.
_MAX_NUMBER_TEXT = 64
CPUS_EXAMPLE = 'expected CPU numbers such as [0, 1] or "0-3,6"'


def parse_size(value: Any) -> int:
    """Bytes from a size such as ``512MiB``, ``2GiB`` or ``1.5G``; a bare number means MiB."""
    amount: Fraction | None = None
    unit: str | None = ""
    if isinstance(value, int) and not isinstance(value, bool):
        amount = Fraction(value)
    elif isinstance(value, float) and math.isfinite(value):
        amount = Fraction(value)
    elif isinstance(value, str) and len(value) <= _MAX_NUMBER_TEXT:
        match = _SIZE.fullmatch(value)
        unit = match.group(2).lower() if match else None
        amount = Fraction(match.group(1)) if match else None
    if amount is None or unit not in SIZE_UNITS:
        raise ValueError(
            f"expected a size such as 512MiB or 2GiB (a bare number means MiB), got {shown(value)}"
        )
    size = int(amount * SIZE_UNITS[unit])  # exact: a Fraction neither rounds nor overflows
    if size <= 0:
        raise ValueError(f"expected a positive size, got {shown(value)}")
    if size > MAX_SIZE:
        raise ValueError(f"expected a size up to 4 EiB (2**62 bytes), got {shown(value)}")
    return size


def format_size(size: int | None) -> str:
    if size is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} B"


def parse_cpus(value: Any) -> str:
    """A canonical CPU list ("0-3,6") from a list of numbers, one number, or a list string."""
    if isinstance(value, int) and not isinstance(value, bool):
        items: list[Any] = [value]
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    else:
        raise ValueError(f"{CPUS_EXAMPLE}, got {shown(value)}")
    return format_cpus(_cpu_numbers(items, value))


def _cpu_numbers(items: list[Any], original: Any) -> set[int]:
    cpus: set[int] = set()
    for item in items:
        low, high = _cpu_range(item, original)
        if not 0 <= low <= high < MAX_CPUS:
            word = f"CPU numbers from 0 to {MAX_CPUS - 1}, a range low-high"
            raise ValueError(f"expected {word}, got {shown(original)}")
        # Bounded by MAX_CPUS above: a range such as 0-999999999 is refused, never built.
        cpus.update(range(low, high + 1))
    if not cpus:
        raise ValueError("expected at least one CPU")
    return cpus


def _cpu_range(item: Any, original: Any) -> tuple[int, int]:
    if isinstance(item, int) and not isinstance(item, bool):
        return item, item
    match = _CPU_ITEM.fullmatch(item) if isinstance(item, str) and len(item) <= _MAX_NUMBER_TEXT else None
    if match is None:
        raise ValueError(f"{CPUS_EXAMPLE}, got {shown(original)}")
    return int(match.group(1)), int(match.group(2) or match.group(1))


def cpu_set(text: str) -> set[int]:
    """The CPU numbers of a canonical list."""
    return _cpu_numbers(text.split(","), text)


def format_cpus(cpus: set[int]) -> str:
    ranges: list[str] = []
    for cpu in sorted(cpus):
        if ranges and ranges[-1].split("-")[-1] == str(cpu - 1):
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{cpu}"
        else:
            ranges.append(str(cpu))
    return ",".join(ranges)

"""Render rows as a terminal table, markdown, CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from typing import Any

FORMATS = ("table", "markdown", "csv", "json")


def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        # Past `digits` integer digits, %g would switch to exponents: whole numbers read better.
        # (format() with a ready spec: a long report calls this a million times.)
        return format(value, _G[digits]) if abs(value) < _LIMIT[digits] else format(value, ",.0f")
    return str(value)


_G = {digits: f".{digits}g" for digits in range(1, 18)}
_LIMIT = {digits: 10**digits for digits in range(1, 18)}


def mib(value: Any) -> str:
    """Bytes as MiB, for a column whose header carries the unit."""
    return "—" if value is None else number(value / (1 << 20))


class Column:
    """A header (with its unit) and how to get the cell's text and raw value from a row."""

    def __init__(self, header: str, key: str, fmt: Callable[[dict[str, Any]], str] | None = None):
        self.header, self.key = header, key
        self.fmt = fmt or (lambda row: number(row.get(key)))


def render(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[Column],
    fmt: str,
    document: dict[str, Any] | None = None,
) -> str:
    if fmt == "json":
        return json.dumps(document if document is not None else list(rows), indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([c.header for c in columns])
        for row in rows:
            writer.writerow(["" if row.get(c.key) is None else row.get(c.key) for c in columns])
        return out.getvalue().rstrip("\n")
    # Column by column, then one format string per line: a 100,000-row report renders in a second.
    texts = [list(map(c.fmt, rows)) for c in columns]
    headers = [c.header for c in columns]
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        escaped = [[t.replace("|", "\\|") for t in column] for column in texts]
        lines += ["| " + " | ".join(r) + " |" for r in zip(*escaped, strict=True)]
        return "\n".join(lines)
    widths = [max(len(h), max(map(len, column), default=0)) for h, column in zip(headers, texts, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths).format
    lines = [line(*headers).rstrip(), "  ".join("-" * w for w in widths)]
    lines += [line(*r).rstrip() for r in zip(*texts, strict=True)]
    return "\n".join(lines)


def mib_column(header: str, key: str) -> Column:
    """A column of bytes shown as MiB; CSV and JSON keep the bytes."""
    return Column(header, key, lambda row: mib(row.get(key)))

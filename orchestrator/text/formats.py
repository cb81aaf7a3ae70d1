"""Render rows as a terminal table, markdown, CSV or JSON.

Every cell and header may hold outside text (a worker's exception, a phase name, a sweep's name):
`render` makes each one safe for its format (orchestrator/text/terminal.py), so no report has to.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator.text.terminal import markdown_cell, safe_line

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
        # ensure_ascii (the default): every control and non-ASCII character is a \u escape.
        return json.dumps(document if document is not None else list(rows), indent=2, default=str)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([csv_cell(c.header) for c in columns])
        writer.writerows(zip(*(_csv_column([row.get(c.key) for row in rows]) for c in columns), strict=True))
        return out.getvalue().rstrip("\n")
    # Column by column, then one format string per line: a 100,000-row report renders in a second.
    cell = markdown_cell if fmt == "markdown" else safe_line
    texts = [_cells(list(map(c.fmt, rows)), cell) for c in columns]
    headers = [cell(c.header) for c in columns]
    if fmt == "markdown":
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in zip(*texts, strict=True)]
        return "\n".join(lines)
    widths = [max(len(h), max(map(len, column), default=0)) for h, column in zip(headers, texts, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths).format
    lines = [line(*headers).rstrip(), "  ".join("-" * w for w in widths)]
    lines += [line(*r).rstrip() for r in zip(*texts, strict=True)]
    return "\n".join(lines)


def _cells(texts: list[str], cell: Callable[[str], str]) -> list[str]:
    # Escaping is per character, so a column whose joined text needs none has no cell that does:
    # one pass in C for the common case instead of a call per cell.
    joined = "".join(texts)
    if safe_line(joined) is joined and (cell is safe_line or not _MARKDOWN_SYNTAX.search(joined)):
        return texts
    return list(map(cell, texts))


_MARKDOWN_SYNTAX = re.compile(r"[&<>\\|\[\]]")


def _csv_column(values: list[Any]) -> list[Any]:
    text = "".join(v for v in values if isinstance(v, str))
    if safe_line(text) is text and not any(isinstance(v, str) and v.startswith(_FORMULA) for v in values):
        return ["" if v is None else v for v in values]
    return list(map(csv_cell, values))


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA = ("=", "+", "-", "@")


def csv_cell(value: Any) -> Any:
    """A CSV cell: numbers as they are; text on one line, terminal-safe, and never a formula.

    CSV is for machines, but is printed to terminals and opened in spreadsheets: control characters
    are shown as escapes (so every record is one line), and text a spreadsheet would evaluate
    gets a leading apostrophe, which spreadsheets read as "this is text". bench's own values never
    start so; only outside text (an exception message, a phase name) can.
    """
    if value is None:
        return ""
    if isinstance(value, int | float):
        return value
    text = safe_line(value)
    if text.startswith(_FORMULA) and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def mib_column(header: str, key: str) -> Column:
    """A column of bytes shown as MiB; CSV and JSON keep the bytes."""
    return Column(header, key, lambda row: mib(row.get(key)))

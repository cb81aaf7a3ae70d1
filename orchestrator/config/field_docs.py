"""What each setting means and which values it takes, in words: `bench train --help` and the
options made from settings read ``field_help``; docs/matrix.md's field table is ``table()``,
written there by ``python -m orchestrator.config.field_docs --write docs/matrix.md`` (a test holds
the page to it).

Everything here is derived from the declarations (settings.py): the allowed values from their
choices and limits, so neither help nor the page can drift from what the validators accept.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orchestrator.config.setting import Setting
from orchestrator.config.settings import BY_NAME, SETTINGS

# field -> what it does, as --help says it.
MEANINGS: dict[str, str] = {s.name: s.help for s in SETTINGS}


def allowed(field: str) -> str:
    """The values ``field`` takes, as help shows them."""
    setting = BY_NAME[field]
    if setting.choices is not None:
        return " | ".join(setting.choices)
    if setting.limits is not None:
        low, high = setting.limits
        return (f"{setting.also}, or " if setting.also else "") + f"an integer, {low} to {high}"
    if "bool" in setting.type:
        return "true | false"
    return setting.values


def field_help(field: str, default: object = None) -> str:
    """One option's help: what it does, its values, its default."""
    text = f"{MEANINGS[field]} Values: {allowed(field)}."
    return text + (f" Default: {default}." if default is not None else "")


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def readable(n: int) -> str:
    """An integer as the page writes it: 10⁹, 2²⁰, 2³² − 1, 1,000,000, 4096."""
    if n < 0:
        return "−" + readable(-n)
    for power in range(7, 19):
        if n == 10**power:
            return "10" + str(power).translate(_SUPERSCRIPT)
    for power in range(20, 64):
        if n in (2**power, 2**power - 1):
            return "2" + str(power).translate(_SUPERSCRIPT) + (" − 1" if n % 2 else "")
    return f"{n:,}" if n >= 10_000 else str(n)


def doc_values(setting: Setting) -> str:
    """The type column of docs/matrix.md."""
    if setting.doc_values:
        return setting.doc_values
    if setting.choices is not None:
        return " | ".join(f"`{c}`" for c in setting.choices)
    if setting.limits is not None:
        low, high = setting.limits
        also = f"`{setting.also}`, or " if setting.also else ""
        return f"{also}integer, {readable(low)} to {readable(high)}"
    if "bool" in setting.type:
        return "`true` | `false`"
    return setting.values


def doc_default(setting: Setting) -> str:
    if setting.doc_default:
        return setting.doc_default
    value = setting.default
    if value is None:
        return "none"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


HEADER = ("| key | type | default | meaning |", "|---|---|---|---|")


def table() -> str:
    """docs/matrix.md's field table, one row per setting in declaration order."""
    rows = list(HEADER)
    for s in SETTINGS:
        cells = (f"`{s.name}`", doc_values(s), doc_default(s), s.doc or s.help)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def replaced(page: str) -> str:
    """``page`` with its field table (the lines from HEADER to the first line not a row) replaced."""
    lines = page.splitlines(keepends=True)
    start = lines.index(HEADER[0] + "\n")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join(lines[:start]) + table() + "".join(lines[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print docs/matrix.md's field table, or write it there.")
    parser.add_argument("--write", type=Path, metavar="PAGE", help="replace the table in this page")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(table())
    else:
        args.write.write_text(replaced(args.write.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

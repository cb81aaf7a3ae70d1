"""docs/reference/schema.md: every table and column of schema.sql, with the comments written there.

schema.sql is the database's one source of truth; this reads its text for the comments (SQL keeps
none) and SQLite's own reading of it (``PRAGMA table_info``) for the tables and columns, so a
column the parser missed is an error here rather than a row missing from the page.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

TITLE = "# Database schema reference"
INTRO = (
    "Every table and column of `schema.sql`, the database's single source of truth, with the comments "
    "written beside them there. [schema.md](../schema.md) explains the database: versions, migration, "
    "PostgreSQL, what is trusted."
)
# The comment column of schema.sql: a comment-only line indented this far continues the comment of
# the column above it; one indented less heads the columns that follow (`-- version 6: ...`).
CONTINUATION_INDENT = 40
_CREATE = re.compile(r"CREATE TABLE (\w+) \(")
_KEYWORDS = ("PRIMARY KEY", "FOREIGN KEY", "UNIQUE", "CHECK", "CONSTRAINT")


@dataclass
class Column:
    name: str
    declared: str
    comment: str = ""
    heading: str = ""  # the comment line above it that heads a group of columns


@dataclass
class Table:
    name: str
    comment: str
    columns: list[Column] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)


def _comment(line: str) -> str:
    return line.strip().removeprefix("--").strip()


def parse(text: str) -> tuple[int, list[Table], list[str]]:
    """schema.sql's user_version, its tables in file order, and its indexes."""
    pragma = re.search(r"PRAGMA user_version = (\d+);", text)
    if pragma is None:
        raise ValueError("schema.sql: no PRAGMA user_version")
    version = int(pragma.group(1))
    tables: list[Table] = []
    indexes = re.findall(r"^CREATE INDEX (.+);$", text, re.M)
    above: list[str] = []  # comment lines just above a CREATE TABLE
    table: Table | None = None
    heading = ""
    for line in text.splitlines():
        stripped = line.strip()
        if table is None:
            match = _CREATE.match(stripped)
            if match:
                table, heading = Table(match.group(1), " ".join(above)), ""
            above = above + [_comment(line)] if stripped.startswith("--") else []
            continue
        if stripped.startswith(");"):
            tables.append(table)
            table = None
        elif stripped.startswith("--"):
            if line.index("--") >= CONTINUATION_INDENT and table.columns:
                table.columns[-1].comment += " " + _comment(line)
            else:
                heading = _comment(line)
        elif table.columns and _open(table.columns[-1].declared):  # a declaration over several lines
            column = table.columns[-1]
            code, _, comment = line.partition("--")
            column.declared = _closed(column.declared + " " + " ".join(code.split()))
            column.comment = " ".join((column.comment + " " + comment).split())
        elif stripped.startswith(_KEYWORDS):
            table.constraints.append(stripped.rstrip(","))
        elif stripped:
            table.columns.append(_column(line, heading))
            heading = ""
    return version, tables, indexes


def _open(declared: str) -> bool:
    return declared.count("(") > declared.count(")")


def _column(line: str, heading: str) -> Column:
    code, _, comment = line.partition("--")
    name, _, declared = code.strip().partition(" ")
    return Column(name, _closed(" ".join(declared.split())), comment.strip(), heading)


def _closed(declared: str) -> str:
    """The declaration without the comma that ends it, once its parentheses are closed."""
    return declared if _open(declared) else declared.rstrip(",")


def check_against_sqlite(text: str, tables: list[Table]) -> None:
    """Raise if the parse disagrees with SQLite's reading of the same text (names and order)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(text)
        for table in tables:
            names = [row[1] for row in db.execute(f"PRAGMA table_info({table.name})")]
            parsed = [c.name for c in table.columns]
            if names != parsed:
                raise ValueError(f"schema.sql: table {table.name}: parsed {parsed}, SQLite has {names}")
        found = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if found != {t.name for t in tables}:
            raise ValueError(
                f"schema.sql: parsed tables {[t.name for t in tables]}, SQLite has {sorted(found)}"
            )
    finally:
        db.close()


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_section(table: Table) -> list[str]:
    lines = [f"## {table.name}", "", table.comment, "", "| column | declared | comment |", "|---|---|---|"]
    for column in table.columns:
        if column.heading:  # a row of its own: a paragraph here would end the table
            lines.append(f"| *{cell(column.heading)}* | | |")
        lines.append(f"| `{column.name}` | `{cell(column.declared)}` | {cell(column.comment)} |")
    lines.append("")
    for constraint in table.constraints:
        lines += [f"Constraint: `{constraint}`.", ""]
    return lines


def page(text: str) -> str:
    version, tables, indexes = parse(text)
    check_against_sqlite(text, tables)
    lines = [TITLE, "", INTRO, "", f"Schema version (`PRAGMA user_version`): {version}.", ""]
    lines += [f"Tables: {', '.join(f'[{t.name}](#{t.name})' for t in tables)}.", ""]
    if indexes:
        lines += ["Indexes: " + "; ".join(f"`{i}`" for i in indexes) + ".", ""]
    for table in tables:
        lines += table_section(table)
    return "\n".join(lines)

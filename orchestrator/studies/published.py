"""A study's published table read from its CSV, as hostile input: every problem one line naming the
file, the line and the column.

A CSV is transcribed by hand from a paper, so it is checked for what hand transcription gets wrong
(a missing column, a cell left empty without a note, a number written with a comma) and for what a
hostile file would try (control characters that would reach a terminal through a report, a file
large enough to stall the loader). What bench cannot run (a framework or model it lacks) is refused,
or carried to the report as "not run here" where the study says so (`unknown: carry`); an empty
cell likewise (`missing: carry`), shown with the note the CSV gives for it.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field

from orchestrator.config.filters import parse_value
from orchestrator.config.values import cut
from orchestrator.errors import ConfigError
from orchestrator.studies.spec import ACCURACY_UNITS, Table

MAX_BYTES = 1 << 20  # the studies' tables are a few KiB
MAX_ROWS = 10_000
NOTE = "note"  # the optional column that says why a cell is empty
EPOCH = "epoch"  # an accuracy table's columns: the epoch after which it was read, not a setting
# Every C0 control character but tab, and DEL and the C1 block: none belongs in a transcribed table.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Cell:
    value: float | None
    note: str
    lacking: str = ""  # why bench cannot run it ("bench has no framework caffe"), where it cannot


@dataclass
class Published:
    """One table's figures: per column (model), per item (framework), the published cell (an item
    bench lacks carried with the reason it cannot run here); and the columns bench lacks."""

    table: Table
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    lacking: dict[str, str] = field(default_factory=dict)  # item or column value -> why

    def lacking_items(self) -> set[str]:
        """The items (frameworks) of its rows that bench cannot run."""
        return {item for cells in self.cells.values() for item, c in cells.items() if c.lacking}

    def ranked(self, column: str) -> dict[str, float]:
        """The column's published figures, each as a time (a rate inverted), for ordering."""
        found: dict[str, float] = {}
        for item, cell in self.cells.get(column, {}).items():
            if cell.value is not None:
                found[item] = 1 / cell.value if self.table.higher_is_faster else cell.value
        return found


def read_table(table: Table) -> Published:
    """The table's rows that its `where` keeps, checked; refused in one line."""
    label, text = _text(table)
    return _rows(table, label, text)


def _text(table: Table) -> tuple[str, str]:
    label = str(table.file)
    try:
        with open(table.file, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read published table: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{label}:1: the file is larger than {MAX_BYTES >> 10} KiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{label}:{line}: the file is not UTF-8 text") from None
    bad = _CONTROL.search(text)
    if bad:
        line = text[: bad.start()].count("\n") + 1
        raise ConfigError(f"{label}:{line}: a control character ({bad.group()!r}) in a published table")
    return label, text


def _kept(
    table: Table, label: str, text: str, wanted: list[str]
) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The header and the rows `where` keeps (each with its place, "file:line"), the file's shape
    checked: one header naming each column once, the `wanted` columns among them, every row whole."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        raise ConfigError(f"{label}:1: the file has no header line") from None
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ConfigError(f"{label}:1: {cut(twice[0])}: a column named twice in the header")
    missing = [c for c in dict.fromkeys([*wanted, *(k for k, _ in table.where)]) if c not in header]
    if missing:
        raise ConfigError(
            f"{label}:1: {missing[0]}: no such column (the header has {cut(', '.join(header), 200)})"
        )
    at = {name: header.index(name) for name in header}
    kept: list[tuple[str, list[str]]] = []
    try:
        for count, row in enumerate(reader, start=1):
            line = reader.line_num  # where the row ends: a quoted field may span lines
            if count > MAX_ROWS:
                raise ConfigError(f"{label}:{line}: more than {MAX_ROWS} rows")
            if not row:
                continue
            if len(row) != len(header):
                raise ConfigError(f"{label}:{line}: {len(row)} fields where the header has {len(header)}")
            if all(row[at[k]] == v for k, v in table.where):
                kept.append((f"{label}:{line}", row))
    except csv.Error as exc:
        raise ConfigError(f"{label}:{reader.line_num}: csv: {exc}") from None
    return header, kept


def _rows(table: Table, label: str, text: str) -> Published:
    header, kept = _kept(table, label, text, [table.items, table.columns, table.value])
    at = {name: header.index(name) for name in header}
    found = Published(table)
    for where, row in kept:
        _keep(found, row, at, where)
    if not found.cells and not found.lacking:
        raise ConfigError(f"{label}: no row matches the table {table.name}'s where")
    return found


def read_rows(table: Table) -> tuple[list[str], list[dict[str, str]]]:
    """A published-only table (spec.Table.published_only): its header and the rows `where` keeps,
    as the CSV gives them, each figure of its `value` column checked as a number."""
    label, text = _text(table)
    header, kept = _kept(table, label, text, [table.value])
    rows: list[dict[str, str]] = []
    for where, row in kept:
        cells = {name: row[i].strip() for i, name in enumerate(header)}
        _number(cells[table.value], f"{where}: {table.value}")
        rows.append(cells)
    if not rows:
        raise ConfigError(f"{label}: no row matches the table {table.name}'s where")
    return header, rows


def _keep(found: Published, row: list[str], at: dict[str, int], where: str) -> None:
    table = found.table
    item, column = row[at[table.items]].strip(), row[at[table.columns]].strip()
    note = row[at[NOTE]].strip() if NOTE in at else ""
    lacking = ""
    if table.columns == EPOCH and not (column.isascii() and column.isdigit() and 0 < int(column) <= 10**4):
        raise ConfigError(f"{where}: {EPOCH}: {cut(repr(column))} is not an epoch (1 to 10000)")
    for setting, name in ((table.columns, column), (table.items, item)):
        if setting == EPOCH:
            continue
        try:
            parse_value(setting, name, "published")  # typed as --only types text: batch 32 is 32
        except ConfigError:
            if table.unknown == "refuse":
                message = f"{where}: {setting}: bench has no {cut(name)} (the table may say unknown: carry)"
                raise ConfigError(message) from None
            if setting == table.columns:  # a whole column bench cannot run: said once, under the table
                found.lacking[name] = f"bench has no {setting} {name}"
                return
            why = dict(table.absent).get(name)
            lacking = f"bench has no {setting} {name}" + (f" ({why})" if why else "")
    text = row[at[table.value]].strip()
    if not text:
        if table.missing == "refuse":
            raise ConfigError(f"{where}: {table.value}: an empty cell (the table may say missing: carry)")
        if not note:
            raise ConfigError(f"{where}: {table.value}: an empty cell needs a note saying why")
        value: float | None = None
    else:
        value = _number(text, f"{where}: {table.value}")
        if table.unit in ACCURACY_UNITS and value > 1:
            raise ConfigError(f"{where}: {table.value}: {cut(repr(text))} is not an accuracy (0 to 1)")
    cells = found.cells.setdefault(column, {})
    if item in cells:
        raise ConfigError(f"{where}: {item} {column} given twice")
    cells[item] = Cell(value, note, lacking)


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {cut(repr(text))} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: {cut(repr(text))} is not a positive figure")
    return value

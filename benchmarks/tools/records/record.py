"""A record: one measurement as it was taken (date, machine, versions, command) and its table.

A record is a JSON file in docs/records/, named by its id. Records of the same measurement form a
chain: a newer one names the one it replaces in `supersedes`, and the page shows the newest with
the older ones listed, so a re-measurement replaces a figure openly instead of editing it away.
Where the docs gave a table without its command or date, the record says `not recorded`: a
record transcribes what was measured, it never guesses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOT_RECORDED = "not recorded"
_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TEXT_FIELDS = ("measurement", "title", "date", "machine", "versions", "page", "summary")


class RecordError(ValueError):
    """A record file that cannot be read, or a folder of records that does not hold together."""


@dataclass(frozen=True)
class Record:
    id: str
    measurement: str  # the key of the page's marker: <!-- record: MEASUREMENT -->
    title: str
    date: str  # YYYY-MM-DD, the day it was measured, or NOT_RECORDED where the docs gave none
    when: str  # the hours or sessions, where the docs gave them; "" otherwise
    machine: str
    versions: str
    commands: tuple[str, ...]  # () where the docs gave none: rendered as "not recorded"
    supersedes: str  # the id of the record this one replaces, or ""
    page: str  # the page that shows it, relative to the repository
    summary: str  # one line for the page's "current figures"
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def _text(data: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise RecordError(f"{where}: `{key}` must be a non-empty string")
    return value


def parse(data: object, where: str) -> Record:
    """A record from a file's JSON, every field checked; `where` names the file in errors."""
    if not isinstance(data, dict):
        raise RecordError(f"{where}: a record is a JSON object")
    fields = {key: _text(data, key, where) for key in _TEXT_FIELDS}
    if not _DATE.match(fields["date"]) and fields["date"] != NOT_RECORDED:
        raise RecordError(f"{where}: `date` must be YYYY-MM-DD or {NOT_RECORDED!r}, not {fields['date']!r}")
    commands = data.get("commands")
    if commands == NOT_RECORDED:
        commands = []
    if not isinstance(commands, list) or not all(isinstance(c, str) and c for c in commands):
        raise RecordError(f"{where}: `commands` is a list of commands, or {NOT_RECORDED!r}")
    columns, rows = data.get("columns"), data.get("rows")
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise RecordError(f"{where}: `columns` is a non-empty list of strings")
    if not isinstance(rows, list) or not rows:
        raise RecordError(f"{where}: `rows` is a non-empty list of rows")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, list) or len(row) != len(columns) or not all(isinstance(c, str) for c in row):
            raise RecordError(f"{where}: row {number} is not {len(columns)} strings, one a column")
    return Record(
        id=_text(data, "id", where),
        when=_text(data, "when", where, required=False),
        commands=tuple(commands),
        supersedes=_text(data, "supersedes", where, required=False),
        columns=tuple(columns),
        rows=tuple(tuple(row) for row in rows),
        note=_text(data, "note", where, required=False),
        **fields,
    )


def load(path: Path) -> Record:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path.name}: not a readable JSON file: {exc}") from exc
    record = parse(data, path.name)
    if record.id != path.stem or not _ID.match(record.id):
        raise RecordError(f"{path.name}: `id` must be the file's name without .json ({path.stem})")
    return record


def load_folder(folder: Path) -> list[Record]:
    """Every record of the folder, checked to hold together (see `chains`)."""
    records = [load(p) for p in sorted(folder.glob("*.json"))]
    chains(records)
    return records


def chains(records: list[Record]) -> dict[str, list[Record]]:
    """Each measurement's records, newest first: one chain of `supersedes` a measurement, so
    exactly one record of it is current and every older one is superseded by a named record."""
    by_id = {r.id: r for r in records}
    found: dict[str, list[Record]] = {}
    for measurement in sorted({r.measurement for r in records}):
        own = [r for r in records if r.measurement == measurement]
        replaced = {r.supersedes for r in own if r.supersedes}
        for r in own:
            if r.supersedes and r.supersedes not in by_id:
                raise RecordError(f"{r.id}.json: supersedes {r.supersedes}, which is not a record")
            if r.supersedes and by_id[r.supersedes].measurement != measurement:
                raise RecordError(f"{r.id}.json: supersedes {r.supersedes}, a record of another measurement")
        heads = [r for r in own if r.id not in replaced]
        if len(heads) != 1:
            names = ", ".join(r.id for r in heads)
            raise RecordError(
                f"measurement {measurement}: {len(heads)} current records ({names}); "
                "a newer one names the one it replaces in `supersedes`"
            )
        chain = [heads[0]]
        while chain[-1].supersedes and len(chain) <= len(own):  # bounded: a cycle ends it
            chain.append(by_id[chain[-1].supersedes])
        if len(chain) != len(own):
            raise RecordError(f"measurement {measurement}: its records are not one chain of `supersedes`")
        found[measurement] = chain
    return found

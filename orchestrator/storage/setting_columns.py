"""Each setting of a run as a SQL expression over the runs table: its own column, or, for the fault
worker's settings, its part of the one JSON column they share (runs.fault, schema 13), read alike on
SQLite and PostgreSQL. The reports select and filter configurations through these, so a setting
reads back as it was before the fold: `fault` the fault's name, `after_steps` a number; and a whole
runs row reads as it did, the fault value spread over the columns it replaced (run_columns).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement

from orchestrator.config.settings import BY_NAME, FAULT_PARTS
from orchestrator.storage.migrate import FOLDED_FAULT_COLUMNS

_TYPES: dict[str, sa.types.TypeEngine[Any]] = {
    "int": sa.BigInteger(),
    "float": sa.Float(),
    "bool": sa.Integer(),
    "str": sa.Text(),
}


class JsonPart(ColumnElement[Any]):
    """One key of a JSON object stored as text, typed as the setting is (a boolean as 0 or 1, as
    the integer columns held them)."""

    inherit_cache = False  # built per query; the key is a declared name, not a parameter

    def __init__(self, column: ColumnElement[Any], part: str, kind: str) -> None:
        if not part.isidentifier():  # written into the SQL text: only declared names reach here
            raise ValueError(f"not a setting's part name: {part!r}")
        self.column, self.part, self.kind = column, part, kind
        self.type = _TYPES[kind]


@compiles(JsonPart)
def _sqlite(element: JsonPart, compiler: Any, **kw: Any) -> str:
    # SQLite's json_extract gives the JSON value in its own type: text, integer, real; true is 1.
    return f"json_extract({compiler.process(element.column, **kw)}, '$.{element.part}')"


@compiles(JsonPart, "postgresql")
def _postgresql(element: JsonPart, compiler: Any, **kw: Any) -> str:
    text = f"(CAST({compiler.process(element.column, **kw)} AS JSON) ->> '{element.part}')"
    cast = {"int": "BIGINT", "float": "DOUBLE PRECISION", "bool": "BOOLEAN"}.get(element.kind)
    if cast is None:
        return text
    value = f"CAST({text} AS {cast})"
    return f"CAST({value} AS INTEGER)" if element.kind == "bool" else value


def setting_column(runs: sa.Table, name: str) -> ColumnElement[Any]:
    """The setting ``name`` of each run: its column, or its part of its group's JSON column."""
    setting = BY_NAME[name]
    column = runs.c[setting.runs_column]
    if not setting.group:
        return column
    return JsonPart(column, setting.part_name, setting.type.split(" | ")[0])


# A column the fault value replaced (schema 13), by the part of the value that holds it now.
_SPREAD = {column: part for part, column in FOLDED_FAULT_COLUMNS}


def run_column(runs: sa.Table, name: str) -> ColumnElement[Any]:
    """A column of a runs row as the reports read it: its own, or (`exit_code_setting`,
    `after_steps`, `fault`: the fault's name, ...) its part of the fault value, labelled so."""
    part = _SPREAD.get(name)
    if part is None:
        return runs.c[name]
    kind = BY_NAME[FAULT_PARTS[part]].type.split(" | ")[0]
    return JsonPart(runs.c.fault, part, kind).label(name)


# Where those columns stood: in place of runs.fault and after it, after sample_interval (the hold_*
# settings, schema 3) and after replicas (fault_replica, schema 9). A row reads in its old order.
_PLACES = {
    "fault": ("fault", "exit_code_setting", "seconds", "after_steps", "ignore_sigterm"),
    "sample_interval": (
        "sample_interval",
        "hold_threads",
        "hold_memory_mb",
        "hold_seconds",
        "hold_child_memory_mb",
    ),
    "replicas": ("replicas", "fault_replica"),
}


def run_columns(runs: sa.Table) -> list[ColumnElement[Any]]:
    """Every column of a runs row, the fault value spread where its columns stood (run_column)."""
    places = {name: [run_column(runs, c) for c in columns] for name, columns in _PLACES.items()}
    return [c for column in runs.c for c in places.get(column.name, [column])]

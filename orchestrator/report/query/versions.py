"""Runs by the framework release they ran (issue 43): each run records the version its environment
had installed (environments.framework_version), and the version tables pool a configuration's runs
per release, never across releases.

A configuration here is its settings less `version` (a matrix's version setting changes the config
hash, which must not split one configuration's releases into unrelated rows), on one machine, in
the mode and precision it ran: `config_key`. Releases are ordered as PEP 440 orders them
(packaging.version); a recorded version that is not PEP 440 (a shared database's row may hold any
text) is ordered after those that are, by its numbers then its text, so a hostile value is shown,
sorted and never fatal. A run with no environments row (it failed before its worker reported) has
no release: UNRECORDED, last.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from orchestrator.config.filters import parse_id
from orchestrator.config.run_config import FIELD_NAMES, NOT_IDENTITY
from orchestrator.config.values import cut
from orchestrator.errors import ConfigError
from orchestrator.report.query.select import Selection, summary, summary_query
from orchestrator.storage.db import Database

Row = dict[str, Any]
# The matrix's version setting (where bench has one) names what was asked; the release is what ran.
VERSION_SETTING = "version"
# What a configuration is, as its config hash says, less the version: how often it runs is not.
SETTINGS = tuple(f for f in FIELD_NAMES if f != VERSION_SETTING and f not in NOT_IDENTITY)
UNRECORDED = "unrecorded"
VERSION_LIMIT = 40  # characters of a recorded version shown in a table; CSV and JSON keep it whole
PREFIX = "version:"


def release_key(version: str | None) -> tuple[Any, ...]:
    """Sort key: PEP 440 releases in their order, then other text by its numbers, None last."""
    if version is None:
        return (2,)
    try:
        return (0, Version(version))
    except (InvalidVersion, ValueError):  # ValueError: a number past Python's int() digit limit
        return (1, tuple(_piece(p) for p in re.findall(r"\d+|\D+", version)), version)


def _piece(text: str) -> tuple[int, int, str]:
    """Numbers compared as numbers ("r10" after "r9") by their length and digits, never through
    int() (a hostile row's 10,000 digits would raise); text as text; tagged so that a number and a
    word at one place compare by tag, never as a number against text."""
    if text.isascii() and text.isdigit():
        digits = text.lstrip("0") or "0"
        return (0, len(digits), digits)
    return (1, 0, text)


def release_text(version: str | None) -> str:
    """The release as a table shows it: cut (the renderers make it safe), or UNRECORDED."""
    return UNRECORDED if version is None else cut(version, VERSION_LIMIT)


def config_key(row: Row) -> tuple[Any, ...]:
    """What a configuration is across releases: machine, settings but the version, what ran."""
    return (row["machine"], row["ran_mode"], row["ran_precision"], *(row[f] for f in SETTINGS))


def release_summaries(db: Database, sel: Selection) -> list[Row]:
    """One summary (select.summary) per configuration and release, with `framework_version`: the
    release its runs recorded. Runs of one configuration that recorded different releases (a sweep
    before and after `bench env use`, or a version axis) are different cells."""
    env, runs = db.environments, db.runs
    query = summary_query(db, sel, env.c.framework_version).outerjoin(env, env.c.run_id == runs.c.id)
    cells: dict[tuple[Any, ...], list[Row]] = {}
    for row in db.rows(query):  # in group and run order: each cell's runs stay in run order
        cells.setdefault((*config_key(row), row["framework_version"]), []).append(row)
    found = []
    for rows in cells.values():
        cell = summary(rows)
        cell["framework_version"] = rows[-1]["framework_version"]
        found.append(cell)
    return found


def by_configuration(cells: Sequence[Row]) -> list[list[Row]]:
    """The cells grouped by configuration (first seen first), each group in release order."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for cell in cells:
        groups.setdefault(config_key(cell), []).append(cell)
    return [sorted(g, key=lambda c: release_key(c["framework_version"])) for g in groups.values()]


# --- `--compare version:A version:B` --------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One side of `--compare version:V`: the runs that recorded framework version V."""

    version: str

    def __str__(self) -> str:
        return f"{PREFIX}{self.version}"


def parse_side(text: str, option: str = "--compare") -> int | Release:
    """A side of --compare: a sweep id, or `version:V` (V as the runs recorded it, matched exactly)."""
    if not text.startswith(PREFIX):
        return parse_id(text, option)
    version = text[len(PREFIX) :].strip()
    if not version or len(version) > 200:
        raise ConfigError(f"{option} {cut(text)}: expected version:V, V a framework version (version:2.4.1)")
    return Release(version)


def split_sides(cells: Sequence[Row], a: Release, b: Release) -> tuple[dict[Any, Row], dict[Any, Row]]:
    """The cells that ran release A and those that ran B, each by its configuration."""
    sides: tuple[dict[Any, Row], dict[Any, Row]] = ({}, {})
    for cell in cells:
        for side, release in zip(sides, (a, b), strict=True):
            if cell["framework_version"] == release.version:
                side[config_key(cell)] = cell
    return sides

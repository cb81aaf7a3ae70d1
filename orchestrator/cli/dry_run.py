"""`bench run --dry-run`: the expanded configurations as a table of the settings in which they differ.

A label (`pytorch/small_cnn/cpu/bs32/sgd/lr0.01/t0`) names a fixed handful of fields, so two
configurations that differ in, say, `seed` or `image_size` looked the same; the columns here are
computed from the configurations themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from orchestrator.config.run_config import FIELD_NAMES, RunConfig
from orchestrator.report.query.select import varying
from orchestrator.text.formats import Column, render

FINISHED = "finished, skipped by --resume"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def common(configs: Sequence[RunConfig], differ: Sequence[str]) -> str:
    """`key=value` for every setting all configurations share (unset ones left out)."""
    if not configs:
        return ""
    first = configs[0].to_dict()
    shared = [name for name in FIELD_NAMES if name not in differ and first[name] is not None]
    return ", ".join(f"{name}={_text(first[name])}" for name in shared)


def listing(configs: Sequence[RunConfig], done: set[str]) -> list[str]:
    """The table's lines, the common settings, and how many will run."""
    differ = varying(c.to_dict() for c in configs)
    rows = [
        {
            "#": str(i),
            "config_hash": c.config_hash,
            **{name: _text(getattr(c, name)) for name in differ},
            "note": FINISHED if c.config_hash in done else "",
        }
        for i, c in enumerate(configs, start=1)
    ]
    columns = [Column(key, key, fmt=itemgetter(key)) for key in ("#", "config_hash", *differ)]
    if done:
        columns.append(Column("", "note", fmt=itemgetter("note")))
    to_run = len(configs) - len(done & {c.config_hash for c in configs})
    lines = render(rows, columns, "table").split("\n")
    lines.append(f"differ: {', '.join(differ) if differ else 'nothing (one configuration)'}")
    lines.append(f"common to all: {common(configs, differ)}")
    lines.append(f"{len(configs)} configurations, {to_run} to run")
    return lines

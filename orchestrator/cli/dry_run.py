"""`bench run --dry-run`: the expanded configurations as a table of the settings in which they differ.

A label (`pytorch/small_cnn/cpu/bs32/sgd/lr0.01/t0`) names a fixed handful of fields, so two
configurations that differ in, say, `seed` or `image_size` looked the same; the columns here are
computed from the configurations themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from orchestrator.config.run_config import FIELD_NAMES, RunConfig
from orchestrator.report.query.select import varying
from orchestrator.stats.planning import MOST_RUNS  # a plan past it says only "more than"
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
    # `runs` once is every configuration's lot unless the matrix says otherwise: said only when said.
    shared = [
        name
        for name in FIELD_NAMES
        if name not in differ and first[name] is not None and not (name == "runs" and first[name] == 1)
    ]
    return ", ".join(f"{name}={_text(first[name])}" for name in shared)


def _finished(config: RunConfig, done: Mapping[str, set[int]]) -> int:
    """How many of the configuration's runs an earlier sweep finished."""
    return len({k for k in done.get(config.config_hash, ()) if k < config.runs})


def _note(config: RunConfig, finished: int) -> str:
    if finished >= config.runs:
        return FINISHED
    return f"{finished} of {config.runs} runs finished" if finished else ""


Plan = tuple[list[int | None], str]  # runs each configuration needs, and what it rests on


def listing(
    configs: Sequence[RunConfig], done: Mapping[str, set[int]], plan: Plan | None = None
) -> list[str]:
    """The table's lines, the common settings, and how many runs will run; with ``plan``
    (report/query/spread.py), the runs each configuration needs and what that rests on."""
    differ = varying(c.to_dict() for c in configs)
    finished = [_finished(c, done) for c in configs]
    needed = plan[0] if plan else [None] * len(configs)
    rows = [
        {
            "#": str(i),
            "config_hash": c.config_hash,
            **{name: _text(getattr(c, name)) for name in differ},
            "note": _note(c, f),
            "runs needed": "?" if n is None else (f"> {n - 1:,}" if n > MOST_RUNS else str(n)),
        }
        for i, (c, f, n) in enumerate(zip(configs, finished, needed, strict=True), start=1)
    ]
    columns = [Column(key, key, fmt=itemgetter(key)) for key in ("#", "config_hash", *differ)]
    if plan:
        columns.append(Column("runs needed", "runs needed", fmt=itemgetter("runs needed")))
    if any(finished):
        columns.append(Column("", "note", fmt=itemgetter("note")))
    planned = sum(c.runs for c in configs)
    to_run = planned - sum(finished)
    lines = render(rows, columns, "table").split("\n")
    lines.append(f"differ: {', '.join(differ) if differ else 'nothing (one configuration)'}")
    lines.append(f"common to all: {common(configs, differ)}")
    if planned == len(configs):
        lines.append(f"{len(configs)} configurations, {to_run} to run")
    else:
        lines.append(f"{len(configs)} configurations, {planned} runs in all (runs), {to_run} to run")
    if plan:
        lines.append(plan[1])
    return lines

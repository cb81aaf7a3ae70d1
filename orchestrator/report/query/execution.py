"""What ran: each run's execution mode and precision as the reports name and group them (issue 24).

A run records the mode and precision it resolved to (runs.resolved_mode, resolved_precision,
schema 7). A run recorded before schema 7, or one that ended before its worker resolved them,
has NULL there: it ran the configuration's mode, or its framework's default
(workers.execution.DEFAULT_MODES), in its configuration's precision, or fp32. `ran_mode` and
`ran_precision` are that rule, in SQL, so that grouping happens in the query: every report pools a
configuration's runs only where they also ran the same mode and precision (select.summaries).

Labels say where the mode came from: `graph (default)` where the configuration left it unset,
`graph (asked eager)` where a run records another mode than it asked for (a silent fall-back, which
the adapters must never do: the report shows it rather than hide it). The stored text is outside
input: an unknown mode ('turbo') is shown as text (made safe and short), never used as a baseline.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.config.values import cut
from orchestrator.storage.db import Database
from profiler.disturbance import COMPILE_SLACK_SECONDS
from workers import frameworks
from workers.execution import DEFAULT_MODES, DEFAULT_PRECISION, MODES, PRECISIONS, default_mode
from workers.models import RECURRENT

Row = dict[str, Any]
# The run's columns of what ran, read with each run (select.RUN_METRICS).
COLUMNS = (
    "compile_seconds",
    "first_step_seconds",
    "warmup_steps_run",
    "steady_by",
    "target_reached",
    "target_seconds",
    "target_epoch",
    "compile_other_cpu_percent",
    "compile_load_seconds",
    "compile_disturbed",
)
DOC = "docs/fairness.md#execution-modes-and-precision"
LABEL_LIMIT = 40  # characters of a stored mode or precision shown; a stored value is outside input


def ran_mode(db: Database) -> Any:
    """SQL: the mode a run ran (its recorded one; else its configuration's; else its framework's default)."""
    r = db.runs
    # workers.execution.default_mode in SQL: a framework's own default on a GPU (TensorFlow's XLA)
    # unless the model is recurrent, else its default.
    on_cuda = [
        (sa.and_(r.c.framework == f.name, r.c.device == "cuda", r.c.model.notin_(RECURRENT)), f.cuda_mode)
        for f in frameworks.FRAMEWORKS
        if f.cuda_mode
    ]
    default = sa.case(
        *on_cuda,
        *((r.c.framework == framework, mode) for framework, mode in DEFAULT_MODES.items()),
        else_="eager",
    )
    return sa.func.coalesce(_text(r.c.resolved_mode), _text(r.c.mode), default)


def ran_precision(db: Database) -> Any:
    """SQL: the precision a run ran (its recorded one; else its configuration's; else fp32)."""
    r = db.runs
    return sa.func.coalesce(_text(r.c.resolved_precision), _text(r.c.precision), DEFAULT_PRECISION)


def _text(column: Any) -> Any:
    return sa.func.nullif(column, "")  # an empty text is no value


def mode_of(row: Row) -> str:
    """The mode a summary or a run's row ran, as select.summaries read it (Python's twin of ran_mode)."""
    ran = row.get("ran_mode", row.get("resolved_mode"))
    if isinstance(ran, str) and ran:
        return ran
    return row.get("mode") or default_mode(
        {key: row.get(key) for key in ("framework", "device", "model") if isinstance(row.get(key), str)}
    )


def precision_of(row: Row) -> str:
    ran = row.get("ran_precision", row.get("resolved_precision"))
    if isinstance(ran, str) and ran:
        return ran
    return row.get("precision") or DEFAULT_PRECISION


def mode_label(row: Row) -> str:
    """`eager`, `graph (default)`, or `graph (asked eager)` where the run did not run its own mode."""
    ran, asked = mode_of(row), row.get("mode")
    text = cut(ran, LABEL_LIMIT) if ran in MODES else f"unknown '{cut(ran, LABEL_LIMIT)}'"
    if asked is None:
        return f"{text} (default)"
    if asked != ran:
        return f"{text} (asked {cut(str(asked), LABEL_LIMIT)})"
    return text


def precision_label(row: Row) -> str:
    ran, asked = precision_of(row), row.get("precision") or DEFAULT_PRECISION
    text = cut(ran, LABEL_LIMIT) if ran in PRECISIONS else f"unknown '{cut(ran, LABEL_LIMIT)}'"
    return text if asked == ran else f"{text} (asked {cut(str(asked), LABEL_LIMIT)})"


def is_baseline(row: Row) -> bool:
    """Eager fp32, as asked and as ran: the run a framework's speed-ups are against."""
    return (
        mode_of(row) == "eager"
        and (row.get("mode") in (None, "eager"))
        and precision_of(row) == DEFAULT_PRECISION
        and (row.get("precision") or DEFAULT_PRECISION) == DEFAULT_PRECISION
    )


# --- pooling what the runs recorded ----------------------------------------------------------------


def seconds(value: Any) -> float | None:
    """A stored duration: a finite number of seconds ≥ 0, else nothing (a row any program wrote)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _median(values: Iterable[Any]) -> float | None:
    present = [v for v in map(seconds, values) if v is not None]
    return statistics.median(present) if present else None


def pooled(ok: Sequence[Row]) -> Row:
    """The ok runs' compile and first-step seconds (medians) and their time to target."""
    reached = [r for r in ok if r.get("target_reached") == 1 and seconds(r.get("target_seconds")) is not None]
    judged = [r for r in ok if r.get("target_reached") in (0, 1)]
    epochs = [r["target_epoch"] for r in reached if isinstance(r.get("target_epoch"), int)]
    return {
        "compile_seconds": _median(r.get("compile_seconds") for r in ok),
        "first_step_seconds": _median(r.get("first_step_seconds") for r in ok),
        "target_runs": len(judged),
        "target_reached_runs": len(reached),
        "target_seconds": _median(r.get("target_seconds") for r in reached),
        "target_epoch": min(epochs) if epochs and min(epochs) > 0 else None,
        **compile_disturbance(ok),
    }


def compile_disturbance(ok: Sequence[Row]) -> Row:
    """Pooled as the timings are (select.disturbance): the compile figure is disturbed if any run's
    was, quiet only if every run's was judged quiet; the load is the worst run's."""
    flags = [r.get("compile_disturbed") for r in ok]
    loads = [v for v in map(seconds, (r.get("compile_load_seconds") for r in ok)) if v is not None]
    flag = 1 if 1 in flags else (0 if flags and all(f == 0 for f in flags) else None)
    return {"compile_disturbed": flag, "compile_load_seconds": max(loads) if loads else None}


COMPILE_MARK_NOTE = (
    "! on compile s: other load during the warm-up may account for more of it than the figure can "
    "bear (bench inspect RUN says how many seconds; docs/profiler.md); !? not judged; re-run it with "
    "bench run --wait-idle SECONDS --retry-disturbed N"
)


def compile_mark(r: Row) -> str:
    """` !` on a compile figure other load may account for, ` !?` on an unjudged one that load could
    have inflated past the slack, else nothing."""
    value = seconds(r.get("compile_seconds"))
    if value is None:
        return ""
    if r.get("compile_disturbed") == 1:
        return " !"
    unjudged = r.get("compile_disturbed") is None and value > COMPILE_SLACK_SECONDS
    return " !?" if unjudged else ""


def target_text(row: Row) -> str:
    """`12.4 s (epoch 3)`, `not reached`, `reached in 1 of 2 runs: …`; blank without a target."""
    if row.get("target_accuracy") is None or not row.get("ok_runs"):
        return ""
    judged, reached = row.get("target_runs") or 0, row.get("target_reached_runs") or 0
    if not judged:
        return "not recorded"
    if not reached:
        return "not reached"
    epoch = f" (epoch {row['target_epoch']})" if row.get("target_epoch") else ""
    text = f"{row['target_seconds']:.3g} s{epoch}"
    return text if reached == judged else f"reached in {reached} of {judged} runs: {text}"


def _short(text: str) -> str:
    return cut(text, LABEL_LIMIT)


def modes_note(rows: Sequence[Row]) -> list[str]:
    """Where frameworks whose cells a table compares (the same settings but the framework, on one
    machine) ran in different modes or precisions: the note that says which, since those cells do
    not compare like with like (docs/fairness.md). An unset mode is each framework's default, so a
    table of the defaults always gets it; a sweep with `mode: graph` for all does not."""
    notes = []
    for what, ran in (("modes", mode_of), ("precisions", precision_of)):
        groups: dict[tuple[Any, ...], dict[str, str]] = {}
        for r in rows:
            if r.get("ok_runs"):
                key = (
                    r.get("fingerprint", r.get("machine")),
                    *(r.get(f) for f in FIELD_NAMES if f != "framework"),
                )
                groups.setdefault(key, {})[str(r["framework"])] = ran(r)
        differ: dict[str, set[str]] = {}
        for group in groups.values():
            if len(group) > 1 and len(set(group.values())) > 1:
                for framework, value in group.items():
                    differ.setdefault(framework, set()).add(value)
        if differ:
            text = ", ".join(f"{f} {'/'.join(sorted(map(_short, vs)))}" for f, vs in differ.items())
            notes.append(
                f"note: frameworks compared here ran in different {what} ({text}): not like with like; "
                f"compare within a mode and precision with bench report --table modes; {DOC}"
            )
    return notes

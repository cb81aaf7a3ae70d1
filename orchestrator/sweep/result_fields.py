"""What a run left, as the runs table's columns: its epochs' timing (summarise), where its event
stream stopped (where_it_died), and its result's execution, warm-up and time-to-target fields
(columns).

The worker wrote them: outside input (docs/security.md). Each value is kept only where it has the
type its column means (a count, a finite number of seconds, a flag, short text), anything else is
stored as NULL rather than failing the run, whose timings stand on their own; the execution object
is stored as its JSON re-encoded by bench (recording.fit bounds it), never as the worker's bytes.
A run that ended before it reported them still has the mode and precision its configuration
resolves to (workers/execution.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from orchestrator.config import samples
from orchestrator.config.run_config import RunConfig
from workers import execution as modes

TEXT_LIMIT = 300  # characters of steady_by kept
# Of the execution object: nesting kept (deeper values become a note), characters of each string,
# and of the whole JSON (past it, a note replaces the object: cut JSON would not be JSON).
EXECUTION_DEPTH = 8
EXECUTION_STRING = 2000
EXECUTION_CHARS = 32 << 10


def columns(
    config: RunConfig, result: dict[str, Any] | None, events: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The runs columns these fields fill, from an ok or failed run's result (None: no result); a
    run that failed after its warm-up has the warm-up's figures from its `steady` event."""
    result = result if isinstance(result, dict) else {}
    given = result.get("execution")
    execution = given if isinstance(given, dict) else {}
    warmup = _dict(result.get("warmup"))
    if not warmup:
        steady: dict[str, Any] = next((e for e in reversed(events) if e.get("event") == "steady"), {})
        warmup = steady
        result = {"first_step_loss": steady.get("first_step_loss"), **result}
    target = _dict(result.get("target"))
    settings = config.to_dict()
    row: dict[str, Any] = {
        "resolved_mode": _choice(execution.get("mode"), modes.MODES) or modes.mode_of(settings),
        "resolved_precision": _choice(execution.get("precision"), modes.PRECISIONS)
        or modes.precision_of(settings),
        "execution": _json(execution) if execution else None,
        "compile_seconds": _seconds(warmup.get("compile_seconds")),
        "first_step_seconds": _seconds(warmup.get("first_step_seconds")),
        "warmup_steps_run": _count(warmup.get("steps")),
        "steady_by": _text(warmup.get("steady_by")),
        "first_step_loss": _number(result.get("first_step_loss")),
        "target_reached": None,
        "target_seconds": None,
        "target_epoch": None,
    }
    if config.target_accuracy is not None and isinstance(target.get("reached"), bool):
        row["target_reached"] = int(target["reached"])
        if target["reached"]:
            row["target_seconds"] = _seconds(target.get("seconds"))
        row["target_epoch"] = _count(target.get("epoch"))
    return row


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _choice(value: Any, allowed: tuple[str, ...]) -> str | None:
    """A mode or precision name the worker reported, only where it is one bench knows."""
    return value if isinstance(value, str) and value in allowed else None


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _seconds(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and number >= 0 else None


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62
    return value if ok else None


def _text(value: Any) -> str | None:
    """Short text, stored as it came (every command that shows it escapes it: text/terminal.py)."""
    if not isinstance(value, str):
        return None
    return value if len(value) <= TEXT_LIMIT else value[: TEXT_LIMIT - 3] + "..."


def _json(value: dict[str, Any]) -> str:
    """The execution object re-encoded: plain JSON values only, nesting, strings and size bounded."""
    text = json.dumps(_plain(value, 0), sort_keys=True, allow_nan=False)
    if len(text) <= EXECUTION_CHARS:
        return text
    return json.dumps(
        {"bench": f"the worker's execution object: {len(text):,} characters, more than bench keeps"}
    )


def _plain(value: Any, depth: int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and len(value) > EXECUTION_STRING:
        return value[: EXECUTION_STRING - 3] + "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth >= EXECUTION_DEPTH:
        return f"({type(value).__name__} nested deeper than {EXECUTION_DEPTH})"
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


def where_it_died(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last phase, epoch and completed step the event stream shows."""
    phase = epoch = step = None
    for event in events:
        if event.get("event") == "phase":
            phase, step = event.get("phase"), None
            epoch = event.get("epoch", epoch)
        elif event.get("event") == "step":
            epoch, step = event.get("epoch"), event.get("step")
    # The worker wrote these: only what the columns can hold is kept.
    return {
        "last_phase": phase[:200] if isinstance(phase, str) else None,
        "last_epoch": _small_int(epoch),
        "last_step": _small_int(step),
    }


def _small_int(value: Any) -> int | None:
    return value if type(value) is int and abs(value) < 1 << 62 else None


def summarise(epochs: list[dict[str, Any]]) -> dict[str, Any]:
    """Timing over the timed epochs (all repeats, extra ones included: samples.run_summary); loss
    and accuracy of the last configured epoch (an extra one is not evaluated)."""
    row = samples.run_summary(epochs)
    if not row:
        return {}
    configured = [e for e in epochs if not e.get("extra")] or epochs
    last = configured[-1]
    row.update(
        steps_per_epoch=last.get("steps"),
        final_train_loss=last.get("train_loss"),
        final_val_accuracy=last.get("val_accuracy"),
    )
    return row

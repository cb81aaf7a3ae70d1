"""The orchestrator's part of `trace: kernels`: nsys around a cuda run, and the trace a run left.

The worker chooses and drives the tracer (workers/trace.py); the orchestrator only decides whether
Nsight Systems wraps the worker (a cuda run, nsys on PATH and able to make a report), reads nsys's
export back afterwards, and collects the trace from result.json, or from kernels.json when the run
failed after writing it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.outcomes import RESULT_LIMIT
from profiler import nsys

KERNELS_FILE = "kernels.json"
BACKEND_VARIABLE = "BENCH_TRACE_BACKEND"  # workers/trace.py NSYS_VARIABLE
# What is kept of a trace the worker wrote: distinct kernel or operator names (a real trace has
# hundreds to a few thousand), the length of one (C++ template names run to a few thousand
# characters), and its notes.
MAX_RECORDS = 100_000
MAX_NAME = 16_384
MAX_NOTES = 100


def wrap(config: RunConfig, cmd: list[str], env: dict[str, str]) -> tuple[list[str], str | None]:
    """The worker command (under nsys where it can trace this run), and why nsys is not used."""
    if config.trace != "kernels" or config.device != "cuda":
        return cmd, None
    problem = nsys.unusable()
    if problem is not None:
        return cmd, f"nsys not used: {problem}"
    env[BACKEND_VARIABLE] = "nsys"
    return nsys.command(cmd), None


def collect(config: RunConfig, run_dir: Path, result: dict[str, Any] | None, note: str | None) -> dict | None:
    """The run's trace (backend, status, region seconds, records), or None if it left none."""
    if config.trace != "kernels":
        return None
    trace = (result or {}).get("trace") or _read(run_dir / KERNELS_FILE)
    if not isinstance(trace, dict):
        return None
    trace = dict(trace)
    notes = trace.get("notes")
    notes = [str(n) for n in notes[:MAX_NOTES]] if isinstance(notes, list) else []
    trace["notes"] = notes + ([note] if note else [])
    if trace.get("backend") == "nsys":
        export = run_dir / f"{nsys.REPORT}.sqlite"
        try:
            trace["records"] = nsys.records(export)
        except Exception as exc:  # sqlite3's errors, a missing or odd export: the run stays ok
            trace["status"] = f"failed: nsys export {export.name}: {exc}"
            trace["records"] = []
    return trace


def _read(path: Path) -> Any:
    """kernels.json as the worker left it: read only up to the bound on a result (a larger one is
    no trace), and anything that is not JSON is no trace either."""
    try:
        with open(path, "rb") as f:
            raw = f.read(RESULT_LIMIT + 1)
        return json.loads(raw.decode("utf-8", "replace")) if len(raw) <= RESULT_LIMIT else None
    except (OSError, ValueError, RecursionError):
        return None


def summary(config: RunConfig, trace: dict[str, Any] | None, outcome: str) -> dict[str, Any]:
    """The runs table's trace columns."""
    if config.trace != "kernels":
        return {}
    if trace is None:
        return {"trace_status": f"missing: the run ended {outcome} before its trace was read"}
    return {
        "trace_backend": trace.get("backend"),
        "trace_status": trace.get("status"),
        "trace_seconds": trace.get("region_seconds"),
    }


def records(trace: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The trace's records, each with its backend and device."""
    if not trace:
        return []
    backend, device = str(trace.get("backend") or ""), str(trace.get("device") or "")
    raw = trace.get("records")
    records = [r for r in raw[:MAX_RECORDS] if _usable(r)] if isinstance(raw, list) else []
    return [{"backend": backend, **r, "device": str(r.get("device") or device)} for r in records]


def _usable(record: Any) -> bool:
    """A record the kernels table can hold: a name of sane length, a count, a finite time. The
    worker (or nsys's export) is outside input; a record that is not one is left out, not fatal."""
    if not isinstance(record, dict) or not isinstance(record.get("name"), str):
        return False
    calls, seconds = record.get("calls") or 0, record.get("total_seconds") or 0.0
    return (
        len(record["name"]) <= MAX_NAME
        and type(calls) is int
        and 0 <= calls < 1 << 62
        and isinstance(seconds, (int, float))
        and not isinstance(seconds, bool)
        and 0 <= seconds < 1e12
    )

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

from orchestrator.config import RunConfig
from profiler import nsys

KERNELS_FILE = "kernels.json"
BACKEND_VARIABLE = "BENCH_TRACE_BACKEND"  # workers/trace.py NSYS_VARIABLE


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
    trace["notes"] = list(trace.get("notes") or []) + ([note] if note else [])
    if trace.get("backend") == "nsys":
        export = run_dir / f"{nsys.REPORT}.sqlite"
        try:
            trace["records"] = nsys.records(export)
        except Exception as exc:  # sqlite3's errors, a missing or odd export: the run stays ok
            trace["status"] = f"failed: nsys export {export.name}: {exc}"
            trace["records"] = []
    return trace


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
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
    backend, device = trace.get("backend") or "", trace.get("device") or ""
    return [
        {"backend": backend, "device": r.get("device") or device, **r} for r in trace.get("records") or []
    ]

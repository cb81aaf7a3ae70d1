"""Take a calibration (profiler/calibration.py) in a process of its own: bench's interpreter, one
thread, a time limit. Its output is read as outside input: only finite, positive numbers of the
expected names are kept; anything else makes the calibration an error with why, never a crash."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

from orchestrator.launch.lifecycle import THREAD_VARIABLES
from orchestrator.launch.sidecar import profiler_pythonpath
from orchestrator.text.terminal import safe_line
from profiler import disturbance
from profiler.calibration import FIGURES, figure

SPREADS = ("python_spread", "matmul_spread", "memory_spread")
TIMEOUT = 60.0
OUTPUT_BYTES = 4096


def parse(text: str) -> dict[str, Any]:
    """The figures of the calibration's output line, or {"error": why}."""
    try:
        data = json.loads(text[:OUTPUT_BYTES])
    except (ValueError, RecursionError):
        return {"error": f"its output is not JSON: {safe_line(text[:120])!r}"}
    if not isinstance(data, dict):
        return {"error": "its output is not a JSON object"}
    out: dict[str, Any] = {}
    for key in FIGURES:
        value = figure(data.get(key))
        if value is None:
            return {"error": f"its output has no usable {key}"}
        out[key] = value
    for key in (*SPREADS, "seconds"):
        spread = data.get(key)
        if isinstance(spread, int | float) and not isinstance(spread, bool) and math.isfinite(spread):
            out[key] = max(0.0, float(spread))
    return out


def take(timeout: float = TIMEOUT) -> dict[str, Any]:
    """One calibration: {"python_mops", "matmul_gflops", "memory_gbps", spreads, "seconds"} or
    {"error": why}."""
    env = dict(os.environ)
    for name in THREAD_VARIABLES:
        env[name] = "1"
    env["PYTHONPATH"] = profiler_pythonpath(env.get("PYTHONPATH"))
    before, own = disturbance.read_stat(), _bench_seconds()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "profiler.calibration"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"it took longer than {timeout:g} s"}
    except OSError as exc:
        return {"error": f"it could not start ({safe_line(exc)})"}
    # What else the machine ran meanwhile: its CPUs' busy time less bench's and the calibration's
    # own (a reaped child's CPU time is in os.times()).
    found = disturbance.share(before, disturbance.read_stat(), _cpus(), _bench_seconds() - own)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return {"error": f"it exited with status {proc.returncode}: {safe_line(last)[:200]}"}
    figures = parse(proc.stdout.strip())
    if "error" not in figures and found is not None:
        figures["other_cpu_percent"] = found.other_percent()
    return figures


def _bench_seconds() -> float:
    """CPU seconds of this process and of its children it has waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def describe(figures: dict[str, Any]) -> str:
    """The three figures in words, one line, and the other load beside them where it was past the
    limit that flags a run."""
    text = (
        f"python {figures['python_mops']:.1f} Mops/s, matmul {figures['matmul_gflops']:.1f} GFLOP/s, "
        f"memory {figures['memory_gbps']:.1f} GB/s (one thread)"
    )
    other = figures.get("other_cpu_percent")
    if other is not None and other > disturbance.OTHER_LIMIT:
        text += f"; beside other load ({other:.0f}% of the CPUs): not the machine's speed, left out"
    return text

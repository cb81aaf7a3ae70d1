"""Nsight Systems as the kernel tracer of a cuda run: the command around the worker, and its export read back.

`nsys profile` runs the whole worker and exports SQLite. The measured region is taken from the
worker's own NVTX ranges ("epoch N", pushed after the device is synchronised and popped after the
clock stops, workers/runner.py): a kernel counts when it ran inside one of them, so warm-up and
evaluation are left out without relying on nsys's capture-range options (which stop at the first
range unless told to repeat, and then write one report per range).

Unverified: on the GPU machines this project was lent, nsys was not on PATH and failed to produce a
report when tried, so usable() probes it once per process and the worker falls back to CUPTI.
"""

from __future__ import annotations

import functools
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPORT = "nsys-trace"  # in the run folder: nsys-trace.nsys-rep and nsys-trace.sqlite
PROBE_TIMEOUT = 180.0
# CUPTI's CUpti_ActivityMemcpyKind, as nsys stores it in copyKind.
COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}


def command(cmd: list[str], output: str = REPORT) -> list[str]:
    """The worker's command run under nsys, exporting SQLite beside its report."""
    return [
        "nsys",
        "profile",
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--export=sqlite",
        "--force-overwrite=true",
        "-o",
        output,
        *cmd,
    ]


@functools.lru_cache(maxsize=1)
def unusable() -> str | None:
    """Why nsys cannot trace here (None: it can): not on PATH, or it fails to make a report."""
    if shutil.which("nsys") is None:
        return "nsys is not on PATH"
    with tempfile.TemporaryDirectory(prefix="bench-nsys-") as tmp:
        cmd = command([sys.executable, "-c", "pass"], str(Path(tmp) / "probe"))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"nsys probe failed: {exc}"
        if not (Path(tmp) / "probe.sqlite").exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            return f"nsys made no report when probed: {tail[0]}"
    return None


def _text(conn: sqlite3.Connection, table: str) -> str:
    """The SQL for a table's name column: inline text in older exports, a StringIds reference in newer."""
    columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    return "text" if "text" in columns else "(SELECT value FROM StringIds WHERE id = textId)"


def _windows(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    text = _text(conn, "NVTX_EVENTS")
    rows = conn.execute(f"SELECT start, end, {text} FROM NVTX_EVENTS WHERE end IS NOT NULL")
    return [(start, end) for start, end, name in rows if name and str(name).startswith("epoch ")]


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _activities(conn: sqlite3.Connection) -> list[tuple[str, int, int]]:
    """(name, start, end) of every kernel, memcpy and memset in the export."""
    tables = _tables(conn)
    found: list[tuple[str, int, int]] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        query = (
            "SELECT s.value, k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName"
        )
        found += [(str(n), s, e) for n, s, e in conn.execute(query)]
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        rows = conn.execute("SELECT copyKind, start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        found += [(f"[CUDA memcpy {COPY_KINDS.get(k, k)}]", s, e) for k, s, e in rows]
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        found += [
            ("[CUDA memset]", s, e)
            for s, e in conn.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET")
        ]
    return found


def records(path: Path) -> list[dict[str, Any]]:
    """Per kernel name: calls and device seconds inside the worker's "epoch N" NVTX ranges."""
    conn = sqlite3.connect(path)
    try:
        windows = _windows(conn)
        if not windows:
            raise ValueError(f"{path}: no 'epoch N' NVTX ranges (was libnvToolsExt found by the worker?)")
        totals: dict[str, list[float]] = {}
        for name, start, end in _activities(conn):
            if any(low <= start and end <= high for low, high in windows):
                total = totals.setdefault(name, [0, 0.0])
                total[0] += 1
                total[1] += (end - start) / 1e9
    finally:
        conn.close()
    return [{"name": n, "calls": int(c), "total_seconds": s} for n, (c, s) in totals.items()]

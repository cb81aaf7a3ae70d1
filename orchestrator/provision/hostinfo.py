"""Facts about the machine a sweep runs on, and a fingerprint that keeps machines apart in reports."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from orchestrator import __version__

# The checkout bench runs from, if it runs from one (an editable install); an installed bench's
# modules are in site-packages, which no git repository of bench's holds.
REPO_ROOT = Path(__file__).resolve().parents[2]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _gpus() -> tuple[str | None, str | None]:
    """GPU names and driver from nvidia-smi where there is one (NVML comes with the profiler)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None, None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line]
    if not rows:
        return None, None
    return "; ".join(r[0] for r in rows), rows[0][-1]


def bench_version() -> str:
    try:
        return metadata.version("bench")
    except metadata.PackageNotFoundError:
        return __version__


def _is_checkout(root: Path) -> bool:
    """bench's own repository, not one that merely encloses an installed bench's site-packages."""
    return (root / ".git").exists() and (root / "pyproject.toml").is_file() and (root / "workers").is_dir()


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """What bench a sweep ran: the checkout's commit (with -dirty for uncommitted changes), or for
    an installed bench "bench <version> (installed)"."""
    if not _is_checkout(REPO_ROOT):
        return f"bench {bench_version()} (installed)"
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


@functools.lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    gpu_name, gpu_driver = _gpus()
    info = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "gpu_name": gpu_name,
        "gpu_driver": gpu_driver,
    }
    return info


def fingerprint(info: dict[str, Any] | None = None) -> str:
    """Same hardware and OS, same fingerprint: a short readable name plus a hash."""
    info = info or machine()
    keys = ("cpu_model", "cpu_count", "memory_bytes", "gpu_name", "platform")
    digest = hashlib.sha256(repr([info.get(k) for k in keys]).encode()).hexdigest()[:8]
    memory = (info.get("memory_bytes") or 0) / 2**30
    gpu = f", {info['gpu_name']}" if info.get("gpu_name") else ""
    return f"{info['cpu_model']} x{info['cpu_count']}, {memory:.0f} GiB{gpu} [{digest}]"

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


CPUINFO = Path("/proc/cpuinfo")

# The instruction-set features the frameworks' kernels are chosen by (oneDNN's and XNNPACK's CPU
# dispatch, MKL's code paths): a CPU with AVX-512 BF16 runs bf16 ~15× faster than one that emulates
# it (docs/fairness.md), so two CPUs that differ here are two machines. Only these, not every flag:
# the full list moves with the kernel and the hypervisor (mitigations, paravirtual features), and a
# kernel update must not make a machine another. x86 names as Linux writes them, then Arm's.
KERNEL_FLAGS = frozenset(
    {
        "sse4_2", "avx", "f16c", "fma", "avx2",
        "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
        "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
        "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
        "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme",
    }
)  # fmt: skip
# macOS's sysctl spells some of them otherwise (machdep.cpu.features, machdep.cpu.leaf7_features).
SYSCTL_NAMES = {"avx1.0": "avx", "sse4.2": "sse4_2", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16"}


def _cpuinfo_field(text: str, names: tuple[str, ...]) -> str | None:
    """The first processor's value of the first field named in `names` (cpuinfo repeats each
    field per logical CPU; they agree on one machine)."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in names:
            return value.strip()
    return None


def _cpuinfo() -> str | None:
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return None


def _cpu_model() -> str:
    text = _cpuinfo()
    model = _cpuinfo_field(text, ("model name",)) if text is not None else None
    return model or platform.processor() or platform.machine()


def _sysctl_flags() -> list[str] | None:
    """The fallback where there is no /proc/cpuinfo (macOS): sysctl's feature lists, or None."""
    sysctl = shutil.which("sysctl")
    if not sysctl:
        return None
    try:
        out = subprocess.run(
            [sysctl, "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return [SYSCTL_NAMES.get(f, f) for f in out.stdout.lower().split()]


def kernel_flags(listed: list[str] | None) -> list[str] | None:
    """The features of KERNEL_FLAGS among `listed`, sorted; None (unknown) stays None."""
    return None if listed is None else sorted(KERNEL_FLAGS.intersection(listed))


def _cpu_flags() -> list[str] | None:
    """What the CPU can execute, of KERNEL_FLAGS: /proc/cpuinfo's `flags` (x86) or `Features`
    (Arm), else sysctl's; None where neither says (a fingerprint then says "unknown", which is not
    the same as "none")."""
    text = _cpuinfo()
    field = _cpuinfo_field(text, ("flags", "Features")) if text is not None else None
    return kernel_flags(field.split() if field is not None else _sysctl_flags())


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
        "cpu_flags": _cpu_flags(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "gpu_name": gpu_name,
        "gpu_driver": gpu_driver,
    }
    return info


def fingerprint(info: dict[str, Any] | None = None) -> str:
    """Same hardware and OS, same fingerprint: a short readable name plus a hash. The hash covers
    the CPU's kernel-choosing features too (KERNEL_FLAGS), so one model name on two CPUs that
    execute different instructions (a VM that hides AVX-512) is two machines. A fingerprint
    recorded before the features were part of it (bench before issue 41) has another hash: the
    reports take it for another machine, and never pool it with a new one (docs/reports.md)."""
    info = info or machine()
    keys = ["cpu_model", "cpu_count", "memory_bytes", "gpu_name", "platform"]
    if info.get("cpu_flags") is not None:
        # Where the features are unknown the hash is the one bench gave before it read them: a
        # machine that cannot say keeps its fingerprint, and "unknown" never equals a known set.
        keys.append("cpu_flags")
    digest = hashlib.sha256(repr([info.get(k) for k in keys]).encode()).hexdigest()[:8]
    memory = (info.get("memory_bytes") or 0) / 2**30
    gpu = f", {info['gpu_name']}" if info.get("gpu_name") else ""
    return f"{info['cpu_model']} x{info['cpu_count']}, {memory:.0f} GiB{gpu} [{digest}]"

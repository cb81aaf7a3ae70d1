"""Swap in use by the watched process tree, where the machine has swap.

The measure is the processes' own swapped-out memory (``VmSwap`` in /proc/PID/status, summed over
the tree), not the system's swap in use: another program swapping does not slow this run, and
this run swapping does (a study found GoogLeNet at batch 256 four times slower once it swapped).
On a machine without swap nothing is recorded (None, not 0).
"""

from __future__ import annotations

from collections.abc import Iterable

import psutil

SOURCE = "process tree (VmSwap)"


def machine_has_swap() -> bool:
    try:
        return psutil.swap_memory().total > 0
    except (OSError, RuntimeError):
        return False


def process_swap(pid: int) -> int | None:
    """Bytes of one process swapped out, or None when it cannot be read (gone, other platform)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSwap:"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_swap(pids: Iterable[int]) -> int | None:
    values = [v for v in (process_swap(pid) for pid in pids) if v is not None]
    return sum(values) if values else None

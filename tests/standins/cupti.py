"""Stand-in, not a GPU: cupti-python's `cupti.cupti` module, delivering activity records it is given.

workers/cupti_trace.py registers two callbacks with CUPTI, enables three activity kinds around each
timed epoch and flushes at the end of it; CUPTI hands it lists of activity records. `StandInCupti`
does the same with records a test makes (`kernel`, `memcpy`, `memset`): a record is kept only
while its kind is enabled (as CUPTI records nothing of a disabled kind), and the kept ones are
handed to the completion callback when a buffer fills or on a flush. The shapes follow
cupti-python 13's documentation: `kind` and `copy_kind` are plain ints (its bindings say so),
`ActivityKind` and `ActivityMemcpyKind` integer enums with CUPTI's C values, `start` and `end`
nanoseconds on the device's clock, `name` the kernel's name as CUPTI gives it: mangled for a C++
kernel (kineto and TensorFlow's CUPTI tracer demangle it), as is for an extern "C" one.

Installed with `install(monkeypatch, standin)` as the modules `cupti` and `cupti.cupti`, so
`from cupti import cupti` finds it. Nothing here has been compared with a real CUPTI.
"""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest


class ActivityKind(enum.IntEnum):
    """CUpti_ActivityKind's values (the ones bench enables, and two it does not)."""

    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10


class ActivityMemcpyKind(enum.IntEnum):
    """CUpti_ActivityMemcpyKind's values."""

    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    HTOA = 3
    ATOH = 4
    ATOA = 5
    ATOD = 6
    DTOA = 7
    DTOD = 8
    HTOH = 9
    PTOP = 10


def kernel(name: str, start: int, end: int) -> types.SimpleNamespace:
    """A CONCURRENT_KERNEL record: the kernel ran on the device from start to end (ns)."""
    return types.SimpleNamespace(kind=int(ActivityKind.CONCURRENT_KERNEL), name=name, start=start, end=end)


def memcpy(copy_kind: int, start: int, end: int, nbytes: int = 0) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        kind=int(ActivityKind.MEMCPY), copy_kind=int(copy_kind), start=start, end=end, bytes=nbytes
    )


def memset(start: int, end: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(kind=int(ActivityKind.MEMSET), start=start, end=end, bytes=0)


def runtime_call(start: int, end: int) -> types.SimpleNamespace:
    """A RUNTIME API record, a kind bench does not enable: CUPTI would deliver it only if asked."""
    return types.SimpleNamespace(kind=int(ActivityKind.RUNTIME), start=start, end=end)


class StandInCupti:
    """Stand-in, not a GPU: the functions of `cupti.cupti` that workers/cupti_trace.py calls.

    `run(*records)` is the device doing work: the records of enabled kinds are kept; every
    `buffer_records` of them fill a buffer, handed over at once; a flush hands over the rest.
    `calls` records what the tracer asked, in order.
    """

    ActivityKind = ActivityKind
    ActivityMemcpyKind = ActivityMemcpyKind

    def __init__(self, buffer_records: int = 1000) -> None:
        self.buffer_records = buffer_records
        self.requested: Callable[[], Any] | None = None
        self.completed: Callable[[list[Any]], None] | None = None
        self.enabled: set[int] = set()
        self.pending: list[Any] = []
        self.calls: list[tuple[str, Any]] = []

    def activity_register_callbacks(
        self, requested: Callable[[], Any], completed: Callable[[list[Any]], None]
    ) -> None:
        self.calls.append(("register", None))
        self.requested, self.completed = requested, completed

    def activity_enable(self, kind: int) -> None:
        self.calls.append(("enable", int(kind)))
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.calls.append(("disable", int(kind)))
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(("flush", flag))
        self._deliver()

    def run(self, *records: Any) -> None:
        for record in records:
            if record.kind in self.enabled:
                self.pending.append(record)
            if len(self.pending) >= self.buffer_records:
                self._deliver()

    def _deliver(self) -> None:
        assert self.requested is not None and self.completed is not None, "no callbacks registered"
        size, limit = self.requested()  # CUPTI asks for a buffer before it fills one
        assert isinstance(size, int) and size > 0 and isinstance(limit, int) and limit >= 0
        batch, self.pending = self.pending, []
        if batch:
            self.completed(batch)


def install(monkeypatch: pytest.MonkeyPatch, standin: StandInCupti) -> StandInCupti:
    """`from cupti import cupti` gives the stand-in for the rest of the test."""
    package = types.ModuleType("cupti")
    package.cupti = standin  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setitem(sys.modules, "cupti.cupti", standin)  # type: ignore[arg-type]
    return standin

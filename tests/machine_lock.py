"""The suite on several pytest-xdist workers, and the tests that need the machine to themselves.

`./test.sh` runs the suite on two workers (`-n`, `--dist loadfile`: a module's tests stay on one
worker, so its module-scoped fixtures are built once). Most tests only check what bench records,
and run the same beside another test. A few measure the machine itself: a run beside a busy loop
that must be flagged (and one alone that must not be), `--wait-idle`, real calibrations. Those are
marked `quiet`, and while one runs no other test runs on any worker.

The lock is a readers-writer lock on two files, with flock(2):

- every other test holds `machine` shared for its setup, call and teardown;
- a quiet test holds `machine` exclusively;
- either first takes `gate` exclusively, a quiet test for as long as it runs and any other test
  just while it takes its shared hold. A quiet test that waits therefore waits for the tests
  running now, never for the ones that start after it asked (no starvation).

A module marked `holds_machine` keeps its shared hold from its first test to its last: its
fixtures keep processes running between its tests (a Ray cluster), which would be other load to a
quiet test on another worker.

A module-scoped fixture whose real runs must be quiet takes the machine alone for just those runs
(`with machine_lock.alone(request.config):`); the tests that then read its results need not.

Without xdist (`-n 0`, or a single test run) there is only one test at a time, and no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO

import pytest

QUIET = "quiet"
PLUGIN = "bench-machine-lock"
HOLDS_MACHINE = "holds_machine"


class MachineLock:
    """One worker's side of the lock. Hold modes: None, "shared", "exclusive"."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._gate: IO[bytes] = open(folder / "gate", "ab")  # noqa: SIM115  (held for the session)
        self._machine: IO[bytes] = open(folder / "machine", "ab")  # noqa: SIM115
        self.mode: str | None = None

    def hold(self, mode: str) -> None:
        if self.mode == mode:
            return
        self.release()
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        if mode == "exclusive":
            fcntl.flock(self._machine, fcntl.LOCK_EX)  # the gate stays taken until release()
        else:
            try:
                fcntl.flock(self._machine, fcntl.LOCK_SH)
            finally:
                fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.mode = mode

    def release(self) -> None:
        if self.mode is None:
            return
        fcntl.flock(self._machine, fcntl.LOCK_UN)
        if self.mode == "exclusive":
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self.mode = None

    def close(self) -> None:
        self.release()
        self._gate.close()
        self._machine.close()


def lock_folder() -> Path | None:
    """The folder every worker of this run shares, or None when there are no workers."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return Path(tempfile.gettempdir()) / f"bench-tests-{run}"


def _module_holds(item: pytest.Item) -> bool:
    return item.get_closest_marker(HOLDS_MACHINE) is not None


class Plugin:
    def __init__(self, folder: Path) -> None:
        self.lock = MachineLock(folder)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        self.lock.hold("exclusive" if item.get_closest_marker(QUIET) else "shared")
        try:
            yield
        finally:
            if not self._keep(item, nextitem):
                self.lock.release()

    def _keep(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        """Keep the hold for the next test: a quiet test's for the quiet test after it (it would
        wait again for whatever the other worker started meanwhile), a holds_machine module's shared
        hold until its last test."""
        if nextitem is None:
            return False
        if self.lock.mode == "exclusive":
            return nextitem.get_closest_marker(QUIET) is not None
        same_module = getattr(nextitem, "module", None) is getattr(item, "module", None)
        return _module_holds(item) and same_module and nextitem.get_closest_marker(QUIET) is None

    def pytest_sessionfinish(self) -> None:
        self.lock.close()


@contextlib.contextmanager
def alone(config: pytest.Config) -> Iterator[None]:
    """The machine to this block alone, then back to a shared hold: for a module-scoped fixture
    whose real runs must be quiet (their timings compared, their disturbance judged), while the
    tests that only read its results run beside others."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None:
        yield
        return
    lock: MachineLock = plugin.lock
    before = lock.mode
    lock.hold("exclusive")
    try:
        yield
    finally:
        lock.hold(before or "shared")


def configure(config: pytest.Config) -> None:
    """pytest_configure's part: the lock on an xdist worker (the markers are in pyproject.toml)."""
    folder = lock_folder()
    if folder is not None:
        config.pluginmanager.register(Plugin(folder), PLUGIN)

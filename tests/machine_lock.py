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

The lock is machine-wide: its files are at one fixed path (`BENCH_TEST_LOCK_DIR`, by default
`bench-tests-machine` in the temporary folder), so a second suite on the machine (another checkout's,
a `-n 0` run, a single test) takes the same lock and keeps out of a quiet test's way. Load the lock
cannot see (any other program) a quiet test measures before it starts: it waits for the machine to
be quiet (the threshold that flags a run disturbed, profiler/disturbance.py), for at most
`BENCH_TEST_QUIET_WAIT` seconds (default 120; 15 once a wait in this process has found the machine
busy to the end), and then skips with a reason that starts "machine busy": the machine was not fit
to measure, which says nothing of bench. That skip is on the suite's allow-list (tests/skip_guard.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import IO

import pytest

QUIET = "quiet"
PLUGIN = "bench-machine-lock"
HOLDS_MACHINE = "holds_machine"
BUSY = "machine busy"  # how a quiet test's skip starts when the machine stayed busy (tests/skip_guard.py)
FIRST_WAIT_SECONDS = 120.0
LATER_WAIT_SECONDS = 15.0


class MachineLock:
    """One worker's side of the lock. Hold modes: None, "shared", "exclusive"."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._gate: IO[bytes] = _lock_file(folder / "gate")
        self._machine: IO[bytes] = _lock_file(folder / "machine")
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


def _lock_file(path: Path) -> IO[bytes]:
    """Held for the session. Readable and writable by every user of the machine: the lock is
    machine-wide, and a file one user made must not stop another's suite."""
    handle = open(path, "ab")  # noqa: SIM115
    with contextlib.suppress(OSError):  # someone else's file: theirs to open up
        os.chmod(path, 0o666)
    return handle


def lock_folder() -> Path:
    """The one folder of the machine's lock (BENCH_TEST_LOCK_DIR, else a fixed temporary folder)."""
    folder = os.environ.get("BENCH_TEST_LOCK_DIR")
    if folder:
        return Path(folder)
    return Path(tempfile.gettempdir()) / "bench-tests-machine"


def runs_tests(config: pytest.Config) -> bool:
    """Whether this process runs tests: an xdist worker, or a run without workers. An xdist
    controller only hands them out (it must not hold the lock its workers wait for)."""
    if hasattr(config, "workerinput"):
        return True
    return not getattr(config.option, "numprocesses", None)


def _module_holds(item: pytest.Item) -> bool:
    return item.get_closest_marker(HOLDS_MACHINE) is not None


class Plugin:
    def __init__(self, folder: Path) -> None:
        self.lock = MachineLock(folder)
        self.quiet = QuietCheck()

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


class QuietCheck:
    """Before a quiet test (or a block that asked to be alone): wait for the other load on the
    machine's CPUs to drop to the disturbance threshold. The verdict is None (quiet) or the reason,
    starting BUSY, that the machine stayed busy."""

    def __init__(self, measure: Callable[[set[int]], float | None] | None = None) -> None:
        self.measure = measure
        self.found_busy = False

    def wait(self) -> str | None:
        from orchestrator.executors import idle
        from profiler import disturbance

        limit = float(
            os.environ.get("BENCH_TEST_QUIET_WAIT")
            or (LATER_WAIT_SECONDS if self.found_busy else FIRST_WAIT_SECONDS)
        )
        said: list[str] = []
        cpus = os.sched_getaffinity(0)
        if idle.wait_idle(cpus, limit, said.append, self.measure or idle.other_load):
            return None
        self.found_busy = True
        load = re.search(r"other load (\d+)%", said[-1]) if said else None
        figure = f" ({load.group(1)}% at the last look)" if load else ""
        return (
            f"{BUSY}: other load stayed above {disturbance.OTHER_LIMIT:g}% of the CPUs for {limit:g} s"
            f"{figure}; this test measures the machine, so it did not run"
        )


def check_quiet(config: pytest.Config) -> str | None:
    """This process's quiet check (see QuietCheck); for a test run without the plugin, a new one."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    return (plugin.quiet if plugin is not None else QuietCheck()).wait()


class Alone:
    """What `alone` found: `busy` is None, or why the machine was not quiet when the block began
    (its runs were then taken beside other load; a test that needs them quiet skips with it)."""

    def __init__(self, busy: str | None) -> None:
        self.busy = busy

    def require_quiet(self) -> None:
        if self.busy:
            pytest.skip(self.busy)


@contextlib.contextmanager
def alone(config: pytest.Config) -> Iterator[Alone]:
    """The machine to this block alone, then back to a shared hold: for a module-scoped fixture
    whose real runs must be quiet (their timings compared, their disturbance judged), while the
    tests that only read its results run beside others."""
    plugin = config.pluginmanager.get_plugin(PLUGIN)
    if plugin is None:
        yield Alone(check_quiet(config))
        return
    lock: MachineLock = plugin.lock
    before = lock.mode
    lock.hold("exclusive")
    try:
        yield Alone(plugin.quiet.wait())
    finally:
        lock.hold(before or "shared")


def configure(config: pytest.Config) -> None:
    """pytest_configure's part: the lock in each process that runs tests (the markers are in
    pyproject.toml)."""
    if runs_tests(config):
        config.pluginmanager.register(Plugin(lock_folder()), PLUGIN)


@pytest.fixture(autouse=True)
def quiet_machine(request: pytest.FixtureRequest) -> None:
    """A quiet test starts on a quiet machine, or skips saying the machine was busy."""
    if request.node.get_closest_marker(QUIET) is None:
        return
    busy = check_quiet(request.config)
    if busy:
        pytest.skip(busy)

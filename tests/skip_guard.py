"""No silent skip in CI: with BENCH_REQUIRE_NO_SKIPS=1 (set by .ci/run), a skipped test whose reason
is not on ALLOWED fails the run.

A skip is how a test says "this machine cannot show it": no PostgreSQL, one CPU, no Python 2. On a
developer's machine that is fair; in CI it would be a feature left unchecked while the run says it
passed. CI's machine is known, so each skip it may meet is named here with why it is not a hole.
The run's summary lists every skip either way, allowed or not.
"""

from __future__ import annotations

import os

import pytest

from tests.machine_lock import BUSY

PLUGIN = "bench-skip-guard"
ENV = "BENCH_REQUIRE_NO_SKIPS"

# A skip's reason starts with one of these, or CI fails. Keep it short: each is a check not made.
ALLOWED = {
    BUSY: "a quiet test found other load on the machine through its whole wait (tests/machine_lock.py): "
    "the machine was not fit to measure, which says nothing of bench",
    "unsupported: checked above": "tests/test_modes_tensorflow.py: a precision this CPU cannot run, "
    "which the test before it asserts is recorded unsupported with its reason",
}


def reason_of(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed(reason: str) -> bool:
    return any(reason.startswith(prefix) for prefix in ALLOWED)


class Guard:
    def __init__(self) -> None:
        self.stray: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = reason_of(report)
            if not allowed(reason):
                self.stray.append((report.nodeid, reason))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.stray and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if not self.stray:
            return
        terminalreporter.section(f"skips not allowed in CI ({ENV}=1)", red=True)
        for nodeid, reason in self.stray:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line(f"{len(self.stray)} skipped test(s) not on tests/skip_guard.py's ALLOWED")


def configure(config: pytest.Config) -> None:
    """pytest_configure's part: the guard where the run's results are gathered (not on a worker,
    whose reports the controller sees too)."""
    if os.environ.get(ENV) == "1" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Guard(), PLUGIN)

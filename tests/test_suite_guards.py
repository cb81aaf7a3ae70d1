"""The suite's own guards, each tested by planting what it guards against: a stray skip in a CI-mode
run (tests/skip_guard.py), and other load on the machine before a quiet test (tests/machine_lock.py).
Each runs a small generated suite in a real pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import machine_lock, skip_guard

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
    from tests import machine_lock, skip_guard
    from tests.machine_lock import quiet_machine  # noqa: F401

    def pytest_configure(config):
        machine_lock.configure(config)
        skip_guard.configure(config)
"""
INI = """
    [pytest]
    markers =
        quiet: quiet
        holds_machine: holds
"""


def run_suite(folder: Path, tests: str, *args: str, **env: str) -> tuple[int, str]:
    """A generated suite (this conftest, the given test file) under pytest; its exit code and output."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conftest.py").write_text(textwrap.dedent(CONFTEST).lstrip())
    (folder / "pytest.ini").write_text(textwrap.dedent(INI).lstrip())
    (folder / "test_generated.py").write_text(textwrap.dedent(tests).lstrip())
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environ.pop(skip_guard.ENV, None)
    environ.update(PYTHONPATH=str(REPO), BENCH_TEST_LOCK_DIR=str(folder / "lock"), BENCH_TEST_QUIET_WAIT="0")
    environ.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, proc.stdout + proc.stderr


SKIPS = """
    import pytest

    def test_runs(): pass

    def test_stray(): pytest.skip("no GPU on this machine")

    def test_busy(): pytest.skip("machine busy: other load stayed above 15%")
"""

ALLOWED_ONLY = """
    import pytest

    def test_runs(): pass

    def test_busy(): pytest.skip("machine busy: other load stayed above 15%")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_stray_skip_fails_a_ci_mode_run_and_is_named(tmp_path, workers):
    code, out = run_suite(tmp_path, SKIPS, *workers, BENCH_REQUIRE_NO_SKIPS="1")
    assert code == 1, out
    assert "skips not allowed in CI" in out
    assert "test_generated.py::test_stray: no GPU on this machine" in out
    assert "test_busy: machine busy" not in out  # on the allow-list
    assert "1 skipped test(s) not on tests/skip_guard.py's ALLOWED" in out


def test_outside_ci_mode_a_skip_is_only_listed(tmp_path):
    code, out = run_suite(tmp_path, SKIPS)
    assert code == 0, out
    assert "skips not allowed" not in out and "no GPU on this machine" in out


def test_allowed_skips_pass_a_ci_mode_run(tmp_path):
    code, out = run_suite(tmp_path, ALLOWED_ONLY, BENCH_REQUIRE_NO_SKIPS="1")
    assert code == 0, out
    assert "1 passed, 1 skipped" in out


def test_a_failing_ci_mode_run_keeps_its_own_exit_status(tmp_path):
    failing = SKIPS + "\n    def test_fails(): assert False\n"
    code, out = run_suite(tmp_path, failing, BENCH_REQUIRE_NO_SKIPS="1")
    assert code == 1 and "1 failed" in out, out


def test_the_allow_list_is_short_and_says_why():
    assert len(skip_guard.ALLOWED) <= 5
    assert all(len(why) > 40 for why in skip_guard.ALLOWED.values())


# --- a quiet test on a busy machine -----------------------------------------------------------


def test_the_quiet_check_waits_for_the_load_to_drop(monkeypatch):
    """With stand-in load figures (no machine measured): busy, busy, then quiet within the wait."""
    monkeypatch.setenv("BENCH_TEST_QUIET_WAIT", "60")
    figures = iter([80.0, 60.0, 3.0])
    check = machine_lock.QuietCheck(measure=lambda cpus: next(figures))
    assert check.wait() is None and not check.found_busy
    assert next(figures, None) is None  # it looked three times


def test_the_quiet_check_gives_up_at_its_limit_and_says_machine_busy(monkeypatch):
    monkeypatch.delenv("BENCH_TEST_QUIET_WAIT", raising=False)
    looks: list[float] = []

    def busy(cpus: set[int]) -> float:
        looks.append(time.monotonic())
        time.sleep(0.01)
        return 55.0

    check = machine_lock.QuietCheck(measure=busy)
    monkeypatch.setattr(machine_lock, "FIRST_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(machine_lock, "LATER_WAIT_SECONDS", 0.0)
    verdict = check.wait()
    assert verdict is not None and verdict.startswith(machine_lock.BUSY + ":"), verdict
    assert "55% at the last look" in verdict and "for 0.2 s" in verdict
    assert check.found_busy and looks[-1] - looks[0] >= 0.15
    # Once the machine was found busy to the end, the next quiet test waits the shorter time.
    looks.clear()
    assert check.wait() is not None and len(looks) == 1


QUIET_TEST = """
    import os
    import pytest

    @pytest.mark.quiet
    def test_measures_the_machine():
        open(os.environ["RAN"], "w").write("ran")
"""


def spin(seconds: float) -> subprocess.Popen:
    """A busy loop on one CPU for so many seconds: other load to a quiet test."""
    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.mark.quiet
@pytest.mark.slow
def test_a_busy_loop_before_a_quiet_test_makes_it_wait_then_say_machine_busy(tmp_path):
    ran = tmp_path / "ran"
    loop = spin(120)
    try:
        start = time.monotonic()
        code, out = run_suite(
            tmp_path, QUIET_TEST, BENCH_TEST_QUIET_WAIT="4", RAN=str(ran), BENCH_REQUIRE_NO_SKIPS="1"
        )
        waited = time.monotonic() - start
    finally:
        loop.kill()
        loop.wait()
    assert code == 0, out  # a busy machine is not a bench error, and its skip is allowed in CI
    assert "SKIPPED" in out and "machine busy: other load stayed above 15% of the CPUs for 4 s" in out, out
    assert not ran.exists()
    assert waited >= 4


@pytest.mark.quiet
@pytest.mark.slow
def test_a_quiet_test_runs_once_the_load_before_it_has_ended(tmp_path):
    ran = tmp_path / "ran"
    loop = spin(3)
    try:
        code, out = run_suite(tmp_path, QUIET_TEST, BENCH_TEST_QUIET_WAIT="120", RAN=str(ran))
    finally:
        loop.kill()
        loop.wait()
    assert code == 0 and "1 passed" in out, out
    assert ran.read_text() == "ran"

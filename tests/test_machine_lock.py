"""The suite's machine lock (tests/machine_lock.py): with flock on real files, and through a real
pytest-xdist run of a small generated suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from tests.machine_lock import MachineLock

REPO = Path(__file__).resolve().parent.parent


def holder(lock: MachineLock, mode: str) -> tuple[threading.Thread, threading.Event]:
    """Take the lock in a thread; the event is set once it is held."""
    held = threading.Event()

    def take() -> None:
        lock.hold(mode)
        held.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread, held


def test_shared_holds_share_and_an_exclusive_one_waits_for_them(tmp_path):
    a, b, c = (MachineLock(tmp_path) for _ in range(3))
    a.hold("shared")
    b.hold("shared")  # at once: shared holds share
    _, quiet = holder(c, "exclusive")
    assert not quiet.wait(0.3)
    a.release()
    assert not quiet.wait(0.3)  # b still holds
    b.release()
    assert quiet.wait(5)
    for lock in (a, b, c):
        lock.close()


def test_a_waiting_exclusive_hold_goes_before_shared_holds_asked_after_it(tmp_path):
    """A quiet test waits for the tests running now, never for those that start after it asked."""
    running, waiting, later = (MachineLock(tmp_path) for _ in range(3))
    running.hold("shared")
    _, quiet = holder(waiting, "exclusive")
    assert not quiet.wait(0.3)
    _, after = holder(later, "shared")
    assert not after.wait(0.3)  # the gate is the quiet test's
    running.release()
    assert quiet.wait(5) and not after.wait(0.3)
    waiting.release()
    assert after.wait(5)
    for lock in (running, waiting, later):
        lock.close()


SUITE = {
    "conftest.py": """
        from tests import machine_lock

        def pytest_configure(config):
            machine_lock.configure(config)
    """,
    "pytest.ini": """
        [pytest]
        markers =
            quiet: quiet
            holds_machine: holds
    """,
    "record.py": """
        import json, os, time

        def span(name, seconds):
            start = time.monotonic()
            time.sleep(seconds)
            line = json.dumps([name, start, time.monotonic()])
            with open(os.environ["SPANS"], "a") as f:
                f.write(line + "\\n")
    """,
    "test_a.py": """
        from record import span

        def test_a1(): span("a1", 0.6)
        def test_a2(): span("a2", 0.6)
        def test_a3(): span("a3", 0.6)
        def test_a4(): span("a4", 0.6)
    """,
    "test_b.py": """
        import pytest
        from record import span

        def test_b1(): span("b1", 0.4)

        @pytest.mark.quiet
        def test_b2(): span("quiet b2", 0.4)

        @pytest.mark.quiet
        def test_b3(): span("quiet b3", 0.4)

        def test_b4(): span("b4", 0.4)
    """,
    "test_c.py": """
        import pytest
        from record import span

        pytestmark = pytest.mark.holds_machine

        def test_c1(): span("held c1", 0.3)
        def test_c2(): span("held c2", 0.3)
        def test_c3(): span("held c3", 0.3)
    """,
    "test_d.py": """
        import pytest
        from record import span
        from tests import machine_lock

        @pytest.fixture(scope="module")
        def built(request):
            with machine_lock.alone(request.config):
                span("quiet fixture", 0.5)

        def test_d1(built): span("d1", 0.3)
        def test_d2(built): span("d2", 0.3)
    """,
}


def run_suite(folder: Path, *files: str) -> list[list]:
    """SUITE's files (or some of them) under `pytest -n 2`; each test's [name, start, end]."""
    for name, text in SUITE.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    spans_file = folder / "spans.jsonl"
    spans_file.unlink(missing_ok=True)
    env = {**os.environ, "SPANS": str(spans_file), "PYTHONPATH": f"{REPO}{os.pathsep}{folder}"}
    for name in [n for n in env if n.startswith("PYTEST_")]:  # this run's own xdist worker's, if any
        del env[name]
    # Its own lock (the machine's is held by this test), and no wait for a quiet machine: the
    # other worker of this suite may be busy beside it.
    env.update(BENCH_TEST_LOCK_DIR=str(folder / "lock"), BENCH_TEST_QUIET_WAIT="0")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-q",
            "-p",
            "no:cacheprovider",
            *files,
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads(line) for line in spans_file.read_text().splitlines()]


def overlap(x: list, y: list) -> bool:
    return x[1] < y[2] and y[1] < x[2]


def quiet_alone(spans: list[list]) -> None:
    quiet = [s for s in spans if s[0].startswith("quiet")]
    others = [s for s in spans if not s[0].startswith("quiet")]
    assert quiet
    for q in quiet:
        assert not any(overlap(q, o) for o in others), (q, spans)


@pytest.mark.slow
@pytest.mark.quiet  # that the others overlap depends on both workers getting a CPU
def test_quiet_tests_run_alone_and_the_others_side_by_side(tmp_path):
    """Quiet tests, and a fixture's block that asked to be alone, overlap no other test; a
    holds_machine module's tests keep quiet ones out from its first to its last; the rest overlap."""
    spans = run_suite(tmp_path)
    assert len(spans) == 14, spans
    quiet_alone(spans)
    held = [s for s in spans if s[0].startswith("held")]
    whole = ["held", min(s[1] for s in held), max(s[2] for s in held)]
    assert not any(overlap(q, whole) for q in spans if q[0].startswith("quiet")), (whole, spans)
    # and the rest did run side by side: two workers, not one after the other
    others = [s for s in spans if not s[0].startswith("quiet")]
    assert any(overlap(x, y) for x in others for y in others if x is not y), spans


@pytest.mark.slow
@pytest.mark.quiet  # as above
def test_a_fixture_alone_waits_for_the_test_beside_it(tmp_path):
    """Two modules that start together, one on each worker: the fixture's block that asked to be
    alone waits for the other module's test in flight (without the lock they overlap)."""
    spans = run_suite(tmp_path, "test_a.py", "test_d.py")
    assert len(spans) == 7, spans
    quiet_alone(spans)
    tests_a = [s for s in spans if s[0].startswith("a")]
    tests_d = [s for s in spans if s[0].startswith("d")]
    assert any(overlap(x, y) for x in tests_a for y in tests_d), spans  # side by side otherwise


def test_the_lock_is_machine_wide_unless_a_folder_is_given(monkeypatch, tmp_path):
    """One fixed folder for every suite on the machine (any checkout, with or without workers), so
    that a second suite keeps out of a quiet test's way; BENCH_TEST_LOCK_DIR for a suite of its own."""
    from tests import machine_lock

    monkeypatch.delenv("BENCH_TEST_LOCK_DIR", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "x")
    first = machine_lock.lock_folder()
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "y")
    assert machine_lock.lock_folder() == first == Path(tempfile.gettempdir()) / "bench-tests-machine"
    monkeypatch.setenv("BENCH_TEST_LOCK_DIR", str(tmp_path))
    assert machine_lock.lock_folder() == tmp_path


def test_only_an_xdist_controller_holds_no_lock():
    from tests import machine_lock

    class Config:
        def __init__(self, numprocesses, worker: bool) -> None:
            self.option = type("Option", (), {"numprocesses": numprocesses})()
            if worker:
                self.workerinput = {}

    assert machine_lock.runs_tests(Config(None, worker=False))  # no xdist: tests run here
    assert machine_lock.runs_tests(Config(0, worker=False))  # -n 0
    assert machine_lock.runs_tests(Config(2, worker=True))  # a worker
    assert not machine_lock.runs_tests(Config(2, worker=False))  # the controller

"""The suite's machine lock (tests/machine_lock.py): with flock on real files, and through a real
pytest-xdist run of a small generated suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
}


@pytest.mark.slow
def test_quiet_tests_run_alone_and_the_others_side_by_side(tmp_path):
    for name, text in SUITE.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    spans_file = tmp_path / "spans.jsonl"
    env = {**os.environ, "SPANS": str(spans_file), "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}"}
    for name in [n for n in env if n.startswith("PYTEST_")]:  # this run's own xdist worker's, if any
        del env[name]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    assert len(spans) == 11, spans

    def overlap(x: list, y: list) -> bool:
        return x[1] < y[2] and y[1] < x[2]

    quiet = [s for s in spans if s[0].startswith("quiet")]
    others = [s for s in spans if not s[0].startswith("quiet")]
    for q in quiet:
        assert not any(overlap(q, o) for o in others), (q, spans)
    held = [s for s in spans if s[0].startswith("held")]
    whole = ["held", min(s[1] for s in held), max(s[2] for s in held)]
    assert not any(overlap(q, whole) for q in quiet), (whole, spans)
    # and the rest did run side by side: two workers, not one after the other
    assert any(overlap(x, y) for x in others for y in others if x is not y), spans


def test_without_workers_there_is_no_lock(monkeypatch):
    from tests import machine_lock

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "x")
    assert machine_lock.lock_folder() is None
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert machine_lock.lock_folder() is not None

"""Shared fixtures: a fresh database and run folder per test, matrices written on the fly,
and the interpreters of the real framework environments."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests import machine_lock, skip_guard
from tests.drivers import framework_python
from tests.machine_lock import quiet_machine  # noqa: F401  (autouse: a quiet test starts on a quiet machine)

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    machine_lock.configure(config)
    skip_guard.configure(config)


@pytest.fixture(autouse=True)
def state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own folder of runs in flight (orchestrator/sweep/liveruns.py): a test's killed bench
    must not be found, ended and recorded by another test's (or another checkout's) bench run."""
    folder = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("BENCH_STATE_DIR", str(folder))
    # A sweep's calibration (about two seconds a sweep, docs/profiler.md) is off for the tests
    # that do not test it: tests/test_calibration.py turns it on.
    monkeypatch.setenv("BENCH_CALIBRATE", "0")
    return folder


@pytest.fixture(autouse=True)
def terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """One width for the live progress line, whatever terminal the suite runs in: it is cut to the
    terminal's width (shutil.get_terminal_size), 80 columns on a pytest-xdist worker, 100 where
    there is no terminal."""
    monkeypatch.setenv("COLUMNS", "120")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current directory: bench.db and bench-runs/ land here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BENCH_DB", raising=False)
    return tmp_path


@pytest.fixture
def write_matrix(workdir: Path):
    def write(text: str, name: str = "m.yaml") -> Path:
        path = workdir / name
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return write


@pytest.fixture
def cli():
    """Invoke the bench CLI in-process on the current directory; returns click's Result."""
    from orchestrator.cli.main import cli as bench_cli

    runner = CliRunner()

    def invoke(*args: str):
        # BENCH_DEBUG: a bug met by a test raises with its traceback instead of becoming the CLI's
        # one-line internal error (tests/test_hostile_parsers.py checks that line on its own).
        return runner.invoke(bench_cli, list(args), catch_exceptions=False, env={"BENCH_DEBUG": "1"})

    return invoke


def bench_command(*args: str) -> list[str]:
    """The bench CLI as a separate process (for real signals)."""
    return [sys.executable, "-c", "from orchestrator.cli.main import main; main()", *args]


def default_sigint() -> None:
    """preexec_fn for a bench process that a test interrupts with SIGINT: a shell starting the test
    run in the background (`cmd &`) leaves SIGINT ignored, and children inherit that, so Python
    would install no KeyboardInterrupt handler and the test's Ctrl-C would do nothing. SIGHUP
    likewise: under `nohup` it is ignored, and bench (rightly) keeps a signal ignored that was
    ignored when it started, so a test's SIGHUP would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.fixture(scope="session")
def pytorch_python() -> Path:
    return framework_python("pytorch")


def pyenv_python36() -> Path | None:
    """Python 3.6 from pyenv, as the development machines ship it (Singa needs it)."""
    if os.environ.get("BENCH_PYTHON36"):
        return Path(os.environ["BENCH_PYTHON36"])
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return None
    root = subprocess.run([pyenv, "root"], capture_output=True, text=True).stdout.strip()
    found = sorted(Path(root, "versions").glob("3.6*/bin/python3"))
    return found[-1] if found else None


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session (tests/postgres_server.py); skips without one,
    fails instead where BENCH_REQUIRE_POSTGRES=1 (CI)."""
    from tests import postgres_server

    bin_dir = postgres_server.binaries()
    missing = None
    if bin_dir is None:
        missing = "PostgreSQL is not installed (apt-get install postgresql)"
    else:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            missing = "psycopg is not installed (pip install -e '.[postgres]')"
    if missing:
        if os.environ.get("BENCH_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{missing}, and BENCH_REQUIRE_POSTGRES=1")
        pytest.skip(missing)
    with postgres_server.running(bin_dir) as server:
        yield server


BACKENDS = ["sqlite", "postgresql"]


def new_database(request: pytest.FixtureRequest, folder: Path) -> str:
    """A fresh, empty results database on the backend request.param names: a SQLite file in
    folder, or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{folder / 'bench.db'}"
    return request.getfixturevalue("pg_server").create_database()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return new_database(request, tmp_path)

"""The worker core runs on Python 3.6 (Singa's interpreter) as well as on 3.11."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import pyenv_python36

pytestmark = pytest.mark.slow
WORKERS = Path(__file__).resolve().parent.parent / "workers"


@pytest.fixture(scope="module")
def python36() -> Path:
    python = pyenv_python36()
    if python is None or not python.exists():
        pytest.fail(
            "no Python 3.6 found (pyenv's 3.6.x, or BENCH_PYTHON36): the worker core must be "
            "tested on it; install it with `pyenv install 3.6.15`"
        )
    version = subprocess.run([str(python), "--version"], capture_output=True, text=True).stdout
    assert version.startswith("Python 3.6"), version
    return python


def test_every_worker_module_parses_on_python36(python36):
    files = sorted(str(p) for p in WORKERS.rglob("*.py"))
    assert len(files) >= 8
    code = "import ast, sys\nfor f in sys.argv[1:]:\n    ast.parse(open(f).read(), f)\n"
    proc = subprocess.run([str(python36), "-c", code, *files], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_sweep_with_the_worker_on_python36(python36, write_matrix, cli, workdir, monkeypatch):
    monkeypatch.setenv("BENCH_PYTHON_FAULT", str(python36))
    write_matrix("""
        settings: {dataset_size: 64, batch_size: 8, epochs: 2, timeout: 5}
        include:
          - {framework: fault, fault: ok}
          - {framework: fault, fault: raise, after_steps: 4}
          - {framework: fault, fault: segfault, after_steps: 3}
          - {framework: fault, fault: oom}
          - {framework: fault, fault: hang, after_steps: 1, timeout: 2}
    """)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(workdir / "bench.db")
    rows = conn.execute(
        "SELECT r.outcome, r.signal_name, r.traceback IS NOT NULL, e.python_version "
        "FROM runs r JOIN environments e ON e.run_id = r.id ORDER BY r.id"
    ).fetchall()
    assert [r[0] for r in rows] == ["ok", "error", "crash", "oom", "timeout"]
    assert rows[2][1] == "SIGSEGV" and rows[2][2]
    assert all(r[3].startswith("3.6") for r in rows)

"""bench installed from a wheel, as `pip install .` or `pipx install .` leaves it: no checkout
beside it. The wheel carries schema.sql and the pinned requirements; a sweep run from another
folder stores its runs and reports them; and a worker's interpreter is given bench's `workers`
package and nothing else of bench's environment.

The wheel is built from this checkout without build isolation and installed without its
dependencies into a fresh virtual environment; the dependencies come from the suite's own
environment through a .pth file (appended after the new site-packages, whose bench therefore
wins; a .pth file's folder has its own .pth files left unread, so the checkout's editable bench
stays out), so the test needs no registry and takes seconds.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
MATRIX = """
name: installed
settings:
  dataset_size: 64
  batch_size: 8
  epochs: 1
  timeout: 20
include:
  - {framework: fault, fault: ok}
  - {framework: fault, fault: raise, after_steps: 1}
"""
# What the worker's interpreter must not find: bench's orchestrator and profiler, and packages of
# bench's environment.
FOREIGN = ("orchestrator", "profiler", "yaml", "click", "sqlalchemy", "numpy", "psutil")


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: status {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def site_packages(python: Path, env: dict[str, str]) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(run([str(python), "-c", code], python.parent, env).strip())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh environment with bench installed from a wheel, and the environment to run it in."""
    root = tmp_path_factory.mktemp("installed")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "BENCH_DEBUG")}
    env["XDG_CACHE_HOME"] = str(root / "cache")
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run([*pip, "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)], root, env)
    (wheel,) = wheels.glob("bench-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    run([*pip, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)], root, env)
    deps = sysconfig.get_paths()["purelib"]
    (site_packages(python, env) / "bench-test-deps.pth").write_text(deps + "\n")
    return root, env


def test_the_wheel_is_imported_from_the_new_environment(installed):
    root, env = installed
    python = root / "venv" / "bin" / "python"
    code = "import orchestrator as o, workers as w, profiler as p; print(o.__file__, w.__file__, p.__file__)"
    for path in run([str(python), "-c", code], root, env).split():
        assert Path(path).is_relative_to(site_packages(python, env)), path


def test_the_schema_and_the_pins_travel_in_the_package(installed):
    root, env = installed
    python = root / "venv" / "bin" / "python"
    code = textwrap.dedent("""
        from orchestrator import shipped
        from orchestrator.provision import envs
        print(shipped.path("schema.sql")); print(envs.requirements_file("pytorch"))
    """)
    schema, pins = (Path(p) for p in run([str(python), "-c", code], root, env).split())
    site = site_packages(python, env)
    assert schema == site / "orchestrator" / "_data" / "schema.sql"
    assert schema.read_text() == (REPO / "schema.sql").read_text()
    assert pins == site / "orchestrator" / "_data" / "envs" / "pytorch.txt"
    assert pins.read_text() == (REPO / "envs" / "pytorch.txt").read_text()
    shipped = sorted(p.name for p in pins.parent.iterdir())
    assert shipped == sorted(p.name for p in (REPO / "envs").glob("*.txt"))


def test_a_sweep_and_its_report_from_another_folder(installed):
    root, env = installed
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "m.yaml").write_text(MATRIX)
    # The fault worker's interpreter: a bare environment, as a framework's is, which has neither
    # bench nor bench's dependencies; the worker must come from its PYTHONPATH alone.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "bare")], check=True)
    bare = root / "bare" / "bin" / "python"
    env = {**env, "BENCH_PYTHON_FAULT": str(bare)}
    bench = str(root / "venv" / "bin" / "bench")
    run([bench, "run", "--matrix", "m.yaml"], elsewhere, env, timeout=300)

    conn = sqlite3.connect(elsewhere / "bench.db")
    rows = conn.execute("SELECT outcome, worker_command FROM runs ORDER BY id").fetchall()
    commits = {r[0] for r in conn.execute("SELECT bench_commit FROM environments")}
    conn.close()
    assert [r[0] for r in rows] == ["ok", "error"]
    assert commits == {"bench 0.1.0 (installed)"}

    # The worker's PYTHONPATH: one folder in the cache holding the workers package and nothing else.
    (pythonpath,) = {r[1].split("PYTHONPATH=", 1)[1].split()[0] for r in rows}
    folder = Path(pythonpath)
    assert folder.parent == root / "cache" / "bench" / "workers", folder
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == ["workers"]
    site = site_packages(root / "venv" / "bin" / "python", env)
    assert not folder.is_relative_to(site) and not folder.is_relative_to(REPO)
    probe = "import importlib.util as u, workers; print(workers.__file__)\n"
    probe += "print([n for n in %r if u.find_spec(n)])"
    shown = run([str(bare), "-c", probe % (FOREIGN,)], elsewhere, {**env, "PYTHONPATH": pythonpath})
    shown = shown.splitlines()
    assert Path(shown[0]).is_relative_to(folder), shown
    assert shown[1] == "[]", f"the worker's interpreter finds bench's {shown[1]}"

    report = run([bench, "report"], elsewhere, env)
    assert "fault" in report and "error" in report, report

"""`bench env use` / `bench env forget`: an existing interpreter as a framework's environment.

Real interpreters throughout: the PyTorch environment bench made, registered as if the user had
brought it; broken ones (a missing file, a script that is no Python, a Python 2, a Python without
the framework) are refused in one line and leave the registrations as they were.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from orchestrator.provision import envs

MATRIX = """
name: external-env
settings:
  min_time: 0  # timing is not the point here: no extra epochs
  min_steps: 1
  dataset_size: 12
  val_fraction: 0.25
  batch_size: 3
  epochs: 1
  warmup_steps: 1
  image_size: 32
  classes: 3
  timeout: 300
axes:
  framework: [pytorch]
  model: [small_cnn]
"""


@pytest.fixture
def env_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty env dir: bench has made no environment there, so only a registration can serve."""
    folder = tmp_path / "envs"
    monkeypatch.setenv("BENCH_ENV_DIR", str(folder))
    monkeypatch.delenv("BENCH_PYTHON_PYTORCH", raising=False)
    return folder


def _runs(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    query = (
        "SELECT r.outcome, r.reason, r.worker_command, e.python_executable, e.framework_version, "
        "e.python_version FROM runs r LEFT JOIN environments e ON e.run_id = r.id ORDER BY r.id"
    )
    return [dict(r) for r in conn.execute(query)]


@pytest.mark.slow
@pytest.mark.framework
def test_a_registered_interpreter_runs_the_sweep_and_is_recorded(
    cli, write_matrix, workdir, env_dir, pytorch_python
):
    result = cli("env", "use", "pytorch", "--python", str(pytorch_python))
    assert result.exit_code == 0, result.output
    assert f"pytorch: uses {pytorch_python}" in result.output and "cpu build" in result.output

    # the pinned releases' rows: other releases' rows (pytorch@2.4.1, …) name the framework too
    rows = json.loads(cli("env", "list", "--format", "json").output)
    listed = {r["framework"]: r for r in rows if r.get("release") is None}
    assert listed["pytorch"]["status"] == "ok"
    assert listed["pytorch"]["location"] == "external"
    assert listed["pytorch"]["build"] == "cpu"
    assert listed["pytorch"]["framework_version"].startswith("2.")
    assert "external (bench env use)" in cli("env", "list").output

    result = cli("run", "--matrix", str(write_matrix(MATRIX)))
    assert result.exit_code == 0, result.output
    (run,) = _runs(workdir / "bench.db")
    assert run["outcome"] == "ok", run
    assert run["python_executable"] == str(pytorch_python)
    assert run["framework_version"] == listed["pytorch"]["framework_version"]
    assert str(pytorch_python) in run["worker_command"]

    # bench env setup leaves a registered framework alone: no environment is made beside it.
    result = cli("env", "setup", "pytorch")
    assert result.exit_code == 0 and "registered with bench env use" in result.output
    assert not (env_dir / "pytorch").exists()

    result = cli("env", "forget", "pytorch")
    assert result.exit_code == 0 and f"no longer uses {pytorch_python}" in result.output
    assert envs.python_for("pytorch")[0] is None
    result = cli("run", "--matrix", str(write_matrix(MATRIX)), "--db", "after.db")
    assert _runs(workdir / "after.db")[0]["outcome"] == "unavailable"


def _python2(folder: Path) -> Path:
    """An interpreter the test makes that answers as Python 2.7.18 does: a real Python running what
    it is given, with sys.version_info of 2.7.18 (no Python 2 need be installed; bench judges an
    interpreter by what it reports)."""
    path = folder / "python2.7"
    fake = "import sys; sys.version_info = (2, 7, 18, 'final', 0); exec(sys.argv.pop(1))"
    path.write_text(f'#!/bin/sh\n[ "$1" = -c ] || exit 2\nshift\nexec {sys.executable} -c "{fake}" "$@"\n')
    path.chmod(0o755)
    return path


def _broken(tmp_path: Path, kind: str) -> tuple[str, str]:
    """An interpreter that must be refused, and what the one-line error must say."""
    if kind == "missing":
        return str(tmp_path / "no-such-python"), "no such file"
    if kind == "not-executable":
        path = tmp_path / "python"
        path.write_text("")
        return str(path), "not executable"
    if kind == "not-python":
        path = tmp_path / "python"
        path.write_text("#!/bin/sh\necho 'sh: not a python' >&2\nexit 3\n")
        path.chmod(0o755)
        return str(path), "does not run as Python: sh: not a python"
    if kind == "python2":
        return str(_python2(tmp_path)), "Python 2.7.18; bench's worker needs 3.6 or newer"
    # The orchestrator's own interpreter: a real Python 3 without torch.
    return sys.executable, "cannot run bench's pytorch worker"


@pytest.mark.parametrize("kind", ["missing", "not-executable", "not-python", "python2", "no-framework"])
def test_a_broken_interpreter_is_refused_in_one_line(cli, workdir, env_dir, tmp_path, kind):
    kept = {"python": str(workdir / "kept-python"), "framework_version": "x", "build": "cpu"}
    envs.register("pytorch", kept)
    before = (env_dir / envs.EXTERNAL_FILE).read_text()
    python, says = _broken(tmp_path, kind)

    result = cli("env", "use", "pytorch", "--python", python)

    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bench env use pytorch: --python "), lines
    assert says in lines[0], lines[0]
    assert "Traceback" not in result.output
    assert (env_dir / envs.EXTERNAL_FILE).read_text() == before


def test_forget_without_registration_and_unknown_framework(cli, workdir, env_dir):
    result = cli("env", "forget", "pytorch")
    assert result.exit_code == 1
    assert result.output.strip() == "error: bench env forget: no interpreter is registered for 'pytorch'"
    result = cli("env", "use", "caffe", "--python", "/bin/true")
    assert result.exit_code == 1 and "unknown framework 'caffe'" in result.output


def test_a_registered_interpreter_that_went_away_is_unavailable_saying_so(workdir, env_dir):
    gone = workdir / "gone" / "python"
    envs.register("mxnet", {"python": str(gone), "framework_version": "1.9.1", "build": "cuda"})
    python, why = envs.python_for("mxnet")
    assert python is None
    assert str(gone) in why and "bench env use mxnet --python PATH" in why and "bench env forget mxnet" in why
    status = envs.status("mxnet")
    assert status.status == "unavailable" and str(gone) in (status.reason or "")


def test_the_environment_variable_still_comes_first(workdir, env_dir, monkeypatch, tmp_path):
    envs.register("paddle", {"python": sys.executable, "framework_version": "x", "build": "cpu"})
    other = tmp_path / "other-python"
    other.write_text("")
    monkeypatch.setenv("BENCH_PYTHON_PADDLE", str(other))
    assert envs.python_for("paddle") == (other, "BENCH_PYTHON_PADDLE")

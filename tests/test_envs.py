"""Where framework environments come from: the Python 3.6 search order for Singa, overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.provision import envs
from tests.conftest import pyenv_python36


def test_frameworks_on_the_orchestrators_python_use_it():
    assert envs.base_python("pytorch") == (Path(sys.executable), "the orchestrator's interpreter")


def test_singa_finds_pyenvs_python36(monkeypatch):
    monkeypatch.delenv("BENCH_PYTHON36", raising=False)
    python, where = envs.base_python("singa")
    assert python is not None and "Python 3.6." in where, where
    assert python.resolve() == pyenv_python36().resolve()


def test_a_named_interpreter_comes_first_and_must_be_36(monkeypatch):
    monkeypatch.delenv("BENCH_PYTHON36", raising=False)
    py36 = pyenv_python36()
    monkeypatch.setenv("BENCH_PYTHON36", sys.executable)
    python, where = envs.base_python("singa")
    assert python is None and "is not a Python 3.6 interpreter" in where
    monkeypatch.setenv("BENCH_PYTHON36", str(py36))
    assert envs.base_python("singa")[1].startswith("Python 3.6")


def test_no_python36_anywhere_says_how_to_get_one(monkeypatch, tmp_path):
    monkeypatch.delenv("BENCH_PYTHON36", raising=False)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    python, where = envs.base_python("singa")
    assert python is None
    assert "pyenv install 3.6" in where and "BENCH_PYTHON36" in where


def test_interpreter_override(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_PYTHON_MXNET", str(tmp_path / "python"))
    assert envs.python_for("mxnet")[0] is None
    monkeypatch.setenv("BENCH_PYTHON_MXNET", sys.executable)
    assert envs.python_for("mxnet") == (Path(sys.executable), "BENCH_PYTHON_MXNET")


def test_status_without_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("BENCH_PYTHON_TENSORFLOW", raising=False)
    status = envs.status("tensorflow", tmp_path)
    assert status.status == "unavailable" and "bench env setup tensorflow" in status.reason


def test_gpu_builds_where_a_gpu_is_and_the_framework_has_one():
    assert envs.choose_variant("pytorch", "auto", has_gpu=True) == "cuda"
    assert envs.choose_variant("pytorch", "auto", has_gpu=False) == "cpu"
    # Paddle's GPU wheels of this version are not on the registries, Singa has none: CPU builds.
    assert envs.choose_variant("paddle", "auto", has_gpu=True) == "cpu"
    assert envs.choose_variant("singa", "auto", has_gpu=True) == "cpu"
    assert envs.choose_variant("tensorflow", "cpu", has_gpu=True) == "cpu"
    for framework in ("pytorch", "tensorflow", "mxnet", "jax"):
        assert envs.requirements_file(framework, "cuda").exists()


# The package names whose versions say which build a CUDA environment would get.
FRAMEWORK_PACKAGES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "mxnet": "mxnet-cu112",
    "jax": "jax-cuda13-plugin",
}


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(FRAMEWORK_PACKAGES))
def test_gpu_requirements_resolve_to_gpu_builds(framework, tmp_path):
    """pip resolves each envs/<framework>-cuda.txt from the registries (nothing is downloaded
    beyond metadata), to the framework's CUDA build, with one CUDA major version of CUPTI."""
    report = tmp_path / "report.json"
    reqs = envs.requirements_file(framework, "cuda")
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    proc = subprocess.run(
        [*cmd, "--disable-pip-version-check", "--report", str(report), "-r", str(reqs)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    versions = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    package = FRAMEWORK_PACKAGES[framework]
    assert package in versions, sorted(versions)
    # A local "+cpu" build satisfies "==2.13.0" and wins where a wheel folder holds one.
    assert "+cpu" not in versions[package], versions[package]
    cupti = sorted(name for name in versions if name.startswith("nvidia-cuda-cupti"))
    assert len(cupti) == 1, cupti  # a second CUPTI of another CUDA major version beside the first


def test_status_says_which_build_and_whether_its_requirements_changed(monkeypatch, tmp_path):
    monkeypatch.delenv("BENCH_PYTHON_MXNET", raising=False)
    bin_dir = tmp_path / "mxnet" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    assert envs.status("mxnet", tmp_path).build is None  # no marker: not made by bench env setup
    reqs = envs.requirements_file("mxnet", "cuda")
    marker = {"requirements": reqs.name, "requirements_hash": envs._requirements_hash(reqs)}
    (tmp_path / "mxnet" / envs.MARKER).write_text(json.dumps(marker))
    status = envs.status("mxnet", tmp_path)
    assert (status.build, status.up_to_date) == ("cuda", True)
    marker.update(requirements="mxnet.txt")  # the CPU file, with another file's hash: changed since
    (tmp_path / "mxnet" / envs.MARKER).write_text(json.dumps(marker))
    status = envs.status("mxnet", tmp_path)
    assert (status.build, status.up_to_date) == ("cpu", False)

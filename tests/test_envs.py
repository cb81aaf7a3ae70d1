"""Where framework environments come from: the Python 3.6 search order for Singa, overrides."""

from __future__ import annotations

import hashlib
import json
import re
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


CUDA_RESOLUTIONS = Path(__file__).parent / "data" / "cuda_resolutions.json"

# The package names whose versions say which build a CUDA environment would get.
FRAMEWORK_PACKAGES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "mxnet": "mxnet-cu112",
    "jax": "jax-cuda13-plugin",
}


@pytest.mark.parametrize("framework", sorted(FRAMEWORK_PACKAGES))
def test_gpu_requirements_resolve_to_gpu_builds(framework):
    """What pip resolved each envs/<framework>-cuda.txt to, recorded from the registries by
    benchmarks/tools/resolve_cuda_envs.py (the suite itself reaches no registry): the record is of the
    file as it is now, and it is the framework's CUDA build with one CUDA major version of CUPTI."""
    record = json.loads(CUDA_RESOLUTIONS.read_text())[framework]
    reqs = envs.requirements_file(framework, "cuda")
    assert record["requirements_sha256"] == hashlib.sha256(reqs.read_bytes()).hexdigest(), (
        f"{reqs.name} changed since its resolution was recorded: "
        f"run .venv/bin/python -m benchmarks.tools.resolve_cuda_envs --framework {framework}"
    )
    versions = record["versions"]
    package = FRAMEWORK_PACKAGES[framework]
    assert package in versions, sorted(versions)
    # A local "+cpu" build satisfies "==2.13.0" and wins where a wheel folder holds one.
    assert "+cpu" not in versions[package], versions[package]
    pinned = re.search(rf"^{re.escape(package.split('-cu')[0])}\S*?=+([\w.]+)", reqs.read_text(), re.M)
    assert pinned and versions[package] == pinned.group(1), (package, versions[package])
    cupti = sorted(name for name in versions if name.startswith("nvidia-cuda-cupti"))
    assert len(cupti) == 1, cupti  # a second CUPTI of another CUDA major version beside the first


def test_status_says_which_build_and_whether_its_requirements_changed(monkeypatch, tmp_path):
    monkeypatch.delenv("BENCH_PYTHON_MXNET", raising=False)
    bin_dir = tmp_path / "mxnet" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    assert envs.status("mxnet", tmp_path).build is None  # no marker: not made by bench env setup
    reqs = envs.requirements_file("mxnet", "cuda")
    marker = {"requirements": reqs.name, "requirements_hash": envs.requirements_hash(reqs)}
    (tmp_path / "mxnet" / envs.MARKER).write_text(json.dumps(marker))
    status = envs.status("mxnet", tmp_path)
    assert (status.build, status.up_to_date) == ("cuda", True)
    marker.update(requirements="mxnet.txt")  # the CPU file, with another file's hash: changed since
    (tmp_path / "mxnet" / envs.MARKER).write_text(json.dumps(marker))
    status = envs.status("mxnet", tmp_path)
    assert (status.build, status.up_to_date) == ("cpu", False)

"""workers/nvtx.py: which NVTX a cuda run's ranges go through (docs/gpu.md, the NVTX check).

The first GPU check found no libnvToolsExt beside PyTorch 2.11 with CUDA 13 (NVTX3 is header-only
and its wheels ship none), so a PyTorch run falls back to torch.cuda.nvtx. The real CUDA path is
the GPU check's; here: the choice, that a build without NVTX gives no ranges and no error, and,
against a stand-in libnvToolsExt (not a GPU), that every framework's ranges go through it where it
loads (no GPU run has had one: the H200's CUDA 13 wheels ship none)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import types
from pathlib import Path

import pytest

from workers import nvtx


@pytest.fixture
def no_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvtx, "load", lambda: None)


def fake_torch(monkeypatch: pytest.MonkeyPatch, calls: list, works: bool = True) -> None:
    def push(text: str) -> None:
        if not works:
            raise RuntimeError("NVTX functions not installed. Are you sure you have a CUDA build?")
        calls.append(("push", text))

    module = types.SimpleNamespace(range_push=push, range_pop=lambda: calls.append(("pop",)))
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    cuda.nvtx = module  # type: ignore[attr-defined]
    torch.cuda = cuda  # type: ignore[attr-defined]
    for name, value in (("torch", torch), ("torch.cuda", cuda), ("torch.cuda.nvtx", module)):
        monkeypatch.setitem(sys.modules, name, value)


def test_a_cpu_run_pushes_nothing() -> None:
    assert not nvtx.marks_for({"device": "cpu", "framework": "pytorch"}).active


def test_pytorch_without_libnvtoolsext_uses_its_own_binding(monkeypatch, no_library) -> None:
    calls: list = []
    fake_torch(monkeypatch, calls)
    marks = nvtx.marks_for({"device": "cuda", "framework": "pytorch"})
    assert marks.active and "torch.cuda.nvtx" in marks.source
    calls.clear()  # the probe's own range
    marks.push("epoch 1")
    marks.pop()
    assert calls == [("push", "epoch 1"), ("pop",)]


def test_a_build_whose_binding_raises_gives_no_ranges_and_no_error(monkeypatch, no_library) -> None:
    fake_torch(monkeypatch, [], works=False)
    assert not nvtx.marks_for({"device": "cuda", "framework": "pytorch"}).active


def test_another_framework_without_the_library_pushes_nothing(monkeypatch, no_library) -> None:
    fake_torch(monkeypatch, [])
    assert not nvtx.marks_for({"device": "cuda", "framework": "jax"}).active


def standin_libnvtoolsext(calls: list) -> types.SimpleNamespace:
    """Stand-in, not a GPU: libnvToolsExt's two functions as ctypes would expose them (each takes
    the argtypes bench sets), recording what they are called with."""

    def push(text: bytes) -> int:
        calls.append(("push", text))
        return 0

    def pop() -> int:
        calls.append(("pop",))
        return 0

    return types.SimpleNamespace(_name="libnvToolsExt.so.1", nvtxRangePushA=push, nvtxRangePop=pop)


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax"])
def test_any_frameworks_cuda_run_pushes_its_ranges_through_libnvtoolsext_where_it_is(monkeypatch, framework):
    """Where libnvToolsExt loads, every framework's cuda run pushes through it (PyTorch's binding is
    only the fallback): ASCII bytes to nvtxRangePushA, declared as a char* argument."""
    calls: list = []
    library = standin_libnvtoolsext(calls)
    monkeypatch.setattr(nvtx, "load", lambda: library)
    marks = nvtx.marks_for({"device": "cuda", "framework": framework})
    assert marks.active and marks.source == "libnvToolsExt.so.1"
    marks.push("epoch 1")
    marks.pop()
    assert calls == [("push", b"epoch 1"), ("pop",)]
    assert library.nvtxRangePushA.argtypes == [ctypes.c_char_p]  # type: ignore[attr-defined]
    assert not nvtx.marks_for({"device": "cpu", "framework": framework}).active


@pytest.mark.framework
def test_the_cpu_build_of_pytorch_gives_no_ranges_and_no_error() -> None:
    from tests.drivers import framework_python

    code = (
        "from workers import nvtx; nvtx.load = lambda: None; "
        "m = nvtx.marks_for({'device': 'cuda', 'framework': 'pytorch'}); print(m.active)"
    )
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [str(framework_python("pytorch")), "-c", code], capture_output=True, text=True, cwd=repo
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

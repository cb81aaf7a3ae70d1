"""Running out of GPU memory is `oom` with its evidence, not a crash: the orchestrator's decision from
what a worker leaves (result, stderr, exit status), and the PyTorch adapter's recognition of
torch's own OutOfMemoryError in the real PyTorch environment. Neither needs a GPU.

The messages follow the shape of PyTorch's caching allocator's (c10/cuda/CUDACachingAllocator.cpp)
and of a CUDA runtime error; their numbers are illustrative, not measured.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from orchestrator.launch import outcomes
from orchestrator.launch.process import Finished

REPO = Path(__file__).resolve().parent.parent
TORCH_OOM = (
    "CUDA out of memory. Tried to allocate 1.53 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
    "1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB memory in use. Of the "
    "allocated memory 76.02 GiB is allocated by PyTorch, and 1.49 GiB is reserved by PyTorch but unallocated."
)
GIB = 1 << 30


def worker_left(run_dir: Path, result: dict | None, stderr: str) -> Path:
    run_dir.mkdir(exist_ok=True)
    (run_dir / "stderr.log").write_text(stderr)
    if result is not None:
        (run_dir / "result.json").write_text(json.dumps(result))
    return run_dir


def test_torch_out_of_memory_error_in_the_result_is_oom_with_the_peak(tmp_path):
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "workers/adapters/pytorch/adapter.py", line 176, in train_step\n'
        "    loss.backward()\n"
        f"torch.OutOfMemoryError: {TORCH_OOM}\n"
    )
    result = {
        "status": "oom",  # what workers/__main__.py writes once the adapter's is_oom said so
        "reason": TORCH_OOM,
        "exception": {"type": "OutOfMemoryError", "message": TORCH_OOM, "traceback": traceback},
        "phase": "warmup",
        "device_memory": {
            "source": "torch.cuda",
            "max_memory_reserved": 77 * GIB,
            "max_memory_allocated": 76 * GIB,
            "total_memory": 80 * GIB,
        },
    }
    run_dir = worker_left(tmp_path / "run", result, traceback)
    out = outcomes.classify(Finished(returncode=1, wall_seconds=9.0), run_dir, timeout=300)
    assert out.outcome == "oom"
    assert out.exception_type == "OutOfMemoryError" and out.traceback == traceback
    assert out.reason.startswith("CUDA out of memory. Tried to allocate 1.53 GiB")
    assert out.reason.endswith(
        "device memory (torch.cuda): peak reserved 77 GiB, peak allocated 76 GiB, of a device of 80 GiB"
    )


def test_an_abort_after_a_cuda_out_of_memory_error_is_oom_not_a_crash(tmp_path):
    # A C++ extension's CUDA error that never became a Python exception: the process aborts.
    stderr = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: out of memory\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n"
    )
    run_dir = worker_left(tmp_path / "run", None, stderr)
    out = outcomes.classify(Finished(returncode=-signal.SIGABRT, wall_seconds=9.0), run_dir, timeout=300)
    assert out.outcome == "oom" and out.signal_name == "SIGABRT"
    assert out.reason == "aborted (SIGABRT) after running out of memory: what():  CUDA error: out of memory"
    assert out.traceback.startswith("Fatal Python error: Aborted")
    # The same abort without any sign of memory stays a crash.
    worker_left(run_dir, None, "Fatal Python error: Aborted\n")
    assert outcomes.classify(Finished(-signal.SIGABRT, 1.0), run_dir, timeout=300).outcome == "crash"


def test_a_failed_exit_with_the_error_only_in_stderr_is_oom_and_quotes_it(tmp_path):
    stderr = f"Traceback (most recent call last):\n  ...\nRuntimeError: {TORCH_OOM}\n"
    run_dir = worker_left(tmp_path / "run", None, stderr)
    out = outcomes.classify(Finished(returncode=1, wall_seconds=2.0), run_dir, timeout=300)
    assert out.outcome == "oom"
    assert out.reason.startswith(
        "exited with status 1 (the worker wrote no result): RuntimeError: CUDA out of"
    )
    worker_left(run_dir, None, "Traceback (most recent call last):\nValueError: bad shape\n")
    assert outcomes.classify(Finished(1, 2.0), run_dir, timeout=300).outcome == "error"


@pytest.mark.framework
def test_the_pytorch_worker_calls_torchs_own_out_of_memory_error_oom(pytorch_python):
    """torch.cuda.OutOfMemoryError exists in CPU builds too: the real class, through the worker's
    own decision (workers/__main__.py _classify with the PyTorch adapter)."""
    code = (
        "import json, torch\n"
        "from workers.__main__ import _classify\n"
        "from workers.adapters.pytorch import Adapter\n"
        "adapter = Adapter({'device': 'cuda', 'seed': 0})\n"
        "adapter.torch = torch\n"
        f"exc = torch.cuda.OutOfMemoryError({TORCH_OOM!r})\n"
        "print(json.dumps([_classify(exc, adapter), type(exc).__name__, adapter.device_memory(),\n"
        "                  _classify(RuntimeError('shape mismatch'), adapter)]))\n"
    )
    done = subprocess.run(
        [str(pytorch_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    status, name, memory, other = json.loads(done.stdout.splitlines()[-1])
    assert (status, name, other) == ("oom", "OutOfMemoryError", "error")
    assert memory is None  # setup() never ran on cuda: no device figures to report

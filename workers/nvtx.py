"""NVTX ranges for cuda runs, through ctypes: "warmup", "epoch N" and "step N" in the timeline.

Nsight Systems (and any NVTX-aware tool) attributes kernels to these ranges, so a trace can keep
the measured region apart from warm-up. Without libnvToolsExt, or on CPU, every call is a no-op.
NVTX itself costs next to nothing while no tool is attached (a call into an empty stub).
"""

import ctypes
import ctypes.util
import glob
import os
import sys

_NAMES = ("libnvToolsExt.so.1", "libnvToolsExt.so")


class NoMarks(object):
    """What a run without NVTX uses: nothing happens."""

    active = False

    def push(self, text):
        pass

    def pop(self):
        pass


class Marks(object):
    """Push and pop NVTX ranges (nvtxRangePushA / nvtxRangePop)."""

    active = True

    def __init__(self, library):
        self.library = library
        self.source = getattr(library, "_name", "libnvToolsExt")
        self._push = library.nvtxRangePushA
        self._push.argtypes = [ctypes.c_char_p]
        self._pop = library.nvtxRangePop

    def push(self, text):
        self._push(text.encode("ascii"))

    def pop(self):
        self._pop()


def _candidates():
    found = ctypes.util.find_library("nvToolsExt")
    if found:
        yield found
    for name in _NAMES:
        yield name
    # The NVIDIA pip wheels (nvidia-nvtx-cu12, which CUDA builds of the frameworks bring) keep it
    # in site-packages, where the loader does not look.
    for entry in sys.path:
        for path in sorted(glob.glob(os.path.join(entry, "nvidia", "nvtx", "lib", "libnvToolsExt.so*"))):
            yield path


def load():
    """The NVTX library, or None where it is not installed."""
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


class TorchMarks(object):
    """PyTorch's own NVTX binding (torch.cuda.nvtx), for a PyTorch cuda run without
    libnvToolsExt: CUDA 12 made NVTX a header-only library (NVTX3), and the CUDA 13 wheels ship
    no libnvToolsExt at all (the first GPU check's PyTorch 2.11 with CUDA 13 had none), while
    PyTorch compiles the NVTX3 calls into itself."""

    active = True
    source = "torch.cuda.nvtx (PyTorch's NVTX3 binding)"

    def __init__(self, module):
        self._push = module.range_push
        self._pop = module.range_pop

    def push(self, text):
        self._push(text)

    def pop(self):
        self._pop()


def _torch_marks():
    try:
        import torch.cuda.nvtx as module
        module.range_push("bench")  # raises where this build has no NVTX
        module.range_pop()
    except Exception:  # noqa: BLE001 - any failure means no ranges, never a failed run
        return None
    return TorchMarks(module)


def marks_for(config):
    """NVTX ranges for a cuda run: libnvToolsExt where it is there, else (PyTorch) its own
    binding; NoMarks otherwise."""
    if config.get("device") != "cuda":
        return NoMarks()
    library = load()
    if library is not None:
        return Marks(library)
    if config.get("framework") == "pytorch":
        marks = _torch_marks()
        if marks is not None:
            return marks
    return NoMarks()

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


def marks_for(config):
    """NVTX ranges for a cuda run where the library is there; NoMarks otherwise."""
    if config.get("device") != "cuda":
        return NoMarks()
    library = load()
    return Marks(library) if library is not None else NoMarks()

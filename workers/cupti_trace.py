"""CUDA kernel tracing for any framework, through CUPTI's activity API (NVIDIA's cupti-python).

While a timed epoch runs, CUPTI records every kernel (CONCURRENT_KERNEL), memory copy (MEMCPY) and
memset (MEMSET) the process executes on the GPU, with start and end timestamps taken on the device;
stop() flushes CUPTI's buffers (the runner has synchronised the device, so every kernel launched in
the epoch has finished) and disables the activity kinds, so evaluation is never recorded. Each
kernel counts its device duration (end - start); copies are named as nvprof named them
("[CUDA memcpy HtoD]") so one rule table classifies both. CUPTI names a C++ kernel by its mangled
symbol (`_ZN2at6native29vectorized_elementwise_kernel...`; kineto and TensorFlow's CUPTI tracer
demangle it too): records() demangles each distinct name once with libstdc++'s __cxa_demangle, as
kineto does, so the names, their classes and the data types they show are those torch.profiler
and nsys report.

Unverified on a GPU: written against cupti-python 13.4's documented API and samples, and run only
against a stand-in of that module (tests/test_cupti_standin.py). docs/gpu.md says what has run where.
"""

import ctypes

from workers.adapters import base

_KIND_NAMES = ("CONCURRENT_KERNEL", "MEMCPY", "MEMSET")
_BUFFER_BYTES = 8 * 1024 * 1024


def unavailable():
    """Why CUPTI's Python binding cannot be used here (None: it can)."""
    try:
        from cupti import cupti  # noqa: F401  (the package is cupti-python)
    except Exception as exc:  # ImportError, or the CUPTI library failing to load
        return "cannot import cupti ({}: {}); pip install cupti-python in this environment".format(
            type(exc).__name__, exc)
    return None


class Tracer(base.Tracer):
    backend = "cupti"
    device = "cuda"

    def __init__(self):
        base.Tracer.__init__(self)
        from cupti import cupti

        self.cupti = cupti
        self.kinds = [getattr(cupti.ActivityKind, name) for name in _KIND_NAMES]
        # Registered once: CUPTI hands completed buffers to these for the life of the process.
        cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)

    def _buffer_requested(self):
        return _BUFFER_BYTES, 0  # 0: no limit on records per buffer

    def _buffer_completed(self, activities):
        for activity in activities:
            name = self._name(activity)
            if name is not None:
                self.add(name, 1, (activity.end - activity.start) / 1e9)

    def _name(self, activity):
        cupti = self.cupti
        if activity.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
            return activity.name
        if activity.kind == cupti.ActivityKind.MEMCPY:
            return "[CUDA memcpy {}]".format(_copy_kind(cupti, activity.copy_kind))
        if activity.kind == cupti.ActivityKind.MEMSET:
            return "[CUDA memset]"
        return None

    def records(self):
        """The kernels by demangled name (names CUPTI gave that demangle alike are merged)."""
        demangle = _demangler()
        if demangle is None and any(name.startswith("_Z") for name in self.totals):
            self.notes.append("kernel names left mangled: libstdc++'s __cxa_demangle could not be loaded")
        if demangle is not None:
            totals, self.totals = self.totals, {}
            for name, (calls, seconds) in totals.items():
                self.add(demangle(name), calls, seconds)
        return base.Tracer.records(self)

    def start(self):
        for kind in self.kinds:
            self.cupti.activity_enable(kind)

    def stop(self):
        self.cupti.activity_flush_all(1)  # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, incomplete buffers too
        for kind in self.kinds:
            self.cupti.activity_disable(kind)


def _copy_kind(cupti, kind):
    """HtoD, DtoH, DtoD, ... from CUPTI's CUpti_ActivityMemcpyKind."""
    try:
        text = cupti.ActivityMemcpyKind(kind).name
    except Exception:
        return str(kind)
    return {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP"}.get(text, text)


def _demangler():
    """A function from a mangled C++ name to its demangled one (other names as they are), through
    libstdc++'s __cxa_demangle; None where libstdc++ cannot be loaded."""
    try:
        demangle = getattr(ctypes.CDLL("libstdc++.so.6"), "__cxa_demangle")
        free = ctypes.CDLL(None).free
    except (OSError, AttributeError):
        return None
    demangle.restype = ctypes.c_void_p  # a malloc'd string, freed below
    demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    def run(name):
        if not name.startswith("_Z"):
            return name  # an extern "C" kernel (cuBLAS's, cuDNN's sm80_xmma_...) is named as written
        status = ctypes.c_int(-1)
        out = demangle(name.encode("utf-8"), None, None, ctypes.byref(status))
        if not out:
            return name  # not a name the demangler reads (status -2): kept as CUPTI gave it
        try:
            return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 else name
        finally:
            free(out)

    return run

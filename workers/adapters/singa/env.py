"""Singa's environment probing, for the Singa adapter's setup(): the thread variables bench sets,
and what the OpenMP and OpenBLAS runtimes singa's wheel loaded say they use. Python 3.6.
"""

import ctypes
import os


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def threads_report(requested):
    """What was asked, and what the loaded OpenMP and OpenBLAS runtimes say they use."""
    report = {"requested": requested, "env": {v: os.environ.get(v) for v in THREAD_VARS}}
    for key, library, symbol in (("openmp", "libgomp", "omp_get_max_threads"),
                                 ("openblas", "libopenblas", "openblas_get_num_threads")):
        path = loaded_library(library)
        try:
            report[key] = int(getattr(ctypes.CDLL(path), symbol)()) if path else None
        except (OSError, AttributeError):
            report[key] = None
    return report


def loaded_library(prefix):
    """Path of the shared library whose file name starts with prefix in this process, if any."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith(prefix) and "/singa.libs/" in path:
                    return path
    except OSError:
        pass
    return None

"""Paddle's environment and device probing, for the Paddle adapter's setup().

What Paddle reads from the environment before it is imported (thread counts, log level, the
notices silenced), the threads it applies (asked of the OpenMP runtime it ships), the settings
that decide its kernels, and its GPUs: the CUDA build's check, CUDA's version and the memory
flag of a GPU run. paddle is handed in.
"""

import ctypes
import os
import re
import warnings

from workers.adapters import base


NOTICES = ("No ccache found", "When training, we now always track global mean and variance",
            # to_static (mode graph) asks a static Value for its place once while converting
            "Tensor do not have 'place' interface for pir graph mode")


def before_import(threads):
    """Environment Paddle reads at import: thread counts, and its import-time noise.

    Returns OMP_NUM_THREADS as it was before import (Paddle sets it to 1 when it is unset).
    """
    omp_env = os.environ.get("OMP_NUM_THREADS")
    if threads > 0:
        # The orchestrator already set OMP_NUM_THREADS; a direct caller may not have. Paddle's
        # own count (FLAGS_paddle_num_threads, default 1) is read from the environment at import.
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ["FLAGS_paddle_num_threads"] = str(threads)
    # Three notices, nothing else: paddle.utils.cpp_extension says at every import that ccache (a
    # compiler cache for custom C++ operators, unused here) is missing, BatchNorm's forward says
    # in training that it tracks running statistics (which the benchmark wants), and to_static's
    # conversion that a static Value has no place.
    for text in NOTICES:
        warnings.filterwarnings("ignore", message=text, category=UserWarning)
    # glog INFO lines (the static-graph executor announces itself); warnings and errors stay.
    os.environ.setdefault("GLOG_minloglevel", "1")
    return omp_env


def apply_threads(paddle, n, omp_env):
    """Apply threads > 0; report what Paddle's flag and its OpenMP runtime say it uses.

    Paddle has no getter for its thread count: the OpenMP runtime it ships (libiomp5, which its
    MKL and oneDNN kernels use) is asked directly. Paddle has no separate inter-op pool in eager.
    """
    applied = {"requested": n, "omp_num_threads_env_before_import": omp_env,
               "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS")}
    if n > 0:
        paddle.framework.core.set_num_threads(n)
        applied["set_num_threads"] = n
    applied["paddle_num_threads_flag"] = paddle.get_flags(
        ["FLAGS_paddle_num_threads"])["FLAGS_paddle_num_threads"]
    applied["intra_op"] = omp_max_threads()
    applied["inter_op"] = None
    return applied


def settings(paddle, mode):
    """What decides which CPU kernels run and how, as Paddle reports it (docs/fairness.md).

    Paddle's wheel is built with oneDNN, but its flags leave it off by default: eager CPU
    kernels are then Paddle's own (and MKL's for matrix products). Threads are in "threads".
    """
    flags = {}
    for name in ("FLAGS_use_mkldnn", "FLAGS_use_onednn"):
        try:
            flags[name] = paddle.get_flags([name])[name]
        except (ValueError, RuntimeError):  # a flag this version does not have
            flags[name] = None
    core = paddle.framework.core
    built = getattr(core, "is_compiled_with_onednn", None) or getattr(core, "is_compiled_with_mkldnn", None)
    flags.update(onednn_built=bool(built()) if built else None,
                 with_mkl=getattr(paddle.version, "with_mkl", None), training_path=PATHS[mode],
                 cinn_built=bool(paddle.is_compiled_with_cinn()))
    return flags


PATHS = {"eager": "eager", "graph": "paddle.jit.to_static(full_graph=True)",
          "compiled": "paddle.jit.to_static(full_graph=True) with CINN"}


def omp_max_threads():
    """omp_get_max_threads() of the OpenMP runtime loaded in this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return None
    for name in ("libiomp5", "libgomp"):
        found = re.search(r"(/\S*" + name + r"[^/\s]*\.so[^/\s]*)", maps)
        if found:
            try:
                return int(ctypes.CDLL(found.group(1)).omp_get_max_threads())
            except (OSError, AttributeError):
                continue
    return None


MEMORY_FLAG = "FLAGS_gpu_memory_limit_mb"


def memory_limit_flag(budget):
    """Paddle's own cap, as the environment it reads at import: FLAGS_gpu_memory_limit_mb, the
    budget in whole MiB (rounded down, so never above it; at least 1). A CUDA build's allocator
    raises ResourceExhaustedError beyond it; the CPU build reads the flag too, and ignores it."""
    return {MEMORY_FLAG: str(max(1, budget >> 20))}


def cuda_version(paddle):
    version = paddle.version.cuda()
    return None if version in (None, "False", False) else str(version)


def check_cuda(paddle):
    base.check_cuda(
        "paddlepaddle {}".format(paddle.__version__), paddle.is_compiled_with_cuda(),
        lambda: paddle.device.cuda.device_count() != 0,
        "the CUDA build (the paddlepaddle-gpu wheel of the same version, from Paddle's CUDA package "
        "index) in this environment",
        "is built with CUDA {} but no CUDA device is visible".format(cuda_version(paddle)))

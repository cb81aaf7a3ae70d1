"""MXNet's environment and device probing, for the MXNet adapter's setup().

The threads MXNet applies, the settings that decide its kernels, and its GPUs: the CUDA build's
check and the CUDA version its wheel was built for. mxnet is handed in.
"""

import os

from workers import models
from workers.adapters import base


def threads(mx, requested, before_import):
    """What was applied, and what the OpenMP runtime libmxnet loaded says it will use.

    libmxnet's OpenMP setup (src/engine/openmp.cc) runs at import in the importing thread: with
    OMP_NUM_THREADS unset it takes half of omp_get_num_procs() on x86 and sets that there, so
    omp_get_max_threads() read here is the per-operator count either way.
    """
    applied = {
        "requested": requested,
        "applied_before_import": before_import,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "inter_op": int(os.environ.get("MXNET_CPU_WORKER_NTHREADS") or 1),
        "engine": os.environ.get("MXNET_ENGINE_TYPE") or "ThreadedEnginePerDevice",
    }
    try:
        applied["intra_op"] = int(mx.base._LIB.omp_get_max_threads())
    except AttributeError:  # a build without OpenMP
        applied["intra_op"] = None
    # The threads the process runs once the engine has done some work (Linux only).
    x = mx.nd.ones((2, 4, 8, 8))
    mx.nd.Convolution(x, mx.nd.ones((4, 4, 3, 3)), kernel=(3, 3), num_filter=4, no_bias=True)
    mx.nd.waitall()
    try:
        applied["os_threads"] = len(os.listdir("/proc/self/task"))
    except OSError:
        applied["os_threads"] = None
    return applied


def settings(mx, model):
    """What decides which CPU kernels run and how (docs/fairness.md); threads are in "threads".

    MKLDNN (oneDNN) is compiled into the PyPI wheel and on unless MXNET_MKLDNN_ENABLED=0. Its
    fused RNN primitive runs the GRU on CPU unless MXNET_USE_MKLDNN_RNN=0 too (seen with
    DNNL_VERBOSE=1); on a GPU the RNN operator is cuDNN's.
    """
    features = mx.runtime.Features()
    built = features.is_enabled("MKLDNN")
    variable = os.environ.get("MXNET_MKLDNN_ENABLED")
    settings = {
        "mkldnn_built": built,
        "MXNET_MKLDNN_ENABLED": variable,  # None: unset (MXNet's default, on)
        "mkldnn_enabled": bool(built and variable not in ("0", "false", "False")),
        "blas": sorted(k for k in features.keys() if k.startswith("BLAS_") and features.is_enabled(k)),
        "engine": os.environ.get("MXNET_ENGINE_TYPE") or "ThreadedEnginePerDevice",
    }
    if model in models.LANGUAGE:
        settings["token_dtype"] = "float32"
    if model in models.RECURRENT:
        rnn = os.environ.get("MXNET_USE_MKLDNN_RNN")
        settings.update(MXNET_USE_MKLDNN_RNN=rnn, token_dtype="float32",
                        mkldnn_rnn=bool(settings["mkldnn_enabled"] and rnn not in ("0", "false", "False")))
    return settings


def check_cuda(mx):
    """The CUDA version of a CUDA build with a visible device; Unavailable otherwise."""
    base.check_cuda(
        "mxnet {}".format(mx.__version__), mx.runtime.Features().is_enabled("CUDA"),
        lambda: mx.context.num_gpus() != 0,
        "a CUDA build of the same version in this environment, e.g. mxnet-cu112==1.9.1 for CUDA 11.2,",
        "is built with CUDA but sees no GPU", note=" (the `mxnet` wheel)")
    return cuda_of_wheel()


def cuda_of_wheel():
    """CUDA version from the wheel's name (mxnet-cu112 -> 11.2): MXNet 1.9 has no getter."""
    import re

    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return None
    for dist in metadata.distributions():
        match = re.match(r"mxnet-cu(\d+)(\d)", (dist.metadata["Name"] or "").lower())
        if match:
            return "{}.{}".format(*match.groups())
    return None

"""TensorFlow's environment and device probing, for the TensorFlow adapter's setup().

What TensorFlow reads from the environment before it is imported (log level, thread pools), the
threads it applies, the settings that decide its kernels, and its GPUs: the CUDA build's check,
the memory cap of a GPU run and the GPUs hidden from a CPU run. tensorflow is handed in.
"""

import os

from workers import models
from workers.adapters import base


def environment_before_import(threads):
    """What TensorFlow reads from the environment when it loads."""
    # 1 hides C++ INFO lines (CPU feature notes, XLA service banners) but keeps warnings and errors.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if threads > 0:
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
        os.environ["TF_NUM_INTEROP_THREADS"] = str(threads)


def apply_threads(tf, n):
    """Apply threads > 0 to both of TensorFlow's pools; report what it says it uses.

    TensorFlow reports 0 for a pool it sizes itself; it then uses one thread per schedulable
    CPU, which is reported as ``*_effective``.
    """
    applied = {"requested": n}
    threading = tf.config.threading
    if n > 0:
        try:
            threading.set_intra_op_parallelism_threads(n)
            threading.set_inter_op_parallelism_threads(n)
            applied["applied"] = True
        except RuntimeError as exc:  # only allowed before TensorFlow's context has started
            applied["applied"] = False
            applied["error"] = str(exc)
    applied["intra_op"] = threading.get_intra_op_parallelism_threads()
    applied["inter_op"] = threading.get_inter_op_parallelism_threads()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    applied["intra_op_effective"] = applied["intra_op"] or cpus
    applied["inter_op_effective"] = applied["inter_op"] or cpus
    return applied


def settings(tf, gpu, model, mode):
    """What decides which kernels run and how, as TensorFlow reports it (docs/fairness.md).

    Threads are in info["threads"]. oneDNN is on by default on x86 Linux; TF_ENABLE_ONEDNN_OPTS=0
    turns it off, and onednn_enabled is TensorFlow's own answer (None where it cannot be asked).
    """
    try:
        from tensorflow.python.util import _pywrap_util_port

        onednn = bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        onednn = None
    settings = {
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),  # None: unset (default)
        "onednn_enabled": onednn,
        "xla_jit": mode == "compiled",  # the steps' jit_compile
        "grappler": {k: v for k, v in sorted(tf.config.optimizer.get_experimental_options().items())},
        # Intel OpenMP's knobs that oneDNN guides suggest; None: unset.
        "KMP_BLOCKTIME": os.environ.get("KMP_BLOCKTIME"),
        "KMP_AFFINITY": os.environ.get("KMP_AFFINITY"),
        "execution": EXECUTION[mode],
        "data_format": "channels_last (NHWC)",
    }
    if model in models.TOKEN_MODELS:
        settings["data_format"] = "token ids (N, L) int64"
    if model in models.RECURRENT:
        # Keras's GRU takes cuDNN's fused kernel only where a GPU is visible (backend.gru raises
        # NotImplementedError otherwise) and else loops its GRUCell in a tf.while_loop.
        settings["gru_implementation"] = "cudnn (CudnnRNNV3)" if gpu else "GRUCell in a tf.while_loop"
    return settings


EXECUTION = {"eager": "eager (no tf.function)", "graph": "tf.function graph",
              "compiled": "tf.function graph compiled by XLA (jit_compile=True)"}


def check_cuda(tf):
    base.check_cuda(
        "tensorflow {}".format(tf.__version__), tf.test.is_built_with_cuda(),
        lambda: bool(tf.config.list_physical_devices("GPU")),
        "tensorflow[and-cuda] of the same version in this environment instead",
        "is built with CUDA {} but sees no GPU".format(tf.sysconfig.get_build_info().get("cuda_version")),
        note=" (tensorflow-cpu)",
        look_at=", CUDA_VISIBLE_DEVICES and the CUDA libraries tensorflow[and-cuda] installs")


def memory_budget(tf, budget):
    """TensorFlow's own cap: the first GPU made one logical device of ``budget`` bytes, in whole
    MiB as LogicalDeviceConfiguration's memory_limit takes it (rounded down, so never above the
    budget; at least 1). Returns what the run's setup record says of it."""
    mib = max(1, budget >> 20)
    gpu = tf.config.list_physical_devices("GPU")[0]
    tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=mib)])
    return {"bytes": budget, "logical_device_mb": mib}


def hide_gpus(tf):
    """Keep a CPU run on the CPU: TensorFlow places ops on a visible GPU by itself."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices([], "GPU")
    return len(gpus)

"""JAX's environment and device probing, for the JAX adapter's setup().

What JAX and XLA read from the environment before jax is imported (memory preallocation, the CPU
platform, PJRT_NPROC for the thread count); the switches bench reads itself (BENCH_JAX_DEPTHWISE,
BENCH_JAX_ATTENTION); and, once jax is imported, its settings, the XLA threads that exist, the
installed CUDA plugin, CUDA's version and the GPU. Standard library only at import: jax is handed in.
"""

import os

from workers.adapters import base

CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin")


def environment_before_import(device, threads):
    """What JAX and XLA read from the environment when the backend starts."""
    # JAX takes 75% of the GPU's memory at start by default: GPU memory samples would show that,
    # not what the model uses. Without preallocation XLA's allocator grows as the model needs.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # XLA's C++ INFO lines
    if device == "cpu":
        # A CPU run stays on the CPU even where a CUDA plugin would take a GPU.
        os.environ["JAX_PLATFORMS"] = "cpu"
    if threads > 0:
        os.environ["PJRT_NPROC"] = str(threads)


def depthwise(device):
    """How depthwise convolutions are computed (layers.depthwise): BENCH_JAX_DEPTHWISE where
    set (shifted or grouped); else shifted on the CPU, where XLA runs the grouped convolution
    several times slower (docs/fairness.md, "JAX's MobileNetV2"), and grouped on cuda (cuDNN's
    grouped convolution; not measured)."""
    value = os.environ.get("BENCH_JAX_DEPTHWISE")
    if value:
        if value not in ("shifted", "grouped"):
            raise ValueError("BENCH_JAX_DEPTHWISE={!r}: expected shifted or grouped".format(value))
        return value
    return "grouped" if device == "cuda" else "shifted"


def attention_kernel():
    """What nn.MultiHeadDotProductAttention calls (attention.KERNELS): BENCH_JAX_ATTENTION where
    set; else "flax", Linen's own dot_product_attention (its default)."""
    value = os.environ.get("BENCH_JAX_ATTENTION")
    if value:
        if value not in ("flax", "jax.nn"):  # attention.KERNELS: that module imports flax
            raise ValueError("BENCH_JAX_ATTENTION={!r}: expected flax or jax.nn".format(value))
        return value
    return "flax"


def settings(jax):
    """What decides JAX's kernels and precision, as JAX reports them (docs/fairness.md)."""
    config = jax.config

    def option(name):
        try:
            return getattr(config, name)
        except AttributeError:  # an option this JAX version does not have
            return None

    return {
        "execution": None,  # setup() sets it to execution["how"]
        "memory_format": "NHWC",  # images are arranged channels-last once, outside the clock
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
        "enable_x64": option("jax_enable_x64"),
        "default_matmul_precision": option("jax_default_matmul_precision"),
        "backend": jax.default_backend(),
    }


def threads_applied(requested):
    """What was asked, the variable set, and the XLA intra-op threads that exist now."""
    applied = {"requested": requested, "pjrt_nproc": os.environ.get("PJRT_NPROC")}
    names = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open("/proc/self/task/{}/comm".format(task)) as f:
                names.append(f.read().strip())
    except (IOError, OSError):
        return applied
    # XLA names its CPU pool's threads tf_XLAEigen (the pool is built on Eigen's).
    applied["xla_intra_op"] = sum(1 for n in names if n == "tf_XLAEigen")
    return applied


def version(distribution):
    try:
        from importlib import metadata
        return metadata.version(distribution)
    except Exception:
        return None


def cuda_plugin():
    """The installed CUDA plugin's module name (the CUDA build of jaxlib), or None."""
    import importlib.util

    for name in CUDA_PLUGINS:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def cuda_version(plugin):
    """CUDA's version for a CUDA build: the runtime jaxlib reports ("13.0"), else the major
    version in the plugin's name (jax_cuda13_plugin: "13"); None for a CPU build. (The plugin's
    own version is jax's, which the first GPU check had shown as the CUDA version.)"""
    if plugin is None:
        return None
    try:
        from jax._src.lib import cuda_versions  # private, and absent in some jaxlib builds
        runtime = cuda_versions.cuda_runtime_get_version() if cuda_versions is not None else None
    except Exception:  # noqa: BLE001 - the plugin's name says enough
        runtime = None
    if isinstance(runtime, int) and runtime > 0:
        return "{}.{}".format(runtime // 1000, runtime % 1000 // 10)
    digits = "".join(c for c in plugin.split("cuda", 1)[-1] if c.isdigit())
    return digits or None


def cuda_device(jax, plugin):
    who = "jax {}".format(jax.__version__)
    if plugin is None:
        raise base.cpu_only_build(who, "envs/jax-cuda.txt (jax[cuda13]) in this environment",
                                  note=" (no jax-cuda plugin installed)")
    try:
        devices = jax.devices("cuda")
    except RuntimeError as exc:  # JAX says why it sees none: that goes into the message
        blind = "has its CUDA plugin ({}) but sees no GPU ({})".format(plugin, exc)
        raise base.no_gpu_seen(who, blind) from exc
    return jax.local_devices(backend="cuda")[0] if devices else devices[0]  # a replica's own

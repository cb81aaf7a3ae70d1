"""PyTorch's environment and device probing, for the PyTorch adapter's setup().

The threads torch applies, the layout of image batches (BENCH_TORCH_MEMORY_FORMAT), the settings
that decide its CPU kernels, and its GPUs: the CUDA build's check, the GPU a process runs on and
the memory cap of a GPU run. torch is handed in.
"""

import os

from workers import models
from workers.adapters import base


def apply_threads(torch, n):
    """Apply threads > 0 to both of torch's pools; report what torch actually uses."""
    applied = {"requested": n}
    if n > 0:
        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(n)
            applied["interop_applied"] = True
        except RuntimeError as exc:  # only allowed before any inter-op work has started
            applied["interop_applied"] = False
            applied["interop_error"] = str(exc)
    applied["intra_op"] = torch.get_num_threads()
    applied["inter_op"] = torch.get_num_interop_threads()
    return applied


MEMORY_FORMATS = ("channels_last", "contiguous_format")


def memory_format(cuda, config):
    """The layout of image batches and convolution weights: BENCH_TORCH_MEMORY_FORMAT where set
    (channels_last or contiguous_format); else channels_last for image models on the CPU from
    models.CHANNELS_LAST_MIN_SIZE px (oneDNN's native layout), and PyTorch's default otherwise (on CUDA
    not measured)."""
    value = os.environ.get("BENCH_TORCH_MEMORY_FORMAT")
    if value:
        if value not in MEMORY_FORMATS:
            raise ValueError("BENCH_TORCH_MEMORY_FORMAT={!r}: expected {}".format(
                value, " or ".join(MEMORY_FORMATS)))
        return value
    image = config.get("model") not in models.TOKEN_MODELS
    if cuda or not image or int(config.get("image_size") or 0) < models.CHANNELS_LAST_MIN_SIZE:
        return "contiguous_format"
    return "channels_last"


def settings(torch, layout, how):
    """The switches that decide which CPU kernels run, as torch reports them (docs/fairness.md)."""
    backends = torch.backends
    return {
        "mkldnn_available": bool(backends.mkldnn.is_available()),  # oneDNN convolutions built in
        "mkldnn_enabled": bool(backends.mkldnn.enabled),  # and switched on (torch's default)
        "mkl_available": bool(backends.mkl.is_available()),
        "openmp_available": bool(backends.openmp.is_available()),
        "memory_format": layout,  # of image batches and weights
        "BENCH_TORCH_MEMORY_FORMAT": os.environ.get("BENCH_TORCH_MEMORY_FORMAT"),
        "execution": how,
    }


def cuda_index(config):
    """The GPU this process runs on: a data-parallel replica's own (its rank: join_replicas()
    moves it there), else the first."""
    replica = config.get("replica") or {}
    return int(replica.get("rank") or 0) if replica.get("count", 1) > 1 else 0


def memory_budget(torch, budget, index):
    """PyTorch's own cap on GPU ``index``: its caching allocator raises OutOfMemoryError beyond
    ``budget`` bytes, asked for as a fraction of the card's memory (at most all of it). Returns
    what the run's setup record says of it."""
    fraction = min(1.0, float(budget) / torch.cuda.get_device_properties(index).total_memory)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    return {"bytes": budget, "fraction": fraction, "device": index}


def check_cuda(torch):
    base.check_cuda(
        "torch {}".format(torch.__version__), torch.version.cuda is not None, torch.cuda.is_available,
        "a CUDA build of torch in this environment (a wheel from the pytorch.org CUDA index)",
        "is built with CUDA {} but no CUDA device is visible".format(torch.version.cuda))

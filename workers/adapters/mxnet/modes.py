"""MXNet's execution modes and precisions (workers/execution.py), for the MXNet adapter.

- eager: imperative Gluon, the blocks called op by op (not hybridized);
- graph: ``hybridize(static_alloc=True, static_shape=True)``, one cached graph per block (the
  default, what bench ran before modes were an axis); on cuda with pointwise fusion off
  (MXNET_USE_FUSION=0), since MXNet 1.6+ fuses by default there;
- compiled: on cuda, the same with MXNet's pointwise fusion (MXNET_USE_FUSION=1, runtime-compiled
  CUDA kernels); on CPU for inference, ``optimize_for(x, backend='MKLDNN')``: the oneDNN subgraph
  pass fuses convolution and dense layers with what follows them into oneDNN primitives whose code
  oneDNN generates (JIT) for the fused shape. For training on CPU there is no such path: the fused
  operators have no backward (seen: every gradient through an optimized net is zero).

Precisions: fp32 as before; bf16 is ``mxnet.contrib.amp.init(target_dtype='bfloat16')`` (no loss
scaling: bfloat16 has float32's exponent range), whose CPU kernels are oneDNN's; fp16 is
``amp.init('float16')`` with ``amp.init_trainer`` and ``amp.scale_loss`` (dynamic loss scaling),
GPU only. ``amp.init`` rewrites mxnet.ndarray and mxnet.symbol for the whole process and cannot be
undone: one precision per process, which is how bench runs (one worker per configuration).
"""

import os

from workers.adapters import base

OPTIMIZE_FOR = "HybridBlock.optimize_for(x, backend='MKLDNN', static_alloc=True, static_shape=True)"
HYBRIDIZE = "HybridBlock.hybridize(static_alloc=True, static_shape=True)"

# What the graph's operators are called, by what compute_dtypes reports.
_KINDS = {"Convolution": "conv", "FullyConnected": "matmul", "RNN": "rnn",
          "_contrib_interleaved_matmul_selfatt_qk": "attention",
          "_contrib_interleaved_matmul_selfatt_valatt": "attention"}

_PROCESS = {}  # the precision amp.init set in this process ("fp32" when none was asked)


def before_import(adapter):
    """What must be in the environment before mxnet is imported (pointwise fusion, cuda only)."""
    if adapter.config["device"] == "cuda":
        os.environ["MXNET_USE_FUSION"] = "1" if adapter.mode() == "compiled" else "0"


def after_import(adapter, mx):
    """Refuse what MXNet lacks here; start AMP for bf16 and fp16; record how the run executes."""
    mode, device = adapter.mode(), adapter.config["device"]
    inference = adapter.config.get("task") == "inference"
    if mode == "compiled" and device != "cuda":
        if not inference:
            raise adapter.unsupported_mode(
                "MXNet {} has no compiler that generates fused code for training on CPU: its pointwise "
                "fusion (MXNET_USE_FUSION) is CUDA only, and the oneDNN subgraph pass "
                "(optimize_for(backend='MKLDNN')) is for inference: its fused operators have no "
                "backward (every gradient through an optimized net comes back zero)".format(mx.__version__))
        if not mkldnn_enabled(mx):
            raise adapter.unsupported_mode(
                "the oneDNN subgraph pass (optimize_for(backend='MKLDNN')) needs MXNet's MKLDNN "
                "backend, which is off or not built here (MXNET_MKLDNN_ENABLED={!r})".format(
                    os.environ.get("MXNET_MKLDNN_ENABLED")))
    adapter.execution.update(how=_how(mode, device, inference), loss_scaling=None)
    if device == "cuda":
        adapter.execution["MXNET_USE_FUSION"] = os.environ.get("MXNET_USE_FUSION")
    _precision(adapter, mx)


def mkldnn_enabled(mx):
    built = mx.runtime.Features().is_enabled("MKLDNN")
    return bool(built and os.environ.get("MXNET_MKLDNN_ENABLED") not in ("0", "false", "False"))


def _how(mode, device, inference):
    if mode == "eager":
        return "Gluon imperative: HybridSequential not hybridized, each operator run as it is called"
    if mode == "graph":
        return HYBRIDIZE + (", MXNET_USE_FUSION=0" if device == "cuda" else "")
    if device == "cuda":
        return HYBRIDIZE + ", MXNET_USE_FUSION=1 (pointwise fusion, runtime-compiled CUDA kernels)"
    return OPTIMIZE_FOR + " (oneDNN subgraph fusion)" if inference else ""


def _precision(adapter, mx):
    from mxnet.contrib import amp

    precision, device = adapter.precision(), adapter.config["device"]
    if precision == "tf32":
        raise adapter.unsupported_precision(
            "MXNet {} has no TF32 switch of its own for its matrix products (cuBLAS and cuDNN "
            "decide)".format(mx.__version__))
    if precision == "fp16" and device != "cuda":
        raise adapter.unsupported_precision(
            "MXNet AMP casts to float16 on GPU contexts only (amp's casts skip float16 on cpu), "
            "and MXNet {}'s CPU kernels have no float16 convolution (its CPU convolution "
            "raises 'FP16 gemm on cpu not implemented!')".format(mx.__version__))
    if precision == "bf16" and device == "cuda":
        raise adapter.unsupported_precision(
            "MXNet AMP's bfloat16 is for CPU (oneDNN): MXNet {} has no bfloat16 CUDA kernels".format(
                mx.__version__))
    done = _PROCESS.get("precision")
    if done is None and amp.amp._amp_initialized:
        done = "amp initialised outside bench"
    if done is not None and done != precision:
        # amp.init wrapped mxnet's operators for the process: a second precision would silently
        # run in the first one's.
        raise RuntimeError("this process already set MXNet's precision to {}; amp.init cannot be "
                           "undone, so run {} in a fresh process".format(done, precision))
    if precision == "bf16" and done is None:
        _check_bf16_kernels(adapter, mx)
    if precision in ("bf16", "fp16") and done is None:
        amp.init(target_dtype="bfloat16" if precision == "bf16" else "float16")
    _PROCESS["precision"] = precision
    adapter.execution["precision_how"] = {
        "fp32": "float32 (no AMP)",
        "bf16": "mxnet.contrib.amp.init(target_dtype='bfloat16'), no loss scaling",
        "fp16": "mxnet.contrib.amp.init(target_dtype='float16')",
    }[precision]
    if precision == "fp16":
        adapter.execution["loss_scaling"] = "amp.init_trainer + amp.scale_loss (dynamic, from 2**16)"


def _check_bf16_kernels(adapter, mx):
    """Unsupported unless oneDNN has bfloat16 convolution and dense kernels for this CPU.

    MXNet 1.9.1's oneDNN (v2.4) has them for AVX-512 CPUs only; elsewhere the first bf16
    convolution fails with "could not create a primitive descriptor iterator" (seen on an AVX2
    EPYC), and without oneDNN (MXNET_MKLDNN_ENABLED=0) MXNet has no bf16 kernel at all
    ("Unsupported type 12"). Asked once, on two tiny operators, before amp.init.
    """
    from mxnet.contrib import amp

    bf16 = amp.amp.bfloat16
    x = mx.nd.amp_cast(mx.nd.ones((1, 2, 4, 4)), dtype=bf16)
    tries = (
        ("convolution", lambda: mx.nd.Convolution(
            x, mx.nd.amp_cast(mx.nd.ones((2, 2, 3, 3)), dtype=bf16), kernel=(3, 3), num_filter=2,
            no_bias=True)),
        ("dense (FullyConnected)", lambda: mx.nd.FullyConnected(
            x.reshape((1, -1)), mx.nd.amp_cast(mx.nd.ones((2, 32)), dtype=bf16), num_hidden=2,
            no_bias=True)),
    )
    for name, run in tries:
        try:
            run().wait_to_read()
        except mx.base.MXNetError as exc:
            message = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise adapter.unsupported_precision(
                "MXNet {} has no bfloat16 {} kernel for this CPU ({}): its bf16 kernels are "
                "oneDNN's (mkldnn {}), which in this release need AVX-512 (this CPU's flags: {}); "
                "the kernel's error: {}".format(
                    mx.__version__, name, base.cpu_name(),
                    "enabled" if mkldnn_enabled(mx) else "off", _simd_flags(), message))


def _simd_flags():
    """The AVX flags /proc/cpuinfo lists (what oneDNN picks its kernels by)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = sorted(set(f for f in line.split(":", 1)[1].split() if f.startswith("avx")))
                    return " ".join(flags) or "no AVX"
    except (IOError, OSError):
        pass
    return "unknown"


def prepare(adapter, net, loss_fn, shape):
    """Hybridize, optimize or leave imperative, as the mode says; record compute_dtypes. shape is
    one sample's input shape (the architecture's input)."""
    mx, mode = adapter.mx, adapter.mode()
    adapter.execution["compute_dtypes"] = compute_dtypes(mx, net, shape)
    if mode == "eager":
        return
    if mode == "compiled" and adapter.config["device"] != "cuda":  # inference (after_import)
        batch = (adapter.config["batch_size"],) + tuple(shape)
        net.optimize_for(mx.nd.zeros(batch, ctx=adapter.ctx), backend="MKLDNN", static_alloc=True,
                         static_shape=True)
        adapter.execution["fused_operators"] = fused_operators(net)
        return
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn.hybridize(static_alloc=True, static_shape=True)


def compute_dtypes(mx, net, shape):
    """The output type of each convolution and matrix product in the net's graph, as MXNet infers
    it for a float32 input (AMP's casts included): {"conv": "bfloat16", "matmul": ...}; a kind
    whose operators differ lists them all."""
    import json

    data = mx.sym.var("data")
    out = net(data)
    internals = out.get_internals()
    _, types, _ = internals.infer_type(data="float32")
    nodes = json.loads(internals.tojson())["nodes"]
    heads = {}
    for name, dtype in zip(internals.list_outputs(), types):
        heads[name] = dtype
    seen = {}
    for node in nodes:
        kind = _KINDS.get(node["op"])
        dtype = heads.get(node["name"] + "_output")
        if kind and dtype is not None:
            seen.setdefault(kind, set()).add(_dtype_name(dtype))
    return dict((kind, "/".join(sorted(names))) for kind, names in seen.items())


def _dtype_name(dtype):
    import numpy as np

    if getattr(dtype, "names", None) and "bfloat16" in dtype.names:  # amp's bfloat16 record type
        return "bfloat16"
    return np.dtype(dtype).name


def fused_operators(net):
    """The operators of the cached graph optimize_for left (e.g. _sg_mkldnn_conv), with counts."""
    import json

    symbol = net._cached_graph[1] if getattr(net, "_cached_graph", None) else None
    if symbol is None:
        return None
    counts = {}
    for node in json.loads(symbol.tojson())["nodes"]:
        if node["op"] != "null":
            counts[node["op"]] = counts.get(node["op"], 0) + 1
    return counts

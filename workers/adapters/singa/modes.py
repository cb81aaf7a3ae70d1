"""Singa's execution modes and precisions (workers/execution.py), for the Singa adapter. Python 3.6.

- eager: the Model compiled with ``use_graph=False``: autograd runs each operator as Python calls it;
- graph: ``use_graph=True`` (the default, what bench ran before modes were an axis): the first
  ``train_one_batch`` is buffered as a graph of the same kernels, which every step replays
  (``Device.RunGraph``); task inference buffers the eval-mode forward alike (layers.Forward);
- compiled: none. Singa's graph schedules and replays its kernels one by one; nothing fuses them
  or generates code.

Precision: fp32 only. singa 3.0.0.dev1 has no mixed precision: ``Tensor.as_type`` takes float32
and int only, its DataType enum has no bfloat16, and float16 appears only in DistOpt's NCCL
gradient exchange (CUDA).
"""


def check(adapter, sg):
    """Unsupported for what Singa lacks; otherwise record how the run executes."""
    mode, precision = adapter.mode(), adapter.precision()
    version, wrap = sg["version"], sg["wrap"]
    if mode == "compiled":
        raise adapter.unsupported_mode(
            "singa {} has no compiler that generates fused code: its only other mode is the "
            "buffered graph (mode graph), which replays the same kernels one by one "
            "(Device.RunGraph)".format(version))
    if precision == "bf16":
        raise adapter.unsupported_precision(
            "singa {} has no bfloat16 type: its tensors' DataType has {} and no bfloat16, and its "
            "kernels are float32".format(version, ", ".join(_dtypes(wrap))))
    if precision == "fp16":
        raise adapter.unsupported_precision(
            "singa {} has no mixed precision: Tensor.as_type takes float32 and int only (float16 "
            "raises TypeError 'invalid data type'), autograd's operators and opt.SGD are float32, "
            "and float16 appears only in DistOpt's NCCL gradient exchange "
            "(backward_and_update_half, CUDA){}".format(
                version, "" if adapter.config["device"] == "cuda" else
                "; on CPU a float16 tensor cannot even be filled (SetFloatValue aborts on its "
                "size check)"))
    if precision == "tf32":
        raise adapter.unsupported_precision(
            "singa {} has no TF32 switch for its cuBLAS and cuDNN calls".format(version))
    if mode == "graph":
        how = ("singa.model.Model.compile(use_graph=True, sequential=False): train_one_batch "
               "buffered once, replayed per step (Device.RunGraph)")
        if adapter.config.get("task") == "inference":
            how = ("the eval-mode forward buffered once as a graph (a Model whose train_one_batch is "
                   "the forward, autograd.training off), replayed per step (Device.RunGraph)")
    else:
        how = "singa.model.Model.compile(use_graph=False): autograd runs each operator as it is called"
    adapter.execution.update(how=how, precision_how="float32 (singa has no other)", loss_scaling=None)


def _dtypes(wrap):
    return sorted(name for name in dir(wrap) if name.startswith("kFloat") or name.startswith("kBF"))


def compute_dtypes(sg, arch, x, params):
    """What the convolutions and matrix products run in: the type of the input tensor x and of the
    (name, tensor) params (singa's kernels compute in their operands' type, and it has float32
    only)."""
    names = {sg["tensor"].float32: "float32"}
    dtype = names.get(x.dtype, str(x.dtype))
    types = set([dtype] + [names.get(t.dtype, str(t.dtype)) for _, t in params])
    kinds = set(node["op"] for node in nodes(arch["layers"]))
    out = {}
    if "conv" in kinds:
        out["conv"] = "/".join(sorted(types))
    if kinds & set(["dense", "attention", "embedding", "tied_output"]):
        out["matmul"] = "/".join(sorted(types))
    return out


def nodes(layers):
    """Every node of a layer list, those inside residuals and concatenations included."""
    for node in layers:
        yield node
        for key in ("body", "shortcut"):
            for inner in nodes(node.get(key) or []):
                yield inner
        for branch in node.get("branches") or []:
            for inner in nodes(branch):
                yield inner

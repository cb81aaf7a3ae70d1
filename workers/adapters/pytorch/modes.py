"""PyTorch's execution modes and precisions (workers/execution.py), for the PyTorch adapter.

eager runs the nn.Module; graph wraps it in ``torch.compile(backend="aot_eager")`` (Dynamo and
AOTAutograd capture the forward and backward graphs, eager ATen kernels run them, no code is
generated); compiled wraps it in ``torch.compile(backend="inductor", mode=compile_mode)``, compiling
into a fresh cache folder of the run's own (compile_cache). The wrapper shares the module's
parameters, so the adapter's reset() loads the initial weights into the module itself. Precisions:
bf16 and fp16 are ``torch.autocast`` around the forward pass and the loss (fp16 with
``torch.amp.GradScaler``); tf32 (cuda) switches on TensorFloat-32 matrix products and
convolutions; fp32 on cuda switches them off.

The functions take the adapter for its public attributes (config, execution, mode(), precision(),
torch, cuda, device, memory_format) and are handed the rest.
"""

import atexit
import os
import shutil
import tempfile

COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def setup_mode(adapter, torch):
    """Record what a step calls in this run's mode; the graph and compiled wrappers are made in
    build() (wrap)."""
    mode = adapter.mode()
    if mode == "eager":
        how = "eager (nn.Module called op by op)"
    elif mode == "graph":
        how = "torch.compile(backend='aot_eager')"
    else:
        how = "torch.compile(backend='inductor', mode={!r})".format(compile_mode(adapter.config))
        adapter.execution["inductor_cpp_compiler"] = inductor_compiler(torch)
    if mode != "eager":
        adapter.execution["compile_cache"] = compile_cache()
    adapter.execution["how"] = how


def compile_mode(config):
    return config.get("compile_mode") or "default"


def setup_precision(adapter, torch):
    """Set torch's TF32 switches for this precision and record them; returns (autocast, scaler):
    the (device type, dtype) of a bf16/fp16 run's torch.autocast, else None, and fp16's
    torch.amp.GradScaler, else None."""
    precision, device = adapter.precision(), "cuda" if adapter.cuda else "cpu"
    execution = adapter.execution
    autocast = scaler = None
    execution.update(precision_how="float32 throughout", loss_scaling=None)
    if adapter.cuda and precision != "tf32":
        # fp32 means float32 in every framework (docs/fairness.md): TF32 off for the matrix
        # products (PyTorch's default) and for cuDNN's convolutions too (PyTorch's default lets
        # them use TF32, which TensorFlow's and JAX's fp32 runs here do not), whatever a run
        # before this one in the process set.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if precision == "tf32":  # the runner refuses tf32 off cuda before setup
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        execution.update(
            precision_how="torch.backends.cuda.matmul.allow_tf32 = True, "
                          "torch.backends.cudnn.allow_tf32 = True",
            float32_matmul_precision=torch.get_float32_matmul_precision())
    elif precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        if not torch.amp.is_autocast_available(device):
            raise adapter.unsupported_precision(
                "torch {} has no autocast for {}".format(torch.__version__, device))
        autocast = (device, dtype)
        execution["precision_how"] = "torch.autocast({!r}, dtype=torch.{}) around forward and " \
            "loss; backward and optimizer step outside, float32 parameters".format(device, str(dtype)[6:])
        if precision == "fp16":
            scaler = torch.amp.GradScaler(device)
            execution["loss_scaling"] = "torch.amp.GradScaler({!r}): dynamic, from 2**16, " \
                "halved on non-finite gradients (that step skipped), doubled after 2000 finite".format(device)
    if adapter.cuda:
        execution["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        execution["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    return autocast, scaler


def autocasting(torch, autocast):
    """The run's torch.autocast context (autocast: (device type, dtype)), or a context that
    changes nothing (None)."""
    if autocast is None:
        return _NoContext()
    return torch.autocast(autocast[0], dtype=autocast[1])


def wrap(adapter, model):
    """torch.compile's wrapper of the model (graph, compiled). Nothing is compiled here: Dynamo
    captures on the first call (warm-up, or the first step)."""
    if adapter.config["model"] == "gru":
        # Dynamo breaks the graph at nn.GRU and runs it op by op outside any graph: the
        # model's heart would run eager under a graph or compiled label.
        raise adapter.unsupported_mode(
            "torch {}'s Dynamo does not capture nn.GRU (a graph break: the GRU would run "
            "eagerly outside the graph; torch._dynamo.config.allow_rnn is experimental and "
            "off)".format(adapter.torch.__version__))
    # Dynamo's caches and counters start empty for this model: a process that built another
    # model before (a test's driver) would otherwise fill Sequential.forward's recompile
    # limit (8 entries), after which Dynamo runs the model eagerly without a word; and
    # execution_info() reports this run's graphs and graph breaks from the counters.
    import torch._dynamo

    torch._dynamo.reset()
    # And where a run itself reaches the limit, the run fails with Dynamo's error instead of
    # falling back to eager (the option exists from torch 2.6; older ones keep the fallback).
    config = torch._dynamo.config
    if hasattr(config, "fail_on_recompile_limit_hit"):
        config.fail_on_recompile_limit_hit = True
    adapter.execution["fail_on_recompile_limit_hit"] = getattr(config, "fail_on_recompile_limit_hit", None)
    if adapter.mode() == "graph":
        return adapter.torch.compile(model, backend="aot_eager")
    return adapter.torch.compile(model, backend="inductor", mode=compile_mode(adapter.config))


def dynamo_counts(info):
    """What Dynamo captured, into info: graphs compiled, and each graph break's reason (a break
    runs the code between graphs eagerly)."""
    from torch._dynamo.utils import counters

    info["dynamo_graphs"] = int(counters["stats"].get("unique_graphs", 0))
    breaks = counters.get("graph_break", {})
    info["graph_breaks"] = int(sum(breaks.values()))
    if breaks:
        info["graph_break_reasons"] = sorted(str(k).split("\n")[0] for k in breaks)[:5]


def compute_dtypes(adapter, arch, autocast):
    """The output dtypes of the first Conv2d and the first Linear in one forward pass of the
    eager module on zeros (batch 2, evaluation mode, no gradients, under this run's autocast),
    made once at build, before any step: what autocast runs those layers in."""
    torch, model = adapter.torch, adapter.model
    seen = {}
    hooks = []
    for kind, cls in (("conv", torch.nn.Conv2d), ("matmul", torch.nn.Linear)):
        first = next((m for m in model.modules() if isinstance(m, cls)), None)
        if first is not None:
            hooks.append(first.register_forward_hook(_record_dtype(seen, kind)))
    shape = tuple(arch["input"])
    if arch.get("tokens"):
        x = torch.zeros((2,) + shape, dtype=torch.long, device=adapter.device)
    else:
        x = torch.zeros((2,) + shape, device=adapter.device)
        if len(shape) == 3:
            x = x.contiguous(memory_format=adapter.memory_format)
    model.eval()
    try:
        with torch.no_grad(), autocasting(torch, autocast):
            model(x)
    finally:
        model.train()
        for hook in hooks:
            hook.remove()
    seen["source"] = "forward hooks on the first Conv2d and Linear, one eager forward at build"
    return seen


def compile_cache():
    """Where this run's compiled code is kept, in words, after making it a fresh folder.

    Inductor keeps what it compiled on disk (TORCHINDUCTOR_CACHE_DIR, by default
    /tmp/torchinductor_$USER; Triton's GPU kernels in TRITON_CACHE_DIR) and a later run of the same
    model finds it there: its compile figure is then a warm cache's (docs/fairness.md: a VGG16
    compile of 19.6 s cold read 0.3 s warm). So a graph or compiled run compiles into a fresh folder
    of its own (in the system's temporary folder, as inductor's default), removed as the worker exits; BENCH_COMPILE_CACHE=warm keeps the
    caches the environment names (or inductor's default), for a figure of a user's second run."""
    if os.environ.get("BENCH_COMPILE_CACHE") == "warm":
        named = ["{}={}".format(k, os.environ[k]) for k in COMPILE_CACHE_VARIABLES if os.environ.get(k)]
        return "warm (BENCH_COMPILE_CACHE=warm): " + (", ".join(named) or "inductor's default folders")
    folder = tempfile.mkdtemp(prefix="bench-compile-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    atexit.register(shutil.rmtree, folder, True)
    return ("cold: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in a fresh folder of the run's own "
            "({}), removed as the worker exits".format(folder))


def inductor_compiler(torch):
    """The C++ compiler inductor builds its CPU kernels with (None where it cannot say)."""
    try:
        from torch._inductor import cpp_builder
        return cpp_builder.get_cpp_compiler()
    except Exception:
        return None


class _NoContext(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _record_dtype(seen, kind):
    def hook(module, inputs, output):
        seen.setdefault(kind, str(output.dtype).replace("torch.", ""))
    return hook

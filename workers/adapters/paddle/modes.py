"""Execution modes and precisions of the Paddle adapter (workers/execution.py).

eager: Paddle's dynamic graph (its default). graph: the model's forward converted to a static
program by paddle.jit.to_static(full_graph=True), the way Paddle's guides convert a Layer; the loss,
backward and optimizer step stay in the training loop, where Paddle's users keep them.
full_graph=True is the AST conversion of the whole forward, which raises if it cannot convert it;
full_graph=False (SOT, bytecode tracing) would run what it cannot capture eagerly, a silent partial
fall-back to the eager mode. compiled: the same with CINN, Paddle's compiler
(BuildStrategy.build_cinn_pass = True), only where the wheel is built with CINN: otherwise
build_cinn_pass is ignored without a word, so the run is unsupported instead.

bf16 and fp16: paddle.amp.auto_cast(dtype, level="O1") around the forward (float32 parameters),
with paddle.amp.GradScaler for fp16. Paddle 3.3.1 enables auto_cast only on CUDA, XPU and custom
devices; on CPU it warns and does nothing, so those runs are unsupported with that reason (found
by trying it: a matrix product under auto_cast comes back float32). tf32 on cuda: the cuBLAS switch
(core.set_cublas_switch); fp32 on cuda turns it off.
"""

import contextlib
import warnings

DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def forward_for(paddle, model, mode, title):
    """The callable the steps run: the model, or its to_static conversion (with CINN)."""
    if mode == "eager":
        return model, "paddle dygraph (eager)"
    if mode == "graph":
        return paddle.jit.to_static(model, full_graph=True), "paddle.jit.to_static(model, full_graph=True)"
    strategy = paddle.static.BuildStrategy()
    strategy.build_cinn_pass = True
    return (paddle.jit.to_static(model, build_strategy=strategy, full_graph=True),
            "paddle.jit.to_static(model, full_graph=True, build_strategy.build_cinn_pass=True) (CINN)")


def cinn_missing(paddle):
    """Why mode compiled cannot run with this wheel, or None."""
    if paddle.is_compiled_with_cinn():
        return None
    return ("this paddlepaddle {} wheel is built without CINN, Paddle's compiler "
            "(paddle.is_compiled_with_cinn() is False); to_static's build_cinn_pass would be "
            "ignored".format(paddle.__version__))


def amp_refusal(paddle, precision):
    """Why auto_cast does not run this precision here, or None: a matrix product under
    auto_cast(dtype, level="O1") on the current device must come back in that dtype."""
    dtype = DTYPES[precision]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with paddle.amp.auto_cast(dtype=dtype, level="O1"):
            got = paddle.matmul(paddle.ones([2, 2]), paddle.ones([2, 2])).dtype
    if _dtype_name(got) == dtype:
        return None
    said = [str(w.message) for w in caught if "amp" in str(w.message).lower()]
    return ("paddle.amp.auto_cast(dtype={!r}, level='O1') leaves a matrix product in {} on this "
            "device{}".format(dtype, _dtype_name(got), "; Paddle {} says: {}".format(
                paddle.__version__, said[0]) if said else ""))


def autocast(paddle, precision):
    """The context the forward runs in: auto_cast for bf16/fp16, nothing for fp32 and tf32."""
    if precision in DTYPES:
        return paddle.amp.auto_cast(dtype=DTYPES[precision], level="O1")
    return contextlib.nullcontext() if hasattr(contextlib, "nullcontext") else _Nothing()


def scaler(paddle, precision):
    """fp16's GradScaler (dynamic loss scaling, Paddle's defaults), else None."""
    return paddle.amp.GradScaler() if precision == "fp16" else None


def tf32(paddle, cuda, precision):
    """On cuda: the cuBLAS TF32 switch on for tf32, off for fp32; what it is after (None off cuda)."""
    core = paddle.framework.core
    if not cuda or not hasattr(core, "set_cublas_switch"):
        return None
    if precision in ("tf32", "fp32"):
        core.set_cublas_switch(precision == "tf32")
    return bool(core.get_cublas_switch())


def compute_dtypes(paddle, model, x, precision):
    """The output dtype of the first convolution and the first linear layer in one untimed
    forward (evaluation mode, no gradients) under this run's precision."""
    seen, hooks = {}, []
    kinds = ((paddle.nn.Conv2D, "conv"), (paddle.nn.Linear, "matmul"))
    for layer in model.sublayers():
        for cls, kind in kinds:
            if isinstance(layer, cls) and kind not in seen:
                seen[kind] = None
                hooks.append(layer.register_forward_post_hook(_recorder(seen, kind)))
    was_training = model.training
    model.eval()
    try:
        with paddle.no_grad(), autocast(paddle, precision):
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
        if was_training:
            model.train()
    return {k: v for k, v in seen.items() if v}


def _recorder(seen, kind):
    def record(layer, inputs, output):
        if not seen[kind]:
            seen[kind] = _dtype_name(output.dtype)
    return record


def _dtype_name(dtype):
    return str(dtype).replace("paddle.", "")


class _Nothing(object):
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False

"""JAX's execution modes and precisions (workers/execution.py), and the steps compiled ahead of
time, for the JAX adapter.

compiled (the default): the whole training step (forward, loss, backward, optimizer update,
batch-norm statistics, the loss summed on the device) is one function, compiled ahead of time with
``jax.jit(...).lower(...).compile()`` (compile_train, compile_inference): compilation is never
inside a timed epoch, and a call with any other shape fails instead of compiling again. eager calls
the same functions without jit inside ``jax.disable_jit()``, so every primitive (forward, backward,
the Optax update) is dispatched on its own; graph is unsupported (a jaxpr is only ever run by
compiling it with XLA, which fuses). Precisions: bf16 and fp16 keep float32 parameters and cast
parameters and inputs to the compute dtype inside the loss function, the loss in float32; fp16
scales the loss dynamically (scaled_step, as GradScaler does it); tf32 (cuda) traces under
``jax.default_matmul_precision("tensorfloat32")``.

The functions take the adapter for its public attributes (config, execution, mode(),
precision(), jax, jnp, optax, net, tx, compute, ahead_of_time_seconds) and are handed the rest.
"""

import contextlib
import time

INITIAL_SCALE = 2.0 ** 15  # fp16's first loss scale (jmp's default); float16's max is 65504
GROWTH_INTERVAL = 2000  # finite steps in a row before the scale doubles (GradScaler's)


def setup(adapter, jax, jnp):
    """Refuse graph; record how the run executes and in what precision (adapter.execution);
    return the compute dtype of bf16 and fp16 (a jnp dtype), or None for float32."""
    mode, precision = adapter.mode(), adapter.precision()
    if mode == "graph":
        raise adapter.unsupported_mode(
            "JAX runs a traced program (a jaxpr) only by compiling it with XLA, whose CPU and "
            "GPU backends fuse operations and generate code; there is no graph executor that "
            "runs a captured graph on prebuilt kernels (eager is jax.disable_jit(), compiled "
            "is jax.jit)")
    if mode == "eager":
        how = "no jax.jit: the step's functions called inside jax.disable_jit(), each primitive " \
              "dispatched on its own (forward, backward, Optax update)"
    else:
        how = "jax.jit, each step compiled ahead of time (XLA)"
    execution = adapter.execution
    execution.update(how=how, precision_how="float32 throughout", loss_scaling=None,
                     default_matmul_precision=getattr(jax.config, "jax_default_matmul_precision", None))
    compute = None
    if precision in ("bf16", "fp16"):
        compute = jnp.bfloat16 if precision == "bf16" else jnp.float16
        execution["precision_how"] = (
            "float32 parameters, optimizer state and batch-norm statistics; parameters and "
            "inputs cast to {} inside the loss function; logits cast to float32 for the "
            "softmax cross-entropy".format(jnp.dtype(compute).name))
        if precision == "fp16":
            execution["loss_scaling"] = (
                "dynamic (written in the adapter): loss times the scale, from 2**15; gradients "
                "unscaled in float32; a step with a non-finite gradient is skipped and halves "
                "the scale; {} finite steps in a row double it".format(GROWTH_INTERVAL))
    elif precision == "fp32" and adapter.config.get("device") == "cuda":
        execution.update(precision_how="float32 throughout; traced under "
                         "jax.default_matmul_precision('float32') (no TF32)",
                         default_matmul_precision="float32")
    elif precision == "tf32":  # the runner refuses tf32 off cuda before setup
        execution.update(precision_how="traced under jax.default_matmul_precision('tensorfloat32')",
                         default_matmul_precision="tensorfloat32")
    return compute


def matmul_precision(adapter):
    """The matrix-product precision every trace runs under: tf32's TensorFloat-32; on cuda,
    fp32 in full float32 ("float32": XLA's GPU default may use TF32 for float32 products,
    and fp32 means float32 in every framework, docs/fairness.md); else XLA's default."""
    if adapter.precision() == "tf32":
        return "tensorfloat32"
    if adapter.precision() == "fp32" and adapter.config.get("device") == "cuda":
        return "float32"
    return None


def context(adapter):
    """What every trace (jit's lowering, or an eager step) runs inside: tf32's matmul precision
    and eager's disable_jit, or nothing."""
    stack = contextlib.ExitStack()
    matmul = matmul_precision(adapter)
    if matmul:
        stack.enter_context(adapter.jax.default_matmul_precision(matmul))
    if adapter.mode() == "eager":
        stack.enter_context(adapter.jax.disable_jit())
    return stack


def call(adapter, fn):
    """fn as a step calls it: compiled as is; eager inside context() (disable_jit)."""
    if adapter.mode() != "eager" and not matmul_precision(adapter):
        return fn

    def called(*args):
        with context(adapter):
            return fn(*args)
    return called


def cast(adapter, tree):
    """bf16/fp16: the floating arrays of a tree in the compute dtype (token ids stay int32)."""
    if adapter.compute is None:
        return tree
    jnp, dtype = adapter.jnp, adapter.compute

    def one(a):
        return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a
    return adapter.jax.tree_util.tree_map(one, tree)


def compile_train(adapter, key, state, x, y, sharding):
    """The training and evaluation steps for exactly these shapes, compiled now (eager: wrapped
    in context(), not compiled); returns (train, evaluate).

    state is the training state on the device; x and y the host arrays of the training split, whose
    dtypes and trailing shapes the steps take; sharding (batch_shape, split, replicated): the
    step's batch shape on this process, and a data-parallel run's shardings (None, None otherwise).
    Called by the adapter's prepare_epoch(), which the runner never times: before warm-up, or
    before the first timed epoch where there is no warm-up.
    """
    jax, jnp, optax, net, tx = adapter.jax, adapter.jnp, adapter.optax, adapter.net, adapter.tx
    batch_shape, split, replicated = sharding
    dropout_key = jax.random.fold_in(key, 1)
    scaled = adapter.precision() == "fp16"

    def loss_of(params, batch_stats, x, y, rng):
        """The mean loss (float32) and the updated batch statistics; bf16/fp16: the forward
        pass in the compute dtype over the float32 parameters."""
        logits, updated = net.apply({"params": cast(adapter, params), "batch_stats": batch_stats},
                                    cast(adapter, x), train=True, rngs={"dropout": rng},
                                    mutable=["batch_stats"])
        logits = logits.astype(jnp.float32)
        # A language model's (N, L, V) logits against (N, L) next tokens: the mean over every
        # position of every sequence.
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, updated.get("batch_stats", {})

    def train(state, x, y):
        rng = jax.random.fold_in(dropout_key, state["step"])
        params = state["params"]
        if not scaled:
            (loss, stats), grads = jax.value_and_grad(loss_of, has_aux=True)(
                params, state["batch_stats"], x, y, rng)
            updates, opt = tx.update(grads, state["opt"], params)
            return {"params": optax.apply_updates(params, updates), "batch_stats": stats,
                    "opt": opt, "step": state["step"] + 1, "loss_sum": state["loss_sum"] + loss}
        return scaled_step(jax, jnp, optax, tx, loss_of, state, x, y, rng)

    def evaluate(params, batch_stats, x, y):
        logits = net.apply({"params": cast(adapter, params), "batch_stats": batch_stats},
                           cast(adapter, x), train=False).astype(jnp.float32)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).sum()
        return loss, (jnp.argmax(logits, axis=-1) == y).sum()

    # float32 images or int32 token ids; (N,) labels or (N, L) next tokens. A data-parallel
    # step takes the global batch, split over the replicas.
    count = jax.process_count() if split is not None else 1
    shape = (batch_shape[0] * count,) + tuple(batch_shape[1:])
    x_spec = jax.ShapeDtypeStruct(shape, x.dtype, sharding=split)
    y_spec = jax.ShapeDtypeStruct(shape[:1] + y.shape[1:], jnp.int32, sharding=split)
    record_compute_dtypes(adapter, loss_of, state, (x.dtype, batch_shape), y.shape[1:], dropout_key)
    if adapter.mode() == "eager":  # no jit anywhere: each primitive dispatched on its own
        return call(adapter, train), call(adapter, evaluate)
    with context(adapter):
        # The state is donated: XLA updates weights and optimizer state in place.
        shardings = {"out_shardings": replicated} if replicated is not None else {}
        jitted = jax.jit(train, donate_argnums=0, **shardings)
        began = time.perf_counter()
        compiled = jitted.lower(state, x_spec, y_spec).compile()
        adapter.ahead_of_time_seconds += time.perf_counter() - began
    return compiled, call(adapter, jax.jit(evaluate))  # evaluate: compiled by its first (untimed) call


def record_compute_dtypes(adapter, loss_of, state, batch, labels_tail, key):
    """What the convolutions and matrix products of the loss compute in: the output dtypes of
    conv_general_dilated and dot_general in its jaxpr (jax.make_jaxpr; traced, not run), in
    adapter.execution. batch is (the inputs' dtype, their batch shape)."""
    jax, jnp = adapter.jax, adapter.jnp
    dtype, batch_shape = batch
    x = jnp.zeros(batch_shape, dtype)
    y = jnp.zeros(batch_shape[:1] + labels_tail, jnp.int32)
    with context(adapter):
        jaxpr = jax.make_jaxpr(lambda p: jax.value_and_grad(loss_of, has_aux=True)(
            p, state["batch_stats"], x, y, key))(state["params"])
    found = {}
    primitive_dtypes(jaxpr.jaxpr, found)
    dtypes = {kind: ", ".join(sorted(found[name])) for kind, name in
              (("conv", "conv_general_dilated"), ("matmul", "dot_general")) if name in found}
    dtypes["source"] = "output dtypes of conv_general_dilated and dot_general in the jaxpr of " \
                       "the loss and its gradient (jax.make_jaxpr)"
    adapter.execution["compute_dtypes"] = dtypes


def compile_inference(adapter, state, batch_shape, dtype):
    """The forward pass in evaluation mode (no gradients, no state update) for exactly this batch
    shape and input dtype, compiled now (eager: wrapped in context(), not compiled)."""
    jax, net = adapter.jax, adapter.net

    def infer(params, batch_stats, x):
        return net.apply({"params": cast(adapter, params), "batch_stats": batch_stats},
                         cast(adapter, x), train=False)

    x = jax.ShapeDtypeStruct(batch_shape, dtype)
    if adapter.mode() == "eager":
        return call(adapter, infer)
    with context(adapter):
        began = time.perf_counter()
        compiled = jax.jit(infer).lower(state["params"], state["batch_stats"], x).compile()
        adapter.ahead_of_time_seconds += time.perf_counter() - began
    return compiled


def scaled_step(jax, jnp, optax, tx, loss_of, state, x, y, rng):
    """One fp16 step with dynamic loss scaling: the gradient of loss * scale, unscaled in float32;
    where any gradient is not finite the parameters and optimizer state stay as they were and the
    scale halves (not below 1), else the update applies and after GROWTH_INTERVAL finite steps in a
    row the scale doubles. The batch statistics update either way (as with PyTorch's GradScaler)."""
    scale, params, tree = state["scale"], state["params"], jax.tree_util

    def scaled(p, batch_stats, x, y, rng):
        loss, stats = loss_of(p, batch_stats, x, y, rng)
        return loss * scale, (loss, stats)

    (_, (loss, stats)), grads = jax.value_and_grad(scaled, has_aux=True)(
        params, state["batch_stats"], x, y, rng)
    grads = tree.tree_map(lambda g: g / scale, grads)
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in tree.tree_leaves(grads)]))
    updates, opt = tx.update(grads, state["opt"], params)
    stepped = optax.apply_updates(params, updates)

    def keep(new, old):
        return jnp.where(finite, new, old)

    good = jnp.where(finite, state["good_steps"] + 1, 0)
    grow = good >= GROWTH_INTERVAL
    return {"params": tree.tree_map(keep, stepped, params), "batch_stats": stats,
            "opt": tree.tree_map(keep, opt, state["opt"]), "step": state["step"] + 1,
            "loss_sum": state["loss_sum"] + loss,
            "scale": jnp.where(finite, jnp.where(grow, scale * 2.0, scale), jnp.maximum(scale / 2.0, 1.0)),
            "good_steps": jnp.where(grow, 0, good),
            "skipped": state["skipped"] + jnp.where(finite, 0, 1).astype(jnp.int32)}


def primitive_dtypes(jaxpr, found):
    """Each primitive's output dtypes in a jaxpr and the jaxprs inside it (jit, scan, custom
    derivatives), collected into found: {primitive name: {dtype names}}."""
    for eqn in jaxpr.eqns:
        found.setdefault(eqn.primitive.name, set()).update(
            str(v.aval.dtype) for v in eqn.outvars if hasattr(v.aval, "dtype"))
        for param in eqn.params.values():
            for sub in (param if isinstance(param, (list, tuple)) else [param]):
                inner = getattr(sub, "jaxpr", None)  # a ClosedJaxpr's, or a Jaxpr itself
                if inner is not None and hasattr(inner, "eqns"):
                    primitive_dtypes(inner, found)
                elif hasattr(sub, "eqns"):
                    primitive_dtypes(sub, found)

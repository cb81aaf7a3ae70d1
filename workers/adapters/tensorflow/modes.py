"""Execution modes and precisions of the TensorFlow adapter (workers/execution.py).

eager: the step's Python function called directly, op by op (no tf.function; the global
tf.config.run_functions_eagerly is never touched). graph: the same function as a
tf.function(jit_compile=False). compiled: tf.function(jit_compile=True), XLA. Training, inference
and evaluation alike.

bf16 and fp16 are Keras's mixed-precision policies, "mixed_bfloat16" and "mixed_float16" (float32
variables, 16-bit compute), set while the model is built and restored right after (the policy is
global to Keras); the logits pass through a float32 linear activation, as Keras's guide has the
last layer, so the loss is float32. fp16 wraps the optimizer in keras.optimizers.LossScaleOptimizer
(dynamic loss scaling). tf32 is TensorFlow's own switch; on cuda fp32 turns it off, so that fp32 is
float32 (TensorFlow turns TF32 on by default on Ampere and newer GPUs).
"""

from workers import execution, models

POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
HOW = {
    "eager": "the step's Python function called eagerly (no tf.function)",
    "graph": "tf.function(jit_compile=False)",
    "compiled": "tf.function(jit_compile=True) (XLA)",
}
# Kernels whose dtype says what the convolutions and the matrix products ran in.
_CONV = ("Conv2D", "DepthwiseConv2dNative")
_MATMUL = ("MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")


def default_mode(config):
    """TensorFlow's mode when the run leaves it unset: the one bench ran before modes were an axis.

    That is Keras's own jit_compile="auto": XLA with a GPU, except for a model with a GRU (cuDNN's
    RNN op has no XLA kernel, so Keras marks it supports_jit False); a plain graph on CPU. The rule
    lives in workers/execution.py, so the orchestrator resolves it alike.
    """
    return execution.default_mode(config)


def build_model(keras, precision, make):
    """``make()`` (the model) under this precision's Keras policy, the global policy restored after.

    In a mixed policy the logits are cast to float32 by a last linear Activation(dtype="float32").
    """
    policy = POLICIES.get(precision, "float32")
    if policy == "float32":
        return make()
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = make()
        logits = keras.layers.Activation("linear", dtype="float32", name="logits_float32")(model.outputs[0])
        return keras.Model(model.inputs, logits, name=model.name)
    finally:
        keras.config.set_dtype_policy(previous)


def optimizer(keras, precision, inner):
    """fp16's optimizer is Keras's LossScaleOptimizer around the configured one."""
    if precision == "fp16":
        return keras.optimizers.LossScaleOptimizer(inner)
    return inner


def loss_scaling(opt):
    """What scales fp16's loss, for the record (None: no scaling)."""
    if hasattr(opt, "scale_loss") and hasattr(opt, "inner_optimizer"):
        return "keras.optimizers.LossScaleOptimizer(initial_scale={:g}, dynamic_growth_steps={})".format(
            opt.initial_scale, opt.dynamic_growth_steps)
    return None


def wrap(tf, mode, fn, signature, device):
    """fn as the mode runs it: itself on the run's device (eager), or a tf.function with this input
    signature (traced under the device by the caller)."""
    if mode != "eager":
        return tf.function(fn, input_signature=signature, jit_compile=(mode == "compiled"))

    def eager(*args):
        with tf.device(device):
            return fn(*args)

    return eager


def describe(tf, gpu, mode, precision):
    """The run's execution record (Adapter.execution) as setup() knows it; TF32 set for cuda."""
    policy = POLICIES.get(precision, "float32")
    how = {"how": HOW[mode], "keras_dtype_policy": policy}
    if gpu:  # TF32 is a mode of NVIDIA's matrix units: nothing to record on CPU
        how["tf32_enabled"] = tensor_float_32(tf, gpu, precision)
    if policy != "float32":
        how["precision_how"] = "keras.config.set_dtype_policy({!r}) while the model is built".format(policy)
    elif precision == "tf32":
        how["precision_how"] = "tf.config.experimental.enable_tensor_float_32_execution(True)"
    return how


def tensor_float_32(tf, gpu, precision):
    """TF32 on cuda: on for precision tf32, off for fp32; otherwise left as TensorFlow has it.

    Returns TensorFlow's state after that.
    """
    if gpu and precision in ("tf32", "fp32"):
        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")
    return bool(tf.config.experimental.tensor_float_32_execution_enabled())


def compute_dtypes(model, concrete):
    """What the convolutions and matrix products ran in, and where that was read.

    From the traced graph's kernels where there is one (graph, compiled: the ops XLA is given);
    in eager, from the Keras layers' compute dtype (the policy each layer computes in).
    """
    found = {"conv": set(), "matmul": set()}
    if concrete is not None:
        for op in concrete.graph.get_operations():
            kind = "conv" if op.type in _CONV else "matmul" if op.type in _MATMUL else None
            if kind:
                found[kind].add(op.get_attr("T").name)
        source = "the traced graph's Conv2D and MatMul ops"
    else:
        for layer in _layers(model):
            name = type(layer).__name__
            kind = "conv" if "Conv" in name else "matmul" if name in ("Dense", "EinsumDense", "MultiHeadAttention") else None
            if kind:
                found[kind].add(str(layer.compute_dtype))
        source = "the Keras layers' compute_dtype"
    dtypes = {k: ",".join(sorted(v)) for k, v in found.items() if v}
    return dtypes, source


def _layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers") and layer is not model:
            for inner in _layers(layer):
                yield inner
        yield layer

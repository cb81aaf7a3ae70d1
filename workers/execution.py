"""Execution modes and precisions: the one definition the worker and the orchestrator share.

Standard library only and Python 3.6 code (every framework's interpreter imports it, and the
orchestrator's configuration reads its names). docs/fairness.md says what each framework does in
each mode and precision, and why bench's default for it is what it is.
"""

from workers import frameworks

# How a step runs. eager: operation by operation; graph: the framework captures a graph and runs
# it, without a compiler that generates fused code; compiled: a compiler that generates fused code.
MODES = ("eager", "graph", "compiled")

# What a run leaves unset (mode: null) resolves to: the way bench ran each framework before modes
# were an axis, which is also the way its users most often run it (workers/frameworks.py).
DEFAULT_MODES = dict((f.name, f.default_mode) for f in frameworks.FRAMEWORKS)

# fp32: float32 throughout. bf16 and fp16: mixed precision the way the framework's users do it
# (float32 parameters, 16-bit compute where the framework chooses it, a loss scaler for fp16).
# tf32: float32 storage, TensorFloat-32 matrix products on the GPUs that have them (cuda only).
PRECISIONS = ("fp32", "bf16", "fp16", "tf32")
DEFAULT_PRECISION = "fp32"


def default_mode(config):
    """The mode a run that leaves it unset resolves to (DEFAULT_MODES), with one exception:
    TensorFlow on a GPU ran XLA before modes were an axis (Keras's jit_compile="auto"), except for
    a model with a GRU, whose cuDNN kernel XLA cannot compile."""
    framework = frameworks.BY_NAME.get(config.get("framework"))
    if framework is None:
        return "eager"
    if framework.cuda_mode and config.get("device") == "cuda":
        from workers import models

        if config.get("model") not in models.RECURRENT:
            return framework.cuda_mode
    return framework.default_mode


def mode_of(config):
    """The mode a run resolves to: its own, or its framework's default."""
    return config.get("mode") or default_mode(config)


def precision_of(config):
    return config.get("precision") or DEFAULT_PRECISION


def device_refusal(config):
    """Why this precision cannot run on this device at all, whatever the framework; else None."""
    if precision_of(config) == "tf32" and config.get("device") != "cuda":
        return ("precision 'tf32' is a mode of NVIDIA GPUs' matrix units (Ampere and newer); "
                "this run's device is {}".format(config.get("device")))
    return None

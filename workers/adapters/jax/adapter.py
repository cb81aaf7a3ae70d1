"""JAX adapter: workers.models architectures as Flax (linen) modules, trained with Optax.

jax, flax and optax are imported in setup() only, so this module imports anywhere (the
orchestrator lists adapters without their frameworks). The whole training step (forward, loss,
backward, optimizer update, batch-norm statistics, the loss summed on the device) is one function,
compiled ahead of time with ``jax.jit(...).lower(...).compile()`` in build(): compilation is never
inside a timed epoch, and a call with any other shape fails instead of compiling again. The step
returns at once (JAX dispatches asynchronously); synchronize() blocks on the training state.
Images are kept channels-last (NHWC), Flax's and XLA's CPU layout; token ids (the recurrent
models) are int32.

Threads: XLA's CPU intra-op pool has one thread per CPU the process may run on; ``PJRT_NPROC``,
set before jax is imported, sizes it (docs/frameworks/jax.md says what else was tried).
"""

import os
import platform

from workers import data, models
from workers.adapters import base

_CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin")


class Adapter(base.Adapter):
    name = "jax"
    title = "JAX"
    oom_text = ("resource_exhausted", "out of memory", "can't allocate memory")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.jax = self.jnp = self.optax = None
        self.device = None
        self.gpu = False
        self.net = None
        self.tx = None
        self._state = None  # {"params", "batch_stats", "opt", "step", "loss_sum"} on the device
        self._initial = None  # host (numpy) copy of the state right after build, for reset()
        self._train_fn = self._eval_fn = None
        self._key = None
        self._tracer = None  # the trace.Tracer of a traced run
        self._depthwise = "grouped"  # how depthwise convolutions are computed: setup() decides
        self._x = self._y = self._x_val = self._y_val = None  # host arrays (NHWC or token ids)
        self._arch = None
        self._batches = []

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        device = self.config["device"]
        if device not in ("cpu", "cuda"):
            raise base.not_supported("device", device, self.title, " (cpu or cuda)")
        threads = int(self.config.get("threads") or 0)
        self._depthwise = _depthwise(device)
        _environment_before_import(device, threads)
        try:
            import jax
            import jax.numpy as jnp
            import flax
            import optax
        except ImportError as exc:
            raise base.Unavailable("cannot import jax, flax and optax ({}); install them in this "
                                   "environment (bench env setup jax)".format(exc)) from exc
        self.jax, self.jnp, self.optax = jax, jnp, optax
        plugin = _cuda_plugin()
        info = {
            "framework_version": jax.__version__,
            "jaxlib_version": _version("jaxlib"),
            "flax_version": flax.__version__,
            "optax_version": optax.__version__,
            "python_version": platform.python_version(),
            "build": "cuda" if plugin else "cpu",
            "cuda_version": _version(plugin.replace("_", "-")) if plugin else None,
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            "settings": dict(_settings(jax), depthwise=self._depthwise),
        }
        if device == "cuda":
            self.refuse_gpu_memory_budget(
                "JAX caps its memory with XLA_PYTHON_CLIENT_MEM_FRACTION, a fraction it reads before "
                "it knows the device's size; bench does not set it yet")
            self.device = _cuda_device(jax, plugin)
            self.gpu = True
            info["device_name"] = self.device.device_kind
        else:
            self.device = jax.devices("cpu")[0]
            info["device_name"] = base.cpu_name()
        # Read back after the backend has started: the pool exists from then on.
        info["threads"] = _threads_applied(threads)
        return info

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        from workers.adapters.jax import layers

        jax, jnp = self.jax, self.jnp
        self.net = layers.network(arch, self._depthwise)
        self._arch = arch
        key = jax.random.PRNGKey(self.config["seed"])
        with jax.default_device(self.device):
            variables = self.net.init(key, _zeros(jnp, arch, 1), train=False)
            params = variables["params"]
            self.tx = self._make_optimizer()
            state = {"params": params, "batch_stats": variables.get("batch_stats", {}),
                     "opt": self.tx.init(params), "step": jnp.zeros((), jnp.int32),
                     "loss_sum": jnp.zeros((), jnp.float32)}
        self._initial = jax.device_get(state)
        self._state = jax.device_put(self._initial, self.device)
        self._steps = 0
        out = jax.eval_shape(lambda v: self.net.apply(v, _zeros(jnp, arch, 1), train=False), variables)
        if list(out.shape[1:]) != arch["output"]:
            raise ValueError("{} ends in shape {}".format(arch["name"], list(out.shape[1:])))
        self._train_fn = None  # compiled by the first prepare_epoch(): a probe never pays for it
        self._eval_fn = None
        self._infer_fn = None
        self._outputs = []
        self._key = key
        return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(params))

    def forward_shape(self, batch):
        variables = {"params": self._state["params"], "batch_stats": self._state["batch_stats"]}
        x = _zeros(self.jnp, self._arch, batch)
        return tuple(self.net.apply(variables, x, train=False).shape)

    def _make_optimizer(self):
        """Optax transformations set to PyTorch's update rules (see docs/frameworks/jax.md)."""
        optax, cfg = self.optax, self.config
        if cfg["optimizer"] == "sgd":
            # optax's trace is PyTorch's buffer: b = momentum * b + g (from zero, no dampening).
            return optax.sgd(cfg["lr"], momentum=cfg.get("momentum") or None)
        if cfg["optimizer"] == "adam":
            return optax.adam(cfg["lr"], b1=models.ADAM_BETA1, b2=models.ADAM_BETA2, eps=models.ADAM_EPS,
                              eps_root=0.0)
        if cfg["optimizer"] == "rmsprop":
            # PyTorch: alpha 0.99, eps added outside the root, square average from zero.
            return optax.rmsprop(cfg["lr"], decay=models.RMSPROP_ALPHA, eps=models.RMSPROP_EPS,
                                 initial_scale=0.0, eps_in_sqrt=False, centered=False, momentum=None,
                                 bias_correction=False)
        raise base.not_supported("optimizer", cfg["optimizer"], self.title)

    def _compile(self, key, batch_shape):
        """Compile the training step for exactly these shapes, now.

        Called by prepare_epoch(), which the runner never times: before warm-up, or before the
        first timed epoch where there is no warm-up.
        """
        jax, jnp, optax, net, tx = self.jax, self.jnp, self.optax, self.net, self.tx
        dropout_key = jax.random.fold_in(key, 1)

        def train(state, x, y):
            rng = jax.random.fold_in(dropout_key, state["step"])

            def loss_of(params):
                logits, updated = net.apply({"params": params, "batch_stats": state["batch_stats"]},
                                            x, train=True, rngs={"dropout": rng},
                                            mutable=["batch_stats"])
                loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
                return loss, updated.get("batch_stats", {})

            (loss, stats), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
            updates, opt = tx.update(grads, state["opt"], state["params"])
            return {"params": optax.apply_updates(state["params"], updates), "batch_stats": stats,
                    "opt": opt, "step": state["step"] + 1, "loss_sum": state["loss_sum"] + loss}

        def evaluate(params, batch_stats, x, y):
            logits = net.apply({"params": params, "batch_stats": batch_stats}, x, train=False)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).sum()
            return loss, (jnp.argmax(logits, axis=1) == y).sum()

        x = jax.ShapeDtypeStruct(batch_shape, self._x.dtype)  # float32 images, int32 token ids
        y = jax.ShapeDtypeStruct(batch_shape[:1], jnp.int32)
        # The state is donated: XLA updates weights and optimizer state in place.
        self._train_fn = jax.jit(train, donate_argnums=0).lower(self._state, x, y).compile()
        self._eval_fn = jax.jit(evaluate)  # compiled by the first (untimed) evaluate()
        if self._tracer is not None:  # it names XLA's custom fusions from the compiled HLO
            self._tracer.hlo_text = self._train_fn.as_text()

    def _compile_inference(self, batch_shape):
        """Compile the forward pass in evaluation mode (no gradients, no state update), now."""
        jax, jnp, net = self.jax, self.jnp, self.net

        def infer(params, batch_stats, x):
            return net.apply({"params": params, "batch_stats": batch_stats}, x, train=False)

        x = jax.ShapeDtypeStruct(batch_shape, self._x.dtype)
        state = self._state
        self._infer_fn = jax.jit(infer).lower(state["params"], state["batch_stats"], x).compile()
        if self._tracer is not None:
            self._tracer.hlo_text = self._infer_fn.as_text()

    def reset(self):
        # The step counter is in the state, so a repeat draws the same dropout masks.
        self.synchronize()
        self._state = self.jax.device_put(self._initial, self.device)
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        import numpy as np

        arrays = data.load(self.config)
        self._x, self._x_val = _host_inputs(np, arrays["x_train"]), _host_inputs(np, arrays["x_val"])
        self._y = arrays["y_train"].astype(np.int32)  # JAX's default integer width
        self._y_val = arrays["y_val"].astype(np.int32)
        return len(self._y), len(self._y_val)

    def prepare_epoch(self, order):
        import numpy as np

        size = self.config["batch_size"]
        steps = self.epoch_steps(order)
        if self.config.get("task") == "inference":
            if self._infer_fn is None:
                self._compile_inference((size,) + self._x.shape[1:])
        elif self._train_fn is None:
            self._compile(self._key, (size,) + self._x.shape[1:])
        index = np.asarray(order[:steps * size], dtype=np.int64)
        x, y = self._x[index], self._y[index]
        batches = [(x[i:i + size], y[i:i + size]) for i in range(0, steps * size, size)]
        # On CPU the batches become device arrays now; on a GPU each step copies its batch in
        # from host memory, as PyTorch's and TensorFlow's steps do.
        self._batches = batches if self.gpu else self.jax.device_put(batches, self.device)
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        x, y = self._batches[index]
        self._state = self._train_fn(self._state, x, y)
        self._steps += 1

    def infer_step(self, index):
        x = self._batches[index][0]
        state = self._state
        # Every output is kept until synchronize(): XLA may run independent calls out of order,
        # so waiting for the last one alone would not mean the epoch's work is done.
        self._output = self._infer_fn(state["params"], state["batch_stats"], x)
        self._outputs.append(self._output)

    def synchronize(self):
        if self._state is not None:
            self.jax.block_until_ready(self._state)
        if self._outputs:
            self.jax.block_until_ready(self._outputs)
            self._outputs = []

    def read_loss_sum(self):
        return float(self._state["loss_sum"])

    def clear_loss_sum(self):
        self._state["loss_sum"] = self.jax.device_put(self.jnp.zeros((), self.jnp.float32), self.device)

    def evaluate(self):
        size, n = self.config["batch_size"], len(self._y_val)
        if n == 0:
            return float("nan"), float("nan")
        total, correct = 0.0, 0
        params, stats = self._state["params"], self._state["batch_stats"]
        for start in range(0, n, size):
            loss, hits = self._eval_fn(params, stats, self._x_val[start:start + size],
                                       self._y_val[start:start + size])
            total += float(loss)
            correct += int(hits)
        return total / n, correct / n

    def tracer(self):
        from workers.adapters.jax import trace

        self._tracer = trace.Tracer()
        return self._tracer

    def device_memory(self):
        """XLA's allocator statistics on a GPU (the runner reads them once, after training, where
        its version has that hook). Unverified: no GPU has run this adapter yet."""
        if not self.gpu:
            return None
        stats = self.device.memory_stats() or {}
        keys = ("peak_bytes_in_use", "bytes_in_use", "bytes_reserved", "bytes_limit")
        out = {k: int(stats[k]) for k in keys if k in stats}
        return dict(out, source="jax memory_stats") if out else None

    def oom_text_types(self):
        runtime = getattr(getattr(self.jax, "errors", None), "JaxRuntimeError", RuntimeError)
        return (runtime, RuntimeError)


def _zeros(jnp, arch, batch):
    """A batch of zeros as the network takes it: NHWC float32 images, or (N, L) int32 token ids."""
    if arch.get("tokens"):
        return jnp.zeros((batch,) + tuple(arch["input"]), jnp.int32)
    c, h, w = arch["input"]
    return jnp.zeros((batch, h, w, c), jnp.float32)


def _host_inputs(np, x):
    """Images NCHW -> NHWC, once and untimed; token ids (N, L) as int32, JAX's default integer
    width (64-bit integers are off unless jax_enable_x64 is set)."""
    if x.ndim == 2:
        return x.astype(np.int32)
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


# -- setup helpers -------------------------------------------------------------------------


def _environment_before_import(device, threads):
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


def _depthwise(device):
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


def _settings(jax):
    """What decides JAX's kernels and precision, as JAX reports them (docs/fairness.md)."""
    config = jax.config

    def option(name):
        try:
            return getattr(config, name)
        except AttributeError:  # an option this JAX version does not have
            return None

    return {
        "execution": "jax.jit, each step compiled ahead of time (XLA)",
        "memory_format": "NHWC",  # images are arranged channels-last once, outside the clock
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
        "enable_x64": option("jax_enable_x64"),
        "default_matmul_precision": option("jax_default_matmul_precision"),
        "backend": jax.default_backend(),
    }


def _threads_applied(requested):
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


def _version(distribution):
    try:
        from importlib import metadata
        return metadata.version(distribution)
    except Exception:
        return None


def _cuda_plugin():
    """The installed CUDA plugin's module name (the CUDA build of jaxlib), or None."""
    import importlib.util

    for name in _CUDA_PLUGINS:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def _cuda_device(jax, plugin):
    who = "jax {}".format(jax.__version__)
    if plugin is None:
        raise base.cpu_only_build(who, "envs/jax-cuda.txt (jax[cuda13]) in this environment",
                                  note=" (no jax-cuda plugin installed)")
    try:
        devices = jax.devices("cuda")
    except RuntimeError as exc:  # JAX says why it sees none: that goes into the message
        blind = "has its CUDA plugin ({}) but sees no GPU ({})".format(plugin, exc)
        raise base.no_gpu_seen(who, blind) from exc
    return devices[0]

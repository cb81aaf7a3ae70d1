"""JAX adapter: workers.models architectures as Flax (linen) modules, trained with Optax.

jax, flax and optax are imported in setup() only, so this module imports anywhere (the
orchestrator lists adapters without their frameworks). The whole training step is one
function, compiled ahead of time by the first prepare_epoch() (modes.py, with the modes and
precisions: docs/frameworks/jax.md, "Modes and precision"); the step returns at once (JAX dispatches
asynchronously); synchronize() blocks on the training state. Images are kept channels-last (NHWC),
Flax's and XLA's CPU layout; token ids (the token models, (N, L)) are int32. A language model's
loss and accuracy are over every position.

What JAX reads from the environment, and the probing of its build and devices, are in env.py.
Threads: XLA's CPU intra-op pool has one thread per CPU the process may run on; ``PJRT_NPROC``,
set before jax is imported, sizes it (docs/frameworks/jax.md says what else was tried).
"""

import functools
import os
import platform

from workers import data, models
from workers.adapters import base
from workers.adapters.jax import env, modes


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
        self._attention = "flax"  # what the attention module calls (attention.KERNELS): setup()
        self._x = self._y = self._x_val = self._y_val = None  # host arrays (NHWC or token ids)
        self._arch = None
        self._batches = []
        self.compute = None  # bf16/fp16: the jnp dtype of the compute (modes.setup); None for float32
        # A data-parallel run's shardings over every replica's device (setup()): the batch split,
        # everything else replicated; None for a run of one process.
        self._split = self._replicated = None

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        device = self.config["device"]
        if device not in ("cpu", "cuda"):
            raise base.not_supported("device", device, self.title, " (cpu or cuda)")
        threads = int(self.config.get("threads") or 0)
        self._depthwise = env.depthwise(device)
        self._attention = env.attention_kernel()
        env.environment_before_import(device, threads)
        try:
            import jax
            import jax.numpy as jnp
            import flax
            import optax
        except ImportError as exc:
            raise base.Unavailable("cannot import jax, flax and optax ({}); install them in this "
                                   "environment (bench env setup jax)".format(exc)) from exc
        self.jax, self.jnp, self.optax = jax, jnp, optax
        if self._attention == "jax.nn" and not hasattr(jax.nn, "dot_product_attention"):
            # An era difference (workers/releases.py): the kernel arrived in jax 0.4.31.
            raise base.Unsupported("BENCH_JAX_ATTENTION=jax.nn: jax {} has no jax.nn.dot_product_attention "
                                   "(0.4.31 brought it); Flax's own attention (the default) runs".format(
                                       jax.__version__))
        replica = self.config.get("replica") or {}
        if replica.get("count", 1) > 1:  # before anything starts JAX's backend
            self._initialize_distributed(jax, replica)
        plugin = env.cuda_plugin()
        info = {
            "framework_version": jax.__version__,
            "jaxlib_version": env.version("jaxlib"),
            "flax_version": flax.__version__,
            "optax_version": optax.__version__,
            "python_version": platform.python_version(),
            "build": "cuda" if plugin else "cpu",
            "cuda_version": env.cuda_version(plugin),
            "cuda_plugin_version": env.version(plugin.replace("_", "-")) if plugin else None,
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            "settings": dict(env.settings(jax), depthwise=self._depthwise, attention=self._attention),
        }
        if device == "cuda":
            self.refuse_gpu_memory_budget(
                "JAX caps its memory with XLA_PYTHON_CLIENT_MEM_FRACTION, a fraction it reads before "
                "it knows the device's size; bench does not set it yet")
            self.device = env.cuda_device(jax, plugin)
            self.gpu = True
            info["device_name"] = self.device.device_kind
        else:
            self.device = jax.local_devices(backend="cpu")[0]  # this process's (of a replica)
            info["device_name"] = base.cpu_name()
        # Read back after the backend has started: the pool exists from then on.
        info["threads"] = env.threads_applied(threads)
        self.compute = modes.setup(self, jax, jnp)
        info["settings"]["execution"] = self.execution["how"]
        if replica.get("count", 1) > 1:
            self._shard(jax)
        return info

    # -- data-parallel replicas --------------------------------------------------------------

    def _initialize_distributed(self, jax, replica):
        """JAX's multi-process runtime (jax.distributed.initialize at the rendezvous, replica 0 its
        coordinator), with gloo's CPU collectives; it must come before the backend starts, so
        setup() calls it, and join_replicas() has nothing left to do."""
        if self.mode() == "eager":
            raise self.unsupported_mode(
                "bench runs JAX's data-parallel training compiled (jax.jit over sharded arrays); "
                "op-by-op dispatch across processes is not built here")
        if self.config.get("device") == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        # On GPUs, one a replica: replica k takes GPU k of its node.
        local = [replica["rank"]] if self.config.get("device") == "cuda" else None
        jax.distributed.initialize(coordinator_address=replica["address"], num_processes=replica["count"],
                                   process_id=replica["rank"], local_device_ids=local)

    def _shard(self, jax):
        """A mesh of every process's device along one axis: the batch split over it, the state
        replicated, so that jax.jit's compiled step is one program whose gradients XLA all-reduces."""
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        devices = [d for d in jax.devices() if d.platform == self.device.platform]
        mesh = Mesh(np.array(devices), ("replicas",))
        self._split = NamedSharding(mesh, PartitionSpec("replicas"))
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self.execution["data_parallel"] = (
            "jax.distributed over {} processes ({}), the batch sharded over a Mesh of every process's "
            "device (NamedSharding, PartitionSpec('replicas')), the state replicated; XLA all-reduces "
            "the gradients inside the jax.jit step".format(
                jax.process_count(), "gloo CPU collectives" if self.device.platform == "cpu" else "NCCL"))

    def join_replicas(self, replica):
        """Done in setup(): jax.distributed.initialize must precede the backend's start."""

    def _place(self, tree):
        """The state on the device, or replicated over every replica's."""
        return self.jax.device_put(tree, self._replicated or self.device)

    def _host(self, value):
        """A device scalar's value on the host (a replicated one's local copy)."""
        if self._replicated is not None:
            value = value.addressable_data(0)
        return value

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        from workers.adapters.jax import attention, layers

        jax, jnp = self.jax, self.jnp
        self.net = layers.network(arch, self._depthwise, self._attention)
        self._arch = arch
        written = sorted(op for op in attention.HOW if base.uses(arch["layers"], op))
        if written:  # the attention models: how their nodes are written (docs/frameworks/jax.md)
            self.execution["layers"] = dict((op, attention.how(op, self._attention)) for op in written)
        else:  # a model built after an attention model by the same adapter (the tests do)
            self.execution.pop("layers", None)
        key = jax.random.PRNGKey(self.config["seed"])
        with jax.default_device(self.device):
            # Initialised by one compiled function, whatever the mode: op by op, XLA compiles
            # every initializer and layer of the model on its own, which took up to twice as long
            # (GoogLeNet 52 s against 28 s, ResNet50 20 s against 18 s on this CPU;
            # docs/performance.md, "The test suite's time"). It is set-up, never timed.
            variables = jax.jit(functools.partial(self.net.init, train=False))(key, _zeros(jnp, arch, 1))
            params = variables["params"]
            self.tx = self._make_optimizer()
            state = {"params": params, "batch_stats": variables.get("batch_stats", {}),
                     "opt": self.tx.init(params), "step": jnp.zeros((), jnp.int32),
                     "loss_sum": jnp.zeros((), jnp.float32)}
            if self.precision() == "fp16":  # the loss scale and its bookkeeping
                state.update(scale=jnp.asarray(modes.INITIAL_SCALE, jnp.float32),
                             good_steps=jnp.zeros((), jnp.int32), skipped=jnp.zeros((), jnp.int32))
        self._initial = jax.device_get(state)
        self._state = self._place(self._initial)
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
        # compiled, as init is: op by op cost GoogLeNet 16 s against 4 s
        return tuple(self.jax.jit(functools.partial(self.net.apply, train=False))(variables, x).shape)

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
        """The training and evaluation steps for exactly these shapes, compiled now (modes.py)."""
        self._train_fn, self._eval_fn = modes.compile_train(
            self, key, self._state, self._x, self._y, (batch_shape, self._split, self._replicated))
        if self._tracer is not None and self.mode() != "eager":  # it names XLA's custom fusions
            self._tracer.hlo_text = self._train_fn.as_text()  # from the compiled HLO

    def _compile_inference(self, batch_shape):
        """The forward pass in evaluation mode, compiled now (modes.py)."""
        self._infer_fn = modes.compile_inference(self, self._state, batch_shape, self._x.dtype)
        if self._tracer is not None and self.mode() != "eager":
            self._tracer.hlo_text = self._infer_fn.as_text()

    def reset(self):
        # The step counter is in the state, so a repeat draws the same dropout masks.
        self.synchronize()
        self._state = self._place(self._initial)
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
        # from host memory, as PyTorch's and TensorFlow's steps do. A replica's batches are its
        # shares of global arrays.
        if self._split is not None:
            make = self.jax.make_array_from_process_local_data
            self._batches = [(make(self._split, bx), make(self._split, by)) for bx, by in batches]
        else:
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

    # A benchmark's own step on the adapter's model and state (benchmarks/inside/bare_jax_loop.py).

    def state(self):
        """The training state on the device: {"params", "batch_stats", "opt", "step", "loss_sum"}."""
        return self._state

    def replace_state(self, state):
        """Make ``state`` the training state (JAX's arrays are immutable: a step returns a new
        one); synchronize() then waits for it."""
        self._state = state

    def keep_output(self, output):
        """Keep an output until synchronize(), which waits for it as for infer_step's own."""
        self._outputs.append(output)

    def synchronize(self):
        if self._state is not None:
            self.jax.block_until_ready(self._state)
        if self._outputs:
            self.jax.block_until_ready(self._outputs)
            self._outputs = []

    def read_loss_sum(self):
        return float(self._host(self._state["loss_sum"]))

    def clear_loss_sum(self):
        self._state["loss_sum"] = self._place(self.jnp.zeros((), self.jnp.float32))

    def evaluate(self):
        size, n = self.config["batch_size"], len(self._y_val)
        if n == 0:
            return float("nan"), float("nan")
        total, correct = 0.0, 0
        params, stats = self._state["params"], self._state["batch_stats"]
        for start in range(0, n, size):
            x, y = self._x_val[start:start + size], self._y_val[start:start + size]
            if self._replicated is not None:  # every replica evaluates the whole split
                x, y = self._place(x), self._place(y)
            loss, hits = self._eval_fn(params, stats, x, y)
            total += float(self._host(loss))
            correct += int(self._host(hits))
        count = self._y_val.size  # a language model's: every position of every sequence
        return total / count, correct / count

    def execution_info(self):
        info = super(Adapter, self).execution_info()
        if self.precision() == "fp16" and self._state is not None and "scale" in self._state:
            # Read once, after training (untimed): the loss scale reached and the skipped steps.
            info["loss_scale"] = float(self._state["scale"])
            info["skipped_steps"] = int(self._state["skipped"])
        return info

    def tracer(self):
        from workers.adapters.jax import trace

        self._tracer = trace.Tracer()
        return self._tracer

    def gpu_tracer(self, why_not_cupti):
        """JAX's own profiler on cuda: XLA's CUPTI tracer, read from its device planes."""
        from workers.adapters.jax import trace

        self._tracer = trace.CudaTracer(why_not_cupti)
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

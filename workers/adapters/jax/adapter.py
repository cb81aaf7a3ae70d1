"""JAX adapter: workers.models architectures as Flax (linen) modules, trained with Optax.

jax, flax and optax are imported in setup() only, so this module imports anywhere (the
orchestrator lists adapters without their frameworks). The whole training step (forward, loss,
backward, optimizer update, batch-norm statistics, the loss summed on the device) is one function,
compiled ahead of time with ``jax.jit(...).lower(...).compile()`` in build(): compilation is never
inside a timed epoch, and a call with any other shape fails instead of compiling again. The step
returns at once (JAX dispatches asynchronously); synchronize() blocks on the training state.
Images are kept channels-last (NHWC), Flax's and XLA's CPU layout; token ids (the token
models, (N, L)) are int32. A language model's loss and accuracy are over every position.

Modes (docs/frameworks/jax.md, "Modes and precision"): compiled (the default) is the jitted step
above; eager calls the same functions without jit inside ``jax.disable_jit()``, so every
primitive (forward, backward, the Optax update) is dispatched on its own; graph is unsupported (a
jaxpr is only ever run by compiling it with XLA, which fuses). Precisions: bf16 and fp16 keep
float32 parameters and cast parameters and inputs to the compute dtype inside the loss function,
the loss in float32; fp16 scales the loss dynamically (written here, as GradScaler does it); tf32
(cuda) traces under ``jax.default_matmul_precision("tensorfloat32")``.

Threads: XLA's CPU intra-op pool has one thread per CPU the process may run on; ``PJRT_NPROC``,
set before jax is imported, sizes it (docs/frameworks/jax.md says what else was tried).
"""

import functools
import os
import platform
import time

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
        self._attention = "flax"  # what the attention module calls (attention.KERNELS): setup()
        self._x = self._y = self._x_val = self._y_val = None  # host arrays (NHWC or token ids)
        self._arch = None
        self._batches = []
        self._compute = None  # bf16/fp16: the jnp dtype of the compute; None for float32
        # A data-parallel run's shardings over every replica's device (setup()): the batch split,
        # everything else replicated; None for a run of one process.
        self._split = self._replicated = None

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        device = self.config["device"]
        if device not in ("cpu", "cuda"):
            raise base.not_supported("device", device, self.title, " (cpu or cuda)")
        threads = int(self.config.get("threads") or 0)
        self._depthwise = _depthwise(device)
        self._attention = _attention_kernel()
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
        replica = self.config.get("replica") or {}
        if replica.get("count", 1) > 1:  # before anything starts JAX's backend
            self._initialize_distributed(jax, replica)
        plugin = _cuda_plugin()
        info = {
            "framework_version": jax.__version__,
            "jaxlib_version": _version("jaxlib"),
            "flax_version": flax.__version__,
            "optax_version": optax.__version__,
            "python_version": platform.python_version(),
            "build": "cuda" if plugin else "cpu",
            "cuda_version": _cuda_version(plugin),
            "cuda_plugin_version": _version(plugin.replace("_", "-")) if plugin else None,
            "preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
            "settings": dict(_settings(jax), depthwise=self._depthwise, attention=self._attention),
        }
        if device == "cuda":
            self.refuse_gpu_memory_budget(
                "JAX caps its memory with XLA_PYTHON_CLIENT_MEM_FRACTION, a fraction it reads before "
                "it knows the device's size; bench does not set it yet")
            self.device = _cuda_device(jax, plugin)
            self.gpu = True
            info["device_name"] = self.device.device_kind
        else:
            self.device = jax.local_devices(backend="cpu")[0]  # this process's (of a replica)
            info["device_name"] = base.cpu_name()
        # Read back after the backend has started: the pool exists from then on.
        info["threads"] = _threads_applied(threads)
        self._setup_mode_and_precision(jax, jnp)
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

    def _setup_mode_and_precision(self, jax, jnp):
        mode, precision = self.mode(), self.precision()
        if mode == "graph":
            raise self.unsupported_mode(
                "JAX runs a traced program (a jaxpr) only by compiling it with XLA, whose CPU and "
                "GPU backends fuse operations and generate code; there is no graph executor that "
                "runs a captured graph on prebuilt kernels (eager is jax.disable_jit(), compiled "
                "is jax.jit)")
        if mode == "eager":
            how = "no jax.jit: the step's functions called inside jax.disable_jit(), each primitive " \
                  "dispatched on its own (forward, backward, Optax update)"
        else:
            how = "jax.jit, each step compiled ahead of time (XLA)"
        self.execution.update(how=how, precision_how="float32 throughout", loss_scaling=None,
                              default_matmul_precision=getattr(jax.config, "jax_default_matmul_precision", None))
        if precision in ("bf16", "fp16"):
            self._compute = jnp.bfloat16 if precision == "bf16" else jnp.float16
            self.execution["precision_how"] = (
                "float32 parameters, optimizer state and batch-norm statistics; parameters and "
                "inputs cast to {} inside the loss function; logits cast to float32 for the "
                "softmax cross-entropy".format(jnp.dtype(self._compute).name))
            if precision == "fp16":
                self.execution["loss_scaling"] = (
                    "dynamic (written in the adapter): loss times the scale, from 2**15; gradients "
                    "unscaled in float32; a step with a non-finite gradient is skipped and halves "
                    "the scale; {} finite steps in a row double it".format(_GROWTH_INTERVAL))
        elif precision == "fp32" and self.config.get("device") == "cuda":
            self.execution.update(precision_how="float32 throughout; traced under "
                                  "jax.default_matmul_precision('float32') (no TF32)",
                                  default_matmul_precision="float32")
        elif precision == "tf32":  # the runner refuses tf32 off cuda before setup
            self.execution.update(precision_how="traced under jax.default_matmul_precision('tensorfloat32')",
                                  default_matmul_precision="tensorfloat32")

    def _matmul_precision(self):
        """The matrix-product precision every trace runs under: tf32's TensorFloat-32; on cuda,
        fp32 in full float32 ("float32": XLA's GPU default may use TF32 for float32 products,
        and fp32 means float32 in every framework, docs/fairness.md); else XLA's default."""
        if self.precision() == "tf32":
            return "tensorfloat32"
        if self.precision() == "fp32" and self.config.get("device") == "cuda":
            return "float32"
        return None

    def _context(self):
        """What every trace (jit's lowering, or an eager step) runs inside: tf32's matmul precision
        and eager's disable_jit, or nothing."""
        import contextlib

        stack = contextlib.ExitStack()
        matmul = self._matmul_precision()
        if matmul:
            stack.enter_context(self.jax.default_matmul_precision(matmul))
        if self.mode() == "eager":
            stack.enter_context(self.jax.disable_jit())
        return stack

    def _call(self, fn):
        """fn as a step calls it: compiled as is; eager inside _context() (disable_jit)."""
        if self.mode() != "eager" and not self._matmul_precision():
            return fn

        def call(*args):
            with self._context():
                return fn(*args)
        return call

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        from workers.adapters.jax import attention, layers

        jax, jnp = self.jax, self.jnp
        self.net = layers.network(arch, self._depthwise, self._attention)
        self._arch = arch
        written = sorted(op for op in attention.HOW if attention.uses(arch["layers"], op))
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
                state.update(scale=jnp.asarray(_INITIAL_SCALE, jnp.float32),
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
        """Compile the training step for exactly these shapes, now.

        Called by prepare_epoch(), which the runner never times: before warm-up, or before the
        first timed epoch where there is no warm-up.
        """
        jax, jnp, optax, net, tx = self.jax, self.jnp, self.optax, self.net, self.tx
        dropout_key = jax.random.fold_in(key, 1)
        cast = self._cast
        scaled = self.precision() == "fp16"

        def loss_of(params, batch_stats, x, y, rng):
            """The mean loss (float32) and the updated batch statistics; bf16/fp16: the forward
            pass in the compute dtype over the float32 parameters."""
            logits, updated = net.apply({"params": cast(params), "batch_stats": batch_stats},
                                        cast(x), train=True, rngs={"dropout": rng},
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
            return _scaled_step(jax, jnp, optax, tx, loss_of, state, x, y, rng)

        def evaluate(params, batch_stats, x, y):
            logits = net.apply({"params": cast(params), "batch_stats": batch_stats}, cast(x),
                               train=False).astype(jnp.float32)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).sum()
            return loss, (jnp.argmax(logits, axis=-1) == y).sum()

        # float32 images or int32 token ids; (N,) labels or (N, L) next tokens. A data-parallel
        # step takes the global batch, split over the replicas.
        count = jax.process_count() if self._split is not None else 1
        shape = (batch_shape[0] * count,) + tuple(batch_shape[1:])
        x = jax.ShapeDtypeStruct(shape, self._x.dtype, sharding=self._split)
        y = jax.ShapeDtypeStruct(shape[:1] + self._y.shape[1:], jnp.int32, sharding=self._split)
        self._record_compute_dtypes(loss_of, batch_shape, dropout_key)
        if self.mode() == "eager":  # no jit anywhere: each primitive dispatched on its own
            self._train_fn, self._eval_fn = self._call(train), self._call(evaluate)
            return
        with self._context():
            # The state is donated: XLA updates weights and optimizer state in place.
            shardings = {"out_shardings": self._replicated} if self._replicated is not None else {}
            jitted = jax.jit(train, donate_argnums=0, **shardings)
            began = time.perf_counter()
            self._train_fn = jitted.lower(self._state, x, y).compile()
            self.ahead_of_time_seconds += time.perf_counter() - began
        self._eval_fn = self._call(jax.jit(evaluate))  # compiled by the first (untimed) evaluate()
        if self._tracer is not None:  # it names XLA's custom fusions from the compiled HLO
            self._tracer.hlo_text = self._train_fn.as_text()

    def _cast(self, tree):
        """bf16/fp16: the floating arrays of a tree in the compute dtype (token ids stay int32)."""
        if self._compute is None:
            return tree
        jnp, dtype = self.jnp, self._compute

        def one(a):
            return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a
        return self.jax.tree_util.tree_map(one, tree)

    def _record_compute_dtypes(self, loss_of, batch_shape, key):
        """What the convolutions and matrix products of the loss compute in: the output dtypes of
        conv_general_dilated and dot_general in its jaxpr (jax.make_jaxpr; traced, not run)."""
        jax, jnp, state = self.jax, self.jnp, self._state
        x = jnp.zeros(batch_shape, self._x.dtype)
        y = jnp.zeros(batch_shape[:1] + self._y.shape[1:], jnp.int32)
        with self._context():
            jaxpr = jax.make_jaxpr(lambda p: jax.value_and_grad(loss_of, has_aux=True)(
                p, state["batch_stats"], x, y, key))(state["params"])
        found = {}
        _primitive_dtypes(jaxpr.jaxpr, found)
        dtypes = {kind: ", ".join(sorted(found[name])) for kind, name in
                  (("conv", "conv_general_dilated"), ("matmul", "dot_general")) if name in found}
        dtypes["source"] = "output dtypes of conv_general_dilated and dot_general in the jaxpr of " \
                           "the loss and its gradient (jax.make_jaxpr)"
        self.execution["compute_dtypes"] = dtypes

    def _compile_inference(self, batch_shape):
        """Compile the forward pass in evaluation mode (no gradients, no state update), now."""
        jax, jnp, net = self.jax, self.jnp, self.net

        cast = self._cast

        def infer(params, batch_stats, x):
            return net.apply({"params": cast(params), "batch_stats": batch_stats}, cast(x), train=False)

        x = jax.ShapeDtypeStruct(batch_shape, self._x.dtype)
        state = self._state
        if self.mode() == "eager":
            self._infer_fn = self._call(infer)
            return
        with self._context():
            began = time.perf_counter()
            self._infer_fn = jax.jit(infer).lower(state["params"], state["batch_stats"], x).compile()
            self.ahead_of_time_seconds += time.perf_counter() - began
        if self._tracer is not None:
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


_INITIAL_SCALE = 2.0 ** 15  # fp16's first loss scale (jmp's default); float16's max is 65504
_GROWTH_INTERVAL = 2000  # finite steps in a row before the scale doubles (GradScaler's)


def _scaled_step(jax, jnp, optax, tx, loss_of, state, x, y, rng):
    """One fp16 step with dynamic loss scaling: the gradient of loss * scale, unscaled in float32;
    where any gradient is not finite the parameters and optimizer state stay as they were and the
    scale halves (not below 1), else the update applies and after _GROWTH_INTERVAL finite steps in a
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
    grow = good >= _GROWTH_INTERVAL
    return {"params": tree.tree_map(keep, stepped, params), "batch_stats": stats,
            "opt": tree.tree_map(keep, opt, state["opt"]), "step": state["step"] + 1,
            "loss_sum": state["loss_sum"] + loss,
            "scale": jnp.where(finite, jnp.where(grow, scale * 2.0, scale), jnp.maximum(scale / 2.0, 1.0)),
            "good_steps": jnp.where(grow, 0, good),
            "skipped": state["skipped"] + jnp.where(finite, 0, 1).astype(jnp.int32)}


def _primitive_dtypes(jaxpr, found):
    """Each primitive's output dtypes in a jaxpr and the jaxprs inside it (jit, scan, custom
    derivatives), collected into found: {primitive name: {dtype names}}."""
    for eqn in jaxpr.eqns:
        found.setdefault(eqn.primitive.name, set()).update(
            str(v.aval.dtype) for v in eqn.outvars if hasattr(v.aval, "dtype"))
        for param in eqn.params.values():
            for sub in (param if isinstance(param, (list, tuple)) else [param]):
                inner = getattr(sub, "jaxpr", None)  # a ClosedJaxpr's, or a Jaxpr itself
                if inner is not None and hasattr(inner, "eqns"):
                    _primitive_dtypes(inner, found)
                elif hasattr(sub, "eqns"):
                    _primitive_dtypes(sub, found)


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


def _attention_kernel():
    """What nn.MultiHeadDotProductAttention calls (attention.KERNELS): BENCH_JAX_ATTENTION where
    set; else "flax", Linen's own dot_product_attention (its default)."""
    value = os.environ.get("BENCH_JAX_ATTENTION")
    if value:
        if value not in ("flax", "jax.nn"):  # attention.KERNELS: that module imports flax
            raise ValueError("BENCH_JAX_ATTENTION={!r}: expected flax or jax.nn".format(value))
        return value
    return "flax"


def _settings(jax):
    """What decides JAX's kernels and precision, as JAX reports them (docs/fairness.md)."""
    config = jax.config

    def option(name):
        try:
            return getattr(config, name)
        except AttributeError:  # an option this JAX version does not have
            return None

    return {
        "execution": None,  # setup() sets it to execution["how"]
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


def _cuda_version(plugin):
    """CUDA's version for a CUDA build: the runtime jaxlib reports ("13.0"), else the major
    version in the plugin's name (jax_cuda13_plugin: "13"); None for a CPU build. (The plugin's
    own version is jax's, which the first GPU check had shown as the CUDA version.)"""
    if plugin is None:
        return None
    try:
        from jax._src.lib import cuda_versions  # private, and absent in some jaxlib builds
        runtime = cuda_versions.cuda_runtime_get_version() if cuda_versions is not None else None
    except Exception:  # noqa: BLE001 - the plugin's name says enough
        runtime = None
    if isinstance(runtime, int) and runtime > 0:
        return "{}.{}".format(runtime // 1000, runtime % 1000 // 10)
    digits = "".join(c for c in plugin.split("cuda", 1)[-1] if c.isdigit())
    return digits or None


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
    return jax.local_devices(backend="cuda")[0] if devices else devices[0]  # a replica's own

"""TensorFlow adapter: translates workers.models architectures into a Keras 3 functional model.

tensorflow and keras are imported in setup() only, so this module imports anywhere (the
orchestrator lists adapters without their frameworks). Training is TensorFlow 2's own fast path:
one ``tf.function`` graph per model (GradientTape, forward, backward and ``optimizer.apply``),
traced in build(), fed with batches that prepare_epoch() has already turned into tensors; the
loss is summed into a ``tf.Variable`` inside the graph, never read per step (the graph still
returns it: see _make_functions). The same step runs eagerly or compiled by XLA in the other
modes, and in Keras's mixed precision (modes.py). Images are kept
channels-last (NHWC), the layout TensorFlow's CPU kernels use; a token model (the GRU, a GPT)
reads its (N, L) int64 token ids as they are, and a language model's targets are (N, L): the
next token at every position (transformer.py has the attention models' layers).
"""

import os
import platform

from workers import data, models
from workers.adapters import base
from workers.adapters.tensorflow import env, layers, modes, transformer


class Adapter(base.Adapter):
    name = "tensorflow"
    title = "TensorFlow"
    oom_text = ("oom when allocating", "out of memory", "can't allocate memory")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.tf = self.keras = None
        self.device = None  # "/CPU:0" or "/GPU:0"
        self.gpu = False
        self.model = None
        self.layer_paths = {}  # {node path: Keras layer} of the built model (transformer.load_canonical)
        self._input = None  # the built model's input shape, as workers.models gives it
        self.optimizer = None
        self._initial = None  # numpy copies of every model variable (weights, BN stats, dropout seeds)
        self._optimizer_initial = None  # numpy copies of the optimizer's variables right after build
        self._train_fn = self._eval_fn = self._infer_fn = self._output = None
        self._loss_sum = None
        self._x = self._y = None  # host arrays (NHWC images or token ids) from load_data()
        self._x_val = self._y_val = None  # validation tensors
        self._batches = []
        self._strategy = None  # a data-parallel run's MultiWorkerMirroredStrategy (setup())

    def mode(self):
        """Unset, TensorFlow's default: a graph on CPU, XLA on a GPU as before (modes.default_mode)."""
        return self.config.get("mode") or modes.default_mode(self.config)

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        threads = int(self.config.get("threads") or 0)
        env.environment_before_import(threads)
        try:
            import keras
            import tensorflow as tf
        except ImportError as exc:
            raise base.Unavailable("cannot import tensorflow ({}); install it in this environment "
                                   "(bench env setup tensorflow)".format(exc)) from exc
        self.tf, self.keras = tf, keras
        device = self.config["device"]
        if device not in ("cpu", "cuda"):
            raise base.not_supported("device", device, self.title, " (cpu or cuda)")
        budget = None
        if device == "cuda":
            env.check_cuda(tf)
            if self.gpu_memory_budget():  # before the context starts, which fixes the devices
                budget = env.memory_budget(tf, self.gpu_memory_budget())
        info = {
            "framework_version": tf.__version__,
            "keras_version": keras.__version__,
            "python_version": platform.python_version(),
            # Before any op: TensorFlow fixes its thread pools and devices when its context starts.
            "threads": env.apply_threads(tf, threads),
            "cuda_version": tf.sysconfig.get_build_info().get("cuda_version"),
            "build": "cuda" if tf.test.is_built_with_cuda() else "cpu",
        }
        if device == "cuda":
            self.gpu, self.device = True, "/GPU:0"
            gpu = tf.config.list_physical_devices("GPU")[0]
            details = tf.config.experimental.get_device_details(gpu)
            info.update(device_name=details.get("device_name", gpu.name),
                        cudnn_version=tf.sysconfig.get_build_info().get("cudnn_version"))
            if budget:
                info["gpu_memory_budget"] = budget
        else:
            self.device = "/CPU:0"
            info["gpus_hidden"] = env.hide_gpus(tf)
            info["device_name"] = base.cpu_name()
        replica = self.config.get("replica") or {}
        if replica.get("count", 1) > 1:  # before any op: the strategy starts TensorFlow's cluster
            self._join(tf, replica)
        info["settings"] = env.settings(tf, self.gpu, self.config.get("model"), self.mode())
        self.execution.update(modes.describe(tf, self.gpu, self.mode(), self.precision()))
        tf.random.set_seed(self.config["seed"])
        return info

    # -- data-parallel replicas --------------------------------------------------------------

    def _join(self, tf, replica):
        """tf.distribute.MultiWorkerMirroredStrategy, one worker a replica, its cluster from
        TF_CONFIG (every replica's endpoint); made in setup(), before any op, as TensorFlow asks.
        The model and optimizer are built in its scope; each step runs in strategy.run, the loss
        averaged over the global batch, the gradients all-reduced across the workers."""
        import json

        if self.mode() != "graph":
            raise self.unsupported_mode(
                "bench runs TensorFlow's data-parallel training as a tf.function graph only (the "
                "default on the CPU); strategy.run eagerly or under XLA is not built here")
        os.environ["TF_CONFIG"] = json.dumps({
            "cluster": {"worker": replica["endpoints"]},
            "task": {"type": "worker", "index": replica["rank"]},
        })
        self._strategy = tf.distribute.MultiWorkerMirroredStrategy()
        self.execution["data_parallel"] = (
            "tf.distribute.MultiWorkerMirroredStrategy ({} workers from TF_CONFIG; collectives {}; "
            "loss averaged over the global batch, gradients all-reduced in optimizer.apply)".format(
                replica["count"], self._strategy.extended._communication_options.implementation.name
                if hasattr(self._strategy.extended, "_communication_options") else "auto"))

    def join_replicas(self, replica):
        """Done in setup(): the strategy must exist before TensorFlow runs an op."""

    def _scope(self):
        import contextlib

        return self._strategy.scope() if self._strategy is not None else contextlib.nullcontext()

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        tf, keras = self.tf, self.keras
        self._release()
        tf.random.set_seed(self.config["seed"])
        with tf.device(self.device), self._scope():
            built = []

            def make():
                builder = layers.Builder(keras, self.config["seed"])
                model, shape = builder.model(arch)
                built.append(shape)
                self.layer_paths = builder.paths
                return model

            model = modes.build_model(keras, self.precision(), make)
            if list(built[0]) != arch["output"]:
                raise ValueError("{} ends in shape {}".format(arch["name"], list(built[0])))
            self.model, self._input = model, tuple(arch["input"])
            self.optimizer = modes.optimizer(keras, self.precision(), self._make_optimizer())
            self.execution["loss_scaling"] = modes.loss_scaling(self.optimizer)
            self.optimizer.build(model.trainable_variables)
            self._loss_sum = tf.Variable(0.0, trainable=False, dtype=tf.float32, name="loss_sum")
        self._initial = [v.numpy() for v in model.variables]
        self._optimizer_initial = [v.numpy() for v in self.optimizer.variables]
        self._steps = 0
        written = sorted({op for op in transformer.HOW if base.uses(arch["layers"], op)})
        if written:  # the attention models: how their nodes are written (docs/frameworks/tensorflow.md)
            self.execution["layers"] = {op: transformer.HOW[op] for op in written}
        self._make_functions(arch)
        return sum(_size(v.shape) for v in model.trainable_weights)

    def forward_shape(self, batch):
        import numpy as np

        spec = _input_spec(self.tf, self._input, batch)
        with self.tf.device(self.device):
            x = np.zeros(spec.shape, dtype=spec.dtype.as_numpy_dtype)
            return tuple(int(d) for d in self.model(x, training=False).shape)

    def _release(self):
        """Drop the previous model (a probe builds all five in one process)."""
        if self.model is None:
            return
        self.model = self.optimizer = self._initial = self._optimizer_initial = None
        self._train_fn = self._eval_fn = self._infer_fn = self._loss_sum = self._output = None
        self.keras.backend.clear_session()  # also collects garbage

    def _make_optimizer(self):
        """Keras optimizers set to PyTorch's defaults where Keras's differ (see the docs page)."""
        optimizers, cfg = self.keras.optimizers, self.config
        if cfg["optimizer"] == "sgd":
            return optimizers.SGD(learning_rate=cfg["lr"], momentum=cfg.get("momentum") or 0.0)
        if cfg["optimizer"] == "adam":
            return optimizers.Adam(learning_rate=cfg["lr"], beta_1=models.ADAM_BETA1,
                                   beta_2=models.ADAM_BETA2, epsilon=models.ADAM_EPS)
        if cfg["optimizer"] == "rmsprop":
            return optimizers.RMSprop(learning_rate=cfg["lr"], rho=models.RMSPROP_ALPHA, momentum=0.0,
                                      epsilon=models.RMSPROP_EPS, centered=False)
        raise base.not_supported("optimizer", cfg["optimizer"], self.title)

    def _make_functions(self, arch):
        """The training, evaluation and inference steps in this run's mode (modes.wrap); in graph
        and compiled mode the timed one is traced now (untimed), not in the first timed step.

        The evaluation graph is traced by the first evaluate(), which is untimed anyway.
        """
        tf, mode = self.tf, self.mode()
        model, optimizer, loss_sum = self.model, self.optimizer, self._loss_sum
        variables = model.trainable_variables
        batch = self.config["batch_size"]
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits
        scaled = self.execution.get("loss_scaling") is not None

        strategy = self._strategy

        def replica_step(x, y):
            """One replica's share of a data-parallel step: its loss over the global batch."""
            with tf.GradientTape() as tape:
                per_sample = xent(labels=y, logits=model(x, training=True))  # (N,) or (N, L)
                # The mean over the global batch (tf.nn.compute_average_loss's rule, every position
                # of a language model's sequences counted): Keras's optimizer sums the replicas'
                # gradients, so each replica's share is its sum over everyone's count.
                count = tf.size(per_sample) * strategy.num_replicas_in_sync
                loss = tf.reduce_sum(per_sample) / tf.cast(count, per_sample.dtype)
            optimizer.apply(tape.gradient(loss, variables), variables)
            return loss

        def train(x, y):
            if strategy is not None:
                loss = strategy.reduce("SUM", strategy.run(replica_step, args=(x, y)), axis=None)
                loss_sum.assign_add(loss)
                return loss
            with tf.GradientTape() as tape:
                # Mixed precision: the logits are float32 already (modes.build_model).
                loss = tf.reduce_mean(xent(labels=y, logits=model(x, training=True)))
                # fp16: the gradients of the scaled loss; LossScaleOptimizer.apply unscales them.
                target = optimizer.scale_loss(loss) if scaled else loss
            optimizer.apply(tape.gradient(target, variables), variables)
            loss_sum.assign_add(loss)
            # Returned though never read: the graph without an output ran 1-2% (small_cnn) to 3-6%
            # (ResNet50) slower per step on CPU in TensorFlow 2.21 (docs/performance.md).
            return loss

        def evaluate(x, y):  # a language model's (N, L, V) logits: every position counts
            logits = tf.cast(model(x, training=False), tf.float32)
            hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int64), y)
            return tf.reduce_sum(xent(labels=y, logits=logits)), tf.reduce_sum(tf.cast(hits, tf.int64))

        # Inference (task: inference): the forward alone, evaluation mode, no tape.
        def infer(x):
            return model(x, training=False)

        # A language model's targets are the next token at every position: (N, L).
        positions = tuple(arch["output"][:-1]) if arch.get("language") else ()
        labels, device = tf.TensorSpec((batch,) + positions, tf.int64), self.device
        train = modes.wrap(tf, mode, train, [_input_spec(tf, arch["input"], batch), labels], device)
        evaluate = modes.wrap(tf, mode, evaluate, [_input_spec(tf, arch["input"], None),
                                                   tf.TensorSpec((None,) + positions, tf.int64)], device)
        infer = modes.wrap(tf, mode, infer, [_input_spec(tf, arch["input"], batch)], device)
        concrete = None
        if mode != "eager":
            with tf.device(self.device):
                # Trace now, untimed, the graph the timed steps will run.
                timed = infer if self.config.get("task") == "inference" else train
                concrete = timed.get_concrete_function()
        dtypes, source = modes.compute_dtypes(model, concrete)
        self.execution.update(compute_dtypes=dtypes, compute_dtypes_from=source)
        self._train_fn, self._eval_fn, self._infer_fn = train, evaluate, infer

    def reset(self):
        # Every variable, the dropout layers' seed states included: repeats draw the same masks.
        # No tf.random.set_seed here: it clears TensorFlow's kernel cache, and the next step would
        # pay the graph's instantiation again (5 s for ResNet50) inside the timed epoch.
        for variable, value in zip(self.model.variables, self._initial):
            variable.assign(value)
        for variable, value in zip(self.optimizer.variables, self._optimizer_initial):
            variable.assign(value)
        self._loss_sum.assign(0.0)
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        import numpy as np

        arrays = data.load(self.config)
        self._x = _channels_last(np, arrays["x_train"])
        self._y = arrays["y_train"]
        with self.tf.device("/CPU:0"):
            self._x_val = self.tf.constant(_channels_last(np, arrays["x_val"]))
            self._y_val = self.tf.constant(arrays["y_val"])
        return len(self._y), len(arrays["y_val"])

    def prepare_epoch(self, order):
        import numpy as np

        size = self.config["batch_size"]
        steps = self.epoch_steps(order)
        index = np.asarray(order[:steps * size], dtype=np.int64)
        x, y = self._x[index], self._y[index]
        self._batches = []
        # Host tensors: on CPU the step reads them in place; on a GPU its graph copies them in.
        with self.tf.device("/CPU:0"):
            for start in range(0, steps * size, size):
                self._batches.append((self.tf.constant(x[start:start + size]),
                                      self.tf.constant(y[start:start + size])))
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        x, y = self._batches[index]
        self._train_fn(x, y)
        self._steps += 1

    def infer_step(self, index):
        self._output = self._infer_fn(self._batches[index][0])

    def train_function(self):
        """The traced training step that train_step calls, a tf.function of (x, y) that adds the
        batch's loss to loss_sum() (benchmarks/frameworks/tf_graph_outputs.py times it)."""
        return self._train_fn

    def loss_sum(self):
        """The variable the training step adds each batch's loss to (read by read_loss_sum())."""
        return self._loss_sum

    def synchronize(self):
        # On CPU a tf.function call returns when its graph has run (synchronous execution is
        # TensorFlow's default); on a GPU kernels may still be queued.
        if self.gpu:
            self.tf.test.experimental.sync_devices()

    def read_loss_sum(self):
        return float(self._loss_sum.numpy())

    def clear_loss_sum(self):
        self._loss_sum.assign(0.0)

    def evaluate(self):
        size, n = self.config["batch_size"], int(self._y_val.shape[0])
        if n == 0:
            return float("nan"), float("nan")
        total, correct = 0.0, 0
        for start in range(0, n, size):
            loss, hits = self._eval_fn(self._x_val[start:start + size], self._y_val[start:start + size])
            total += float(loss.numpy())
            correct += int(hits.numpy())
        count = _size(self._y_val.shape)  # a language model's: every position of every sequence
        return total / count, correct / count

    def tracer(self):
        from workers.adapters.tensorflow import trace

        return trace.Tracer()

    def oom_types(self):
        errors = getattr(self.tf, "errors", None)
        return (errors.ResourceExhaustedError,) if errors is not None else ()

    def oom_text_types(self):
        errors = getattr(self.tf, "errors", None)
        return (errors.OpError if errors is not None else RuntimeError, RuntimeError)


# -- helpers -------------------------------------------------------------------------------


def _input_spec(tf, shape, batch):
    """The model's input for models.input_shape ``shape``: NHWC float32 images or int64 token ids."""
    if len(shape) == 1:
        return tf.TensorSpec((batch,) + tuple(shape), tf.int64)
    c, h, w = shape
    return tf.TensorSpec((batch, h, w, c), tf.float32)


def _channels_last(np, x):
    """NCHW images to NHWC once, untimed (TensorFlow's CPU convolutions are channels-last);
    token ids as they are."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def _size(shape):
    total = 1
    for dim in shape:
        total *= int(dim)
    return total

"""Apache MXNet adapter: translates workers.models architectures into Gluon blocks and trains them.

mxnet is imported in setup() only, so this module imports anywhere. The default (mode graph) is
the path Gluon's users take for speed: a HybridSequential hybridized with static_alloc and
static_shape (one cached graph per forward, memory planned once), SoftmaxCrossEntropyLoss on
a per-sample vector (a language model's: each sequence's mean over its positions, the next token at
every one) and Trainer.step(batch_size). Mode eager is the same blocks not hybridized
(imperative Gluon); mode compiled and the precisions are in modes.py. MXNet's engine is
asynchronous: train_step only queues work (the loss is summed on the engine, never read back per
step) and synchronize() is mx.nd.waitall(). A token model's ids are fed as float32, as Gluon's
Embedding takes them (exact: the vocabulary is far below 2**24).
"""

import gc
import os
import platform
import sys

from workers import data, models
from workers.adapters import base
from workers.adapters.mxnet import attention, env, layers, modes


class Adapter(base.Adapter):
    name = "mxnet"
    title = "MXNet"
    # MXNetError texts for an allocation that failed: the CPU storage manager, CUDA, the C++ runtime.
    oom_text = ("failed to allocate", "out of memory", "std::bad_alloc", "cudamalloc")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.mx = None
        self.ctx = None
        self.gpu = False
        self.net = None
        self.blocks = {}  # {workers.models.pure node path: block}, for attention.load_canonical
        self._input = None
        self.trainer = None
        self.loss_fn = None
        self._initial = None  # (parameter, copy of its initial value), for reset()
        self._loss_sum = None
        self._x = self._y = None  # training arrays (numpy) from load_data()
        self._val = []  # validation batches as (x, y, real rows), padded to batch_size
        self._batches = []
        self._output = None  # the last inference step's output
        self._scaled = False  # fp16: AMP's loss scaling in train_step (modes.py)
        self._amp = None
        self._kv = None  # a data-parallel run's kvstore (dist_sync), once join_replicas() joined
        self._replicas = 1
        self._helpers = []  # replica 0's scheduler and server processes

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        requested = int(self.config.get("threads") or 0)
        # MXNet reads its thread counts once, when libmxnet starts its engine: before the import.
        before_import = "mxnet" not in sys.modules
        if requested > 0:
            for var in ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
                os.environ[var] = str(requested)
        modes.before_import(self)
        try:
            import mxnet as mx
        except (ImportError, OSError, AttributeError) as exc:
            # AttributeError: mxnet 1.9.1 uses np.bool, which numpy 1.24 removed.
            raise base.Unavailable(
                "cannot import mxnet ({}: {}); install mxnet==1.9.1 with numpy<1.24 in this "
                "environment (bench env setup mxnet)".format(type(exc).__name__, exc)) from exc
        self.mx = mx
        mx.random.seed(self.config["seed"])
        info = {
            "framework_version": mx.__version__,
            "python_version": platform.python_version(),
            "threads": env.threads(mx, requested, before_import),
            "cuda_version": None,
            "build": "cuda" if mx.runtime.Features().is_enabled("CUDA") else "cpu",
        }
        if self.config["device"] == "cuda":
            info["cuda_version"] = env.check_cuda(mx)
            self.refuse_gpu_memory_budget("MXNet has no per-process cap on device memory "
                                          "(its pool settings only shape what it keeps)")
            self.gpu, self.ctx = True, mx.gpu(0)
            info["device_name"] = "gpu(0)"
        elif self.config["device"] == "cpu":
            self.ctx = mx.cpu()
            info["device_name"] = base.cpu_name()
        else:
            raise base.not_supported("device", self.config["device"], self.title, " (cpu or cuda)")
        info["settings"] = env.settings(mx, self.config.get("model"))
        modes.after_import(self, mx)
        if self.precision() == "fp16":
            from mxnet.contrib import amp

            self._amp, self._scaled = amp, True
        info["settings"]["execution"] = self.execution["how"]
        return info

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        mx = self.mx
        self._release()
        gluon = mx.gluon
        translator = layers.Translator(mx)
        net, shape = translator.sequential(arch["layers"], tuple(arch["input"]))
        if list(shape) != arch["output"]:
            raise ValueError("{} ends in shape {}".format(arch["name"], list(shape)))
        # Every layer was given its input size, so nothing is deferred: the shapes (and the
        # parameter count) are known now, without a forward pass. Zero is a cheap placeholder.
        net.initialize(mx.init.Zero(), ctx=self.ctx)
        mx.random.seed(self.config["seed"])  # initial weights independent of what ran before
        for node, targets, channels in translator.made:
            layers.initialise(mx, node, targets, channels)
        self.blocks = translator.blocks
        # One entry per Parameter: a tied output's weight is the embedding's, listed (and counted) once.
        params = list(net.collect_params().values())
        self._initial = [(p, p.data().copy()) for p in params]
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.net, self._input = net, tuple(arch["input"])
        written = sorted(op for op in attention.HOW if base.uses(arch["layers"], op))
        if written:  # the attention models: how their nodes are written (docs/frameworks/mxnet.md)
            self.execution["layers"] = dict((op, attention.HOW[op]) for op in written)
        modes.prepare(self, net, self.loss_fn, self._input)
        self.trainer = self._make_trainer()
        self._loss_sum = mx.nd.zeros((1,), ctx=self.ctx)
        self._steps = 0
        return _trainable(params)

    def forward_shape(self, batch):
        """Output shape of a forward pass (inference mode) on zeros of the built input shape
        (float32 zeros are token 0 for a recurrent model)."""
        x = self.mx.nd.zeros((batch,) + self._input, ctx=self.ctx)
        return tuple(self.net(x).shape)

    def _release(self):
        """Drop the previous model (a probe builds several in one process) and its buffers."""
        if self.net is None:
            return
        self.mx.nd.waitall()
        self.net = self.trainer = self.loss_fn = self._initial = None
        gc.collect()  # Gluon blocks hold reference cycles: without this VGG16 stays (1.1 GB)

    # -- data-parallel replicas --------------------------------------------------------------

    def join_replicas(self, replica):
        """MXNet's parameter-server training: kvstore dist_sync. Replica 0 starts the scheduler and
        one server (processes of its own, in its process group, so that they end with the run);
        every replica is a worker. The kvstore sums the workers' gradients and each worker updates
        its own copy of the weights (update_on_kvstore False), so Trainer.step takes the global
        batch."""
        import subprocess

        if self.precision() != "fp32":
            raise self.unsupported_precision("bench runs MXNet's kvstore training in fp32 only "
                                             "(AMP with dist_sync is not built here)")
        host, port = replica["address"].rsplit(":", 1)
        variables = {"DMLC_PS_ROOT_URI": host, "DMLC_PS_ROOT_PORT": port, "DMLC_NUM_WORKER": str(replica["count"]),
                     "DMLC_NUM_SERVER": "1", "PS_VERBOSE": "0"}
        if host.startswith("127."):
            variables["DMLC_INTERFACE"] = "lo"  # ps-lite otherwise looks for an address on another interface
        os.environ.update(variables)
        if replica["rank"] == 0:
            for role in ("scheduler", "server"):
                self._helpers.append(subprocess.Popen(
                    [sys.executable, "-c", "import mxnet"], env=dict(os.environ, DMLC_ROLE=role)))
        os.environ["DMLC_ROLE"] = "worker"
        self._kv = self.mx.kv.create("dist_sync")
        self._replicas = replica["count"]
        self.execution["data_parallel"] = (
            "mxnet.kvstore dist_sync ({} workers, one server and a scheduler started by replica 0; "
            "gradients summed on the server, each worker's Trainer updating its own weights, "
            "update_on_kvstore False)".format(replica["count"]))

    def _make_trainer(self):
        """Trainer with PyTorch's defaults written out where MXNet's differ (see the docs)."""
        cfg = self.config
        params = self.net.collect_params()
        settings = {"learning_rate": cfg["lr"], "wd": 0.0}
        if cfg["optimizer"] == "sgd":
            settings["momentum"] = cfg.get("momentum") or 0.0
        elif cfg["optimizer"] == "adam":
            settings.update(beta1=models.ADAM_BETA1, beta2=models.ADAM_BETA2, epsilon=models.ADAM_EPS)
        elif cfg["optimizer"] == "rmsprop":
            # PyTorch's alpha 0.99 is MXNet's gamma1 (MXNet defaults to 0.9).
            settings.update(gamma1=models.RMSPROP_ALPHA, epsilon=models.RMSPROP_EPS, centered=False)
        else:
            raise base.not_supported("optimizer", cfg["optimizer"], self.title)
        if self._kv is not None:  # the run's one kvstore: its keys are initialised once
            return self.mx.gluon.Trainer(params, cfg["optimizer"], settings, kvstore=self._kv,
                                         update_on_kvstore=False)
        # A single context needs no kvstore: updates run locally on the parameters' device.
        trainer = self.mx.gluon.Trainer(params, cfg["optimizer"], settings, kvstore=None)
        if self._scaled:
            self._amp.init_trainer(trainer)  # a fresh loss scaler (2**16) with each trainer
        return trainer

    def reset(self):
        for param, value in self._initial:
            param.set_data(value)  # copies into the arrays the cached graph is bound to
        if self._kv is not None:
            # The same Trainer (a second one would initialise the kvstore's keys again), its
            # optimizer state cleared: every worker starts its repeat from the same state.
            for updater in self.trainer._updaters:
                updater.states.clear()
                updater.states_synced.clear()
            self.trainer._optimizer.num_update = 0
            self.trainer._optimizer._index_update_count.clear()
        else:
            self.trainer = self._make_trainer()
        # Reseed too: every repeat then draws the same dropout masks, so repeats are comparable.
        self.mx.random.seed(self.config["seed"])
        self._loss_sum[:] = 0
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        mx, size = self.mx, self.config["batch_size"]
        arrays = data.load(self.config)
        # Images are float32 already; token ids become float32, Gluon Embedding's input type.
        self._x = arrays["x_train"].astype("float32", copy=False)
        # SoftmaxCrossEntropyLoss picks with float labels; int64 would be cast on every step.
        self._y = arrays["y_train"].astype("float32")
        x_val, y_val = arrays["x_val"].astype("float32", copy=False), arrays["y_val"].astype("float32")
        # The validation batches keep the training batch's shape (the last one is padded): a
        # cached graph with static_shape would otherwise be re-planned for a new shape.
        self._val = []
        for start in range(0, len(y_val), size):
            x, y = x_val[start:start + size], y_val[start:start + size]
            rows = len(y)
            if rows < size:
                x = _pad(x, size)
                y = _pad(y, size)
            self._val.append((mx.nd.array(x, ctx=self.ctx), mx.nd.array(y, ctx=self.ctx), rows))
        return len(self._y), len(y_val)

    def prepare_epoch(self, order):
        mx, size = self.mx, self.config["batch_size"]
        steps = self.epoch_steps(order)
        # The previous epoch's steps may still read the arrays we are about to replace.
        self.synchronize()
        index = order[:steps * size]
        host = mx.cpu_pinned(0) if self.gpu else self.ctx
        x = mx.nd.array(self._x[index], ctx=host)
        y = mx.nd.array(self._y[index], ctx=host)
        self._batches = [(x[i * size:(i + 1) * size], y[i * size:(i + 1) * size])
                         for i in range(steps)]
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        x, y = self._batches[index]
        if self.gpu:
            x = x.as_in_context(self.ctx)
            y = y.as_in_context(self.ctx)
        with self.mx.autograd.record():
            # One value per sample, in float32 (AMP's casts end before the loss: the softmax
            # cross-entropy is on its float32 list).
            loss = self.loss_fn(self.net(x), y)
            if self._scaled:  # fp16: AMP's dynamic loss scaling, inside record() as AMP asks
                with self._amp.scale_loss(loss, self.trainer) as scaled:
                    self.mx.autograd.backward(scaled)
        if not self._scaled:
            loss.backward()  # of the sum: Trainer.step(batch_size) turns it into the mean's gradient
        # The mean's gradient: the kvstore summed every replica's, so the global batch.
        self.trainer.step(self.config["batch_size"] * self._replicas)
        self._loss_sum += loss.sum().astype("float32")  # queued on the engine: no read-back per step
        self._steps += 1

    def infer_step(self, index):
        x = self._batches[index][0]
        if self.gpu:
            x = x.as_in_context(self.ctx)
        # Outside autograd.record(): inference mode (dropout off, BN on running statistics),
        # nothing recorded for gradients. Queued on the engine; synchronize() waits for it.
        self._output = self.net(x)

    def synchronize(self):
        if self.mx is not None:
            self.mx.nd.waitall()

    def read_loss_sum(self):
        return self._loss_sum.asscalar()

    def clear_loss_sum(self):
        self._loss_sum[:] = 0

    def losses_per_step(self):
        return self.config["batch_size"]  # the loss is summed per sample (see train_step)

    def evaluate(self):
        mx = self.mx
        n = sum(rows for _, _, rows in self._val)
        if n == 0:
            return float("nan"), float("nan")
        total = mx.nd.zeros((1,), ctx=self.ctx, dtype="float64")
        correct = mx.nd.zeros((1,), ctx=self.ctx, dtype="float64")
        for x, y, rows in self._val:  # not recording: dropout off, BN on running statistics
            logits = self.net(x)
            loss = self.loss_fn(logits, y)
            if rows < len(y):
                logits, loss, y = logits[:rows], loss[:rows], y[:rows]
            total += loss.astype("float64").sum()
            correct += (mx.nd.argmax(logits.astype("float32"), axis=-1) == y).sum().astype("float64")
        # The loss is per sample already (a language model's: the mean over its positions); the
        # accuracy is over every position of every sequence.
        positions = self._val[0][1][0].size
        return total.asscalar() / n, correct.asscalar() / (n * positions)

    def tracer(self):
        from workers.adapters.mxnet import trace

        return trace.Tracer()


# -- helpers -------------------------------------------------------------------------------


# -- helpers ---------------------------------------------------------------------------------


def _trainable(params):
    """Parameters that get gradients, as Gluon marks them (BN running statistics are "null")."""
    count = 0
    for param in params:
        if param.grad_req != "null":
            size = 1
            for dim in param.shape:
                size *= dim
            count += size
    return count


def _pad(array, rows):
    """``array`` with zero rows appended up to ``rows`` (numpy, untimed)."""
    import numpy as np

    out = np.zeros((rows,) + array.shape[1:], dtype=array.dtype)
    out[:len(array)] = array
    return out

"""Apache Singa adapter: translates workers.models architectures into singa layers and trains them.

Runs on Python 3.6 (singa 3.0.0.dev1 is a cp36 wheel). singa is imported in setup() only. The
default (mode graph) is Singa's own fast path: a ``singa.model.Model`` compiled with
``use_graph=True``, whose first step buffers forward, loss, backward and the SGD update as a
computational graph that every later step replays (``Device.RunGraph``) after the batch is copied
into the input tensors; inference buffers the eval-mode forward the same way (layers.Forward).
Mode eager is the same Model compiled with ``use_graph=False``: every operator runs as Python
calls it. Singa has no compiler (mode compiled) and no 16-bit training (modes.py says why). The
attention models' nodes are written in attention.py; a language model's loss is over every position.

The wheel's generated SWIG binding does not match its own Python layer. The workarounds below are
each named after the error they mend (docs/frameworks/singa.md has the evidence):

- host <-> tensor copies: ``Tensor.CopyFloatDataFromHostPtr() missing 1 required positional
  argument: 'num'`` (no numpy typemap was compiled in); ``HostIO`` hands the C++ methods a real
  ``float *`` / ``int *`` through SWIG's own pointer object;
- ``TypeError: unsupported operand type(s) for /=`` inside softmax_cross_entropy: only the Python 2
  ``__idiv__`` is bound;
- ``TypeError: 'SwigPyObject' object is not iterable`` from batch normalisation: the CPU kernels
  return a ``std::vector<singa::Tensor>`` that has no Python wrapper; ``HostIO.unpack`` moves the
  tensors out;
- dropout: ``autograd.Dropout`` scales kept units by ``1 / 1 - ratio`` (= 1 - ratio), not
  1 / (1 - ratio); ``_Dropout`` applies the inverted-dropout scale every other framework uses;
- layers made outside a Model all name their parameters ``.W`` / ``.b``; ``opt.SGD`` keys its
  momentum buffers by name, so the second layer's update reads the first one's buffer and
  segfaults. Every parameter gets a unique name before the optimizer sees it.
"""

import gc
import os
import platform

from workers import data
from workers.adapters import base
from workers.adapters.singa import env, layers, modes
from workers.adapters.singa.binding import HostIO

_SINGA = {}  # the imported modules and the classes made from them, filled by import_singa()


class Adapter(base.Adapter):
    name = "singa"
    title = "Singa"
    oom_text = ("out of memory", "bad_alloc", "cannot allocate memory")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.dev = None
        self.net = None
        self.optimizer = None
        self.translator = None  # layers.Translator of the built model (load_canonical reads it)
        self._arch = None  # the architecture built
        self._params = []  # (name, tensor) of every trainable parameter, in build order
        self._states = []  # tensors reset() restores: parameters and BN running statistics
        self._initial = []  # device copies of _states at build time
        self._tx = self._ty = None  # the graph's input tensors, refilled each step
        self._loss_sum = None
        self.graph_runs = 0  # training runs of the buffered graph since build (trace.py divides by it)
        self._arrays = None
        self._x_epoch = self._y_epoch = None
        self._output = None  # the last inference step's output
        self._forward = None  # mode graph, task inference: layers.Forward, buffered on first use

    # -- data-parallel replicas --------------------------------------------------------------

    def join_replicas(self, replica):
        """Singa's data-parallel training is singa.opt.DistOpt, whose gradient all-reduce is NCCL's
        (singa_wrap.Communicator): GPUs only, and only in a build compiled with it."""
        from singa import singa_wrap

        if self.config["device"] == "cpu":
            raise base.Unsupported(
                "Singa's data-parallel training (singa.opt.DistOpt) all-reduces the gradients with NCCL "
                "(singa_wrap.Communicator), on GPUs only; it has no CPU collective")
        if not hasattr(singa_wrap, "Communicator"):
            raise base.Unsupported(
                "this singa build has no NCCL communicator (singa_wrap.Communicator: compiled without "
                "USE_DIST), which singa.opt.DistOpt needs")
        raise base.Unsupported(
            "singa.opt.DistOpt with NCCL is not built into bench's Singa adapter yet (never run here: "
            "no CUDA build of singa on this machine)")

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        threads = int(self.config.get("threads") or 0)
        if threads > 0:
            # OpenMP (oneDNN's kernels) and OpenBLAS (dense layers) read these when they load.
            for var in env.THREAD_VARS:
                os.environ[var] = str(threads)
        if self.config["optimizer"] != "sgd":
            raise base.Unsupported(
                "optimizer {!r}: singa 3.0.0.dev1's singa.opt, the optimizer API of autograd and "
                "Model training, has only SGD; Adam and RMSProp exist only in the deprecated "
                "pre-autograd singa.optimizer (one apply_with_lr call per named parameter), whose "
                "Adam counts steps in Python, which a buffered graph never re-runs".format(
                    self.config["optimizer"]))
        sg = import_singa()
        self.refuse_gpu_memory_budget("Singa has no per-process cap on device memory")
        cuda_build = bool(getattr(sg["wrap"], "USE_CUDA", False))
        if self.config["device"] == "cuda" and cuda_build:
            # A CUDA build the user brought (bench env use): never run on a GPU here, unverified.
            self.dev = sg["device"].create_cuda_gpu_on(0)
        elif self.config["device"] == "cuda":
            raise base.Unavailable(
                "singa {} from PyPI is a CPU-only build (singa_wrap has no USE_CUDA; it was compiled "
                "with {}); running on cuda needs a CUDA build of singa (from source, or Singa's "
                "conda packages) in this environment".format(
                    sg["version"], ", ".join(sorted(k for k in dir(sg["wrap"]) if k.startswith("USE_")))))
        elif self.config["device"] != "cpu":
            raise base.not_supported("device", self.config["device"], self.title, " (cpu)")
        else:
            self.dev = sg["device"].get_default_device()
        self.dev.SetRandSeed(int(self.config["seed"]))
        modes.check(self, sg)
        return {
            "framework_version": sg["version"],
            "python_version": platform.python_version(),
            "threads": env.threads_report(threads),
            "device_name": "cuda:0" if self.config["device"] == "cuda" else base.cpu_name(),
            "cuda_version": None,
            "build": "cuda" if cuda_build else "cpu",
            "settings": {
                "training_path": self.execution["how"],
                # What the wheel was compiled with: USE_DNNL is oneDNN, USE_CBLAS OpenBLAS.
                "build_flags": dict((k, getattr(sg["wrap"], k)) for k in dir(sg["wrap"])
                                    if k.startswith("USE_")),
            },
        }

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        import numpy as np

        sg = import_singa()
        if arch.get("tokens") and not arch.get("language"):
            raise base.Unsupported(_recurrent_reason(sg, self.config["device"]))
        self._release()
        # Conv, pooling and BN handles (and the attention models' constants) are made for one
        # input shape, batch size included. Token ids travel as float32 (exact below 2**24).
        size = int(self.config["batch_size"])
        shape = tuple(arch["input"])
        # ids carry no gradient (autograd.equal, the embedding's comparison, has no backward)
        self._tx = sg["tensor"].Tensor((size,) + shape, self.dev, sg["tensor"].float32,
                                       requires_grad=not arch.get("tokens"))
        self._tx.set_value(0.0)
        # a language model's targets: every position of every sequence, as one column of labels
        labels = size * (shape[0] if arch.get("language") else 1)
        self._ty = sg["tensor"].Tensor((labels,), self.dev, sg["tensor"].int32)
        HostIO.put(self._ty, np.zeros(labels, dtype=np.int32))
        self._loss_sum = sg["tensor"].Tensor((1,), self.dev)
        self._loss_sum.set_value(0.0)
        self._arch = arch
        self.translator = translator = layers.Translator(sg, self.dev, size)
        steps, out = translator.layers(arch["layers"], shape)
        if list(out) != arch["output"]:
            raise ValueError("{} ends in shape {}".format(arch["name"], list(out)))
        self.optimizer = sg["opt"].SGD(lr=float(self.config["lr"]),
                                       momentum=float(self.config.get("momentum") or 0.0))
        self.net = sg["Net"](steps, self.optimizer, self._loss_sum,
                             (labels, out[-1]) if arch.get("language") else None)
        # compile() runs the layers' lazy initialisation (their parameters appear here) inside a
        # graph it then discards; training buffers its own graph on the first step.
        self.net.compile([self._tx], is_train=True, use_graph=self.mode() == "graph", sequential=False)
        self._forward = None
        self._params, self._states = translator.initialise(int(self.config["seed"]))
        self._initial = [t.clone() for t in self._states]
        self._steps = 0
        self.graph_runs = 0
        self.execution["compute_dtypes"] = modes.compute_dtypes(sg, arch, self._tx, self._params)
        used = set(node["op"] for node in modes.nodes(arch["layers"]))
        if used & set(layers.attention.HOW):
            self.execution["layers"] = dict((op, layers.attention.HOW[op]) for op in sorted(used)
                                            if op in layers.attention.HOW)
        return sum(t.size() for _, t in self._params)

    def _release(self):
        """Drop the previous model and its graph (a probe builds every model in one process)."""
        if self.dev is not None:
            self.dev.ResetGraph()
        self.net = self.optimizer = self._forward = self.translator = None
        self._params, self._states, self._initial = [], [], []
        gc.collect()

    def reset(self):
        for tensor, initial in zip(self._states, self._initial):
            tensor.copy_data(initial)
        # A fresh SGD state, in place: the buffered graph holds these very tensors. PyTorch's first
        # step sets the momentum buffer to the gradient; 0 * momentum + gradient is the same.
        for moment in self.optimizer.moments.values():
            moment.set_value(0.0)
        self.optimizer.step_counter.set_value(0.0)
        self.dev.SetRandSeed(int(self.config["seed"]))  # the same dropout masks every repeat
        self._loss_sum.set_value(0.0)
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        arrays = data.load(self.config)
        # token ids as float32: the embedding compares them with 0..V-1 on the device
        self._arrays = {
            "x_train": arrays["x_train"].astype("float32"), "y_train": arrays["y_train"].astype("int32"),
            "x_val": arrays["x_val"].astype("float32"), "y_val": arrays["y_val"].astype("int32"),
        }
        return len(self._arrays["y_train"]), len(self._arrays["y_val"])

    def prepare_epoch(self, order):
        import numpy as np

        size = self.config["batch_size"]
        steps = self.epoch_steps(order)
        index = np.asarray(order[:steps * size], dtype=np.int64)
        x, y = self._arrays["x_train"], self._arrays["y_train"]
        shape = (steps, size) + x.shape[1:]
        if self._x_epoch is None or self._x_epoch.shape != shape:
            self._x_epoch = np.empty(shape, dtype=np.float32)
            self._y_epoch = np.empty((steps, size) + y.shape[1:], dtype=np.int32)
        np.take(x, index, axis=0, out=self._x_epoch.reshape((-1,) + x.shape[1:]))
        np.take(y, index, axis=0, out=self._y_epoch.reshape((-1,) + y.shape[1:]))
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        HostIO.put(self._tx, self._x_epoch[index])
        HostIO.put(self._ty, self._y_epoch[index])
        self.net(self._tx, self._ty)  # train_one_batch also adds the loss to _loss_sum
        self._steps += 1
        self.graph_runs += 1

    def graph_inputs(self):
        """The graph's input tensors (images, labels), refilled by each step: another step on the
        adapter's model feeds the compiled graph through them (benchmarks/inside/bare_singa_loop.py)."""
        return self._tx, self._ty

    def infer_step(self, index):
        HostIO.put(self._tx, self._x_epoch[index])
        if self.mode() == "graph":  # the eval-mode forward, buffered once and replayed
            if self._forward is None:
                self._forward = import_singa()["Forward"](self.net)
            self._output = self._forward(self._tx)
            self.graph_runs += 1
            return
        if self.net.training:  # once: eval mode (autograd.training off) runs forward() alone,
            self.net.eval()    # eagerly, with nothing kept for backward
        self._output = self.net(self._tx)

    def synchronize(self):
        self.dev.Sync()

    def read_loss_sum(self):
        return float(HostIO.get(self._loss_sum)[0])

    def clear_loss_sum(self):
        self._loss_sum.set_value(0.0)

    def forward_shape(self, batch):
        import numpy as np

        if batch != self._tx.shape[0]:
            # Singa fixes the batch size at build (its handles, the attention models' constants):
            # build again for this batch rather than pad it to batch_size (gpt2_small's logits at
            # 32 x 1024 positions are 6.6 GB, its one-hot input as much again)
            built = self.config["batch_size"]
            self.config["batch_size"] = batch
            try:
                self.build(self._arch)
            finally:
                self.config["batch_size"] = built
        shape = tuple(self._tx.shape[1:])  # (3, H, W) or a language model's (L,)
        return self.logits(np.zeros((batch,) + shape, dtype=np.float32)).shape

    def logits(self, x):
        """Eval-mode forward of a batch of at most batch_size images (or token sequences, as
        float32 ids); returns numpy logits ((n, classes), a language model's (n, L, vocabulary))."""
        import numpy as np

        size, n = self._tx.shape[0], len(x)  # the batch the model was built for
        batch = x if n == size else np.concatenate(
            [x, np.zeros((size - n,) + x.shape[1:], dtype=np.float32)])  # handles fix the batch size
        HostIO.put(self._tx, batch)
        self.net.eval()
        try:
            return HostIO.get(self.net(self._tx))[:n]
        finally:
            self.net.train()

    def evaluate(self):
        import numpy as np

        x, y = self._arrays["x_val"], self._arrays["y_val"]
        if len(y) == 0:
            return float("nan"), float("nan")
        total, correct, size = 0.0, 0, self.config["batch_size"]
        for start in range(0, len(y), size):
            logits = self.logits(x[start:start + size]).astype(np.float64)
            labels = y[start:start + size].reshape(-1)  # a language model's: every position
            logits = logits.reshape(len(labels), -1)
            top = logits.max(axis=1, keepdims=True)
            log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            total += float((log_z - logits[np.arange(len(labels)), labels]).sum())
            correct += int((logits.argmax(axis=1) == labels).sum())
        return total / y.size, correct / y.size

    def tracer(self):
        from workers.adapters.singa import trace

        if self.mode() != "graph":
            raise base.Unsupported(
                "Singa's per-operator timing is its buffered graph's time profiling "
                "(Device.PrintTimeProfiling); mode {!r} runs no graph".format(self.mode()))

        return trace.Tracer(self)


# -- setup helpers -------------------------------------------------------------------------


def import_singa():
    """Import singa once, apply the binding fixes and make the classes that subclass its own."""
    if _SINGA:
        return _SINGA
    try:
        import singa
        from singa import autograd, device, layer, model, opt, singa_wrap, tensor
    except ImportError as exc:
        raise base.Unavailable("cannot import singa ({}); it needs Python 3.6 and its own "
                               "environment: bench env setup singa".format(exc))
    # softmax_cross_entropy divides in place with `/=`; the binding only has Python 2's __idiv__.
    if not hasattr(singa_wrap.Tensor, "__itruediv__"):
        singa_wrap.Tensor.__itruediv__ = singa_wrap.Tensor.__idiv__
    HostIO.wrap = singa_wrap
    _SINGA.update(version=getattr(singa, "__version__", "unknown"), wrap=singa_wrap, tensor=tensor,
                  autograd=autograd, device=device, layer=layer, opt=opt)
    _SINGA.update(layers.classes(autograd, layer, model, singa_wrap))
    _SINGA.update(layers.attention.operators(autograd, singa_wrap))
    return _SINGA


def _recurrent_reason(sg, device):
    """Why singa cannot build the recurrent models (token ids, an embedding, a GRU) here."""
    no_embedding = ("its autograd has no embedding lookup that reads token ids from a tensor "
                    "(autograd.Gather takes a Python list of indices, one slice per index)")
    if device != "cuda":
        return ("gru: singa {}'s only GRU is its cuDNN RNN (layer.CudnnRNN with rnn_mode 'gru', run "
                "by autograd._RNN through GpuRNNForwardTraining), which is cuDNN-only: both assert "
                "singa.USE_CUDA and there is no CPU kernel for it; {} either".format(
                    sg["version"], no_embedding))
    # Its cuDNN GRU computes PyTorch's function (PyTorch's GRU is cuDNN's), but nothing feeds it.
    return ("gru on cuda: singa {}'s cuDNN GRU (layer.CudnnRNN, rnn_mode 'gru') exists, but {} "
            "(the attention models write theirs as a one-hot product); bench does not wire the "
            "cuDNN RNN (and has never run it: no CUDA build of singa was available)".format(
                sg["version"], no_embedding))

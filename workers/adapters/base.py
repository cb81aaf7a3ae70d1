"""The small interface every framework adapter implements.

Adapters build the model, the optimizer and the data feed, and run a step. They never time
anything: the shared runner (workers.runner) owns warm-up, clocks, synchronisation and events.
"""


import platform

from workers import execution


def cpu_name():
    """The CPU model, for each adapter's device_name on CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except (IOError, OSError):
        pass
    return platform.processor() or platform.machine()


class WorkerFailure(Exception):
    """Base of the failures an adapter reports deliberately."""


class Unsupported(WorkerFailure):
    """The framework cannot do this model, device or option; the message is the reason."""


class Unavailable(WorkerFailure):
    """The framework cannot be imported or used here; the message says why and how to fix it."""


def base_unsupported(name, what):
    return Unsupported("the {} adapter has no {}".format(name or "this", what))


def not_supported(what, value, title, choices=""):
    """Unsupported for an option or layer an adapter cannot do: "optimizer 'adam' is not supported
    by the Singa adapter"; ``choices`` (" (cpu or cuda)") says what it can do instead."""
    return Unsupported("{} {!r} is not supported by the {} adapter{}".format(what, value, title, choices))


def cpu_only_build(who, install, note=""):
    """Unavailable for a run on cuda with a framework built without CUDA: what to install instead.

    who: the framework and its version; note: what the build is, in brackets, where that helps.
    """
    return Unavailable("{} is a CPU-only build{}; install {} to run on cuda".format(who, note, install))


def no_gpu_seen(who, blind, look_at=" and CUDA_VISIBLE_DEVICES"):
    """Unavailable for a CUDA build that sees no GPU: what it is and lacks (``blind``), what to check."""
    return Unavailable("{} {}; check the NVIDIA driver (nvidia-smi){}".format(who, blind, look_at))


def check_cuda(who, cuda_build, sees_gpu, install, blind, note="", look_at=" and CUDA_VISIBLE_DEVICES"):
    """The check every adapter makes before a cuda run, in one order: a CPU-only build first (the
    message says what to install), then a CUDA build that sees no GPU. ``sees_gpu`` is a callable,
    called for a CUDA build only (asking a CPU-only build for its devices may fail)."""
    if not cuda_build:
        raise cpu_only_build(who, install, note)
    if not sees_gpu():
        raise no_gpu_seen(who, blind, look_at)


def uses(nodes, op):
    """Whether a layer list (residual bodies and shortcuts included) has a node ``op``: which of
    an adapter's attention nodes an architecture uses, for its execution record."""
    for node in nodes:
        if node["op"] == op or any(uses(node.get(k) or [], op) for k in ("body", "shortcut")):
            return True
    return False


class Tracer(object):
    """A per-operator (CPU) or per-kernel (GPU) profiler, driven by the shared runner.

    start() and stop() bracket each timed epoch: start() just before the clock starts, stop()
    after the clock has stopped and the device is synchronised; warm-up and evaluation are never
    traced. records() is called once, after the last timed epoch: a list of dicts with `name`,
    `calls` and `total_seconds` (summed over every traced epoch), and `device` where it is not
    the tracer's own. `notes` says what the backend changed or could not see.
    """

    backend = ""
    device = "cpu"

    def __init__(self):
        self.notes = []
        self.totals = {}  # name -> [calls, seconds], summed over the traced epochs

    def start(self):
        raise NotImplementedError

    def stop(self):
        raise NotImplementedError

    def add(self, name, calls, seconds):
        total = self.totals.setdefault(name, [0, 0.0])
        total[0] += int(calls)
        total[1] += float(seconds)

    def records(self):
        return [{"name": name, "calls": calls, "total_seconds": seconds}
                for name, (calls, seconds) in sorted(self.totals.items(), key=lambda kv: -kv[1][1])]


class Adapter(object):
    """Base class; see docs/adding-a-framework.md for the contract of each method."""

    name = ""
    title = ""  # the framework's name in messages ("PyTorch")
    # Lower-case fragments of the framework's out-of-memory messages, found by is_oom() in an
    # exception of one of oom_text_types() (frameworks raise them as generic runtime errors).
    oom_text = ()

    def __init__(self, config):
        self.config = config
        self._steps = 0  # training steps since the last epoch_loss(); train_step() counts them
        # How this run executes, filled in by the adapter (setup/build) for execution_info():
        # "how" (the framework call of its mode, e.g. "torch.compile(backend='inductor')"),
        # "precision_how" ("torch.autocast(cpu, bfloat16)"), "loss_scaling" (fp16's scaler or
        # None), "compute_dtypes" (what the convolutions and matrix products ran in, where the
        # adapter can see it), and any setting behind them.
        self.execution = {}
        # Seconds spent compiling ahead of time, outside any step (JAX's lower().compile() in
        # prepare_epoch()): the runner adds them to the warm-up's compile_seconds, which would
        # otherwise see only what the first steps cost beyond a steady one.
        self.ahead_of_time_seconds = 0.0
        self._batches = []  # prepare_epoch()'s batches, where the adapter keeps them as a list

    # -- execution mode and precision (workers/execution.py; docs/fairness.md) ---------------

    def mode(self):
        """The mode this run resolves to: eager, graph or compiled."""
        return execution.mode_of(self.config)

    def precision(self):
        """The precision this run resolves to: fp32, bf16, fp16 or tf32."""
        return execution.precision_of(self.config)

    def unsupported_mode(self, why):
        """Unsupported for this run's mode in this framework: "mode 'graph' is not available in
        JAX: <why>"."""
        return Unsupported("mode {!r} is not available in {}: {}".format(self.mode(), self.title, why))

    def unsupported_precision(self, why):
        """Unsupported for this run's precision: "precision 'fp16' is not available in MXNet on
        cpu: <why>"."""
        return Unsupported("precision {!r} is not available in {} on {}: {}".format(
            self.precision(), self.title, self.config.get("device"), why))

    def execution_info(self):
        """What ran, for the result: the resolved mode and precision, whether the mode was the
        framework's default, and what the adapter recorded in self.execution."""
        info = {"mode": self.mode(), "mode_default": not self.config.get("mode"),
                "precision": self.precision()}
        info.update(self.execution)
        return info

    # -- data-parallel replicas (docs/distributed.md) ----------------------------------------

    def join_replicas(self, replica):
        """Join the run's other replicas through the framework's own data-parallel machinery, after
        setup() and before build(): ``replica`` is {"rank", "count", "address"} (host:port on which
        they meet). The runner gives each replica its share of every global batch; the adapter makes
        its optimizer step the same on all of them (gradients averaged over the replicas)."""
        raise Unsupported("data-parallel training (replicas) is not built into bench's {} adapter yet".format(
            self.title or self.name))

    def setup(self):
        """Import the framework, apply thread settings, check the device.

        Returns a dict: framework_version, threads (what was applied), device_name.
        Raises Unavailable when the import fails, Unsupported for a device it cannot use.
        """
        raise NotImplementedError

    def build_model(self):
        """Build the configured model from its one definition (workers.models); return params."""
        from workers import models

        cfg = self.config
        arch = models.build_arch(cfg["model"], cfg["classes"], cfg["image_size"], bool(cfg.get("features")),
                                 sequence_length=cfg.get("sequence_length"))
        return self.build(arch)

    def build(self, arch):
        """Build model and optimizer from the architecture (workers.models); return trainable params."""
        raise NotImplementedError

    def forward_shape(self, batch):
        """Output shape of one forward pass on zeros of (batch, 3, image_size, image_size).

        Used by `bench models` after build(); it checks the output, it is not timed.
        """
        raise NotImplementedError

    def reset(self):
        """Restore the initial weights and a fresh optimizer state (untimed)."""
        raise NotImplementedError

    def load_data(self):
        """Create or load the dataset; return (train_size, val_size)."""
        raise NotImplementedError

    def prepare_epoch(self, order):
        """Arrange host-side batches of config['batch_size'] in this order, dropping a partial one.

        Untimed. Returns the number of steps.
        """
        raise NotImplementedError

    def epoch_steps(self, order):
        """The number of full batches of config['batch_size'] in ``order`` (prepare_epoch() drops a
        partial last one); ValueError when there is not one."""
        size = self.config["batch_size"]
        steps = len(order) // size
        if steps == 0:
            raise ValueError("batch_size {} is larger than the training set ({} images)".format(
                size, len(order)))
        return steps

    def epoch_batches(self):
        """The batches prepare_epoch() arranged, (x, y) in the framework's own tensors and
        layout: what train_step(index) reads. A benchmark's own step on the adapter's model takes
        them to see the very same input (benchmarks/inside/zoo_common.py). Empty for an adapter
        that keeps its epoch otherwise (Singa: host arrays copied into its graph's inputs)."""
        return self._batches

    def train_step(self, index):
        """One optimizer step on batch ``index``; must not synchronise the device."""
        raise NotImplementedError

    def infer_step(self, index):
        """One forward pass on batch ``index`` in evaluation mode (dropout off, batch-norm on its
        running statistics), recording no gradients (task: inference); keeps the output (on the
        device) so nothing is optimised away; must not synchronise the device."""
        raise base_unsupported(self.name, "task: inference")

    def synchronize(self):
        """Block until all queued device work is done."""

    def epoch_loss(self):
        """Mean training loss over the steps since the last call (after synchronize, untimed).

        Every adapter sums the loss where it is computed (on the device) and reads it here only,
        never per step; the hooks read and clear that sum.
        """
        if not self._steps:
            return float("nan")
        value = self.read_loss_sum() / (self._steps * self.losses_per_step())
        self.clear_loss_sum()
        self._steps = 0
        return value

    def read_loss_sum(self):
        """The loss summed since the last clear_loss_sum(), as a host number (a device read)."""
        raise NotImplementedError

    def clear_loss_sum(self):
        """Set the loss sum back to zero."""
        raise NotImplementedError

    def losses_per_step(self):
        """How many losses each step adds to the sum: 1 (the batch's mean), or the batch size
        where an adapter sums the per-sample losses."""
        return 1

    def evaluate(self):
        """Return (loss, accuracy) on the validation split."""
        raise NotImplementedError

    def gpu_memory_budget(self):
        """The configured device-memory cap in bytes (None: no cap). The runner has already
        refused it on a device other than cuda."""
        return self.config.get("gpu_memory_budget")

    def refuse_gpu_memory_budget(self, why):
        """For frameworks with no way to cap their device memory: the run is unsupported."""
        if self.gpu_memory_budget():
            raise Unsupported("gpu_memory_budget: {}".format(why))

    def tracer(self):
        """The framework's own operator profiler for `trace: kernels` on CPU (a Tracer).

        Called before setup(), so a tracer that must configure the framework before it is
        imported can; it must not import the framework itself until start().
        """
        raise Unsupported("{} has no operator profiler that bench can read".format(self.name))

    def gpu_tracer(self, why_not_cupti):
        """A kernel tracer through the framework's own profiler, for cuda runs without CUPTI."""
        raise Unsupported("trace: kernels on cuda needs CUPTI ({}); {} has no GPU profiler of its "
                          "own that bench can read".format(why_not_cupti, self.name))

    def is_oom(self, exc):
        """True when ``exc`` is this framework's out-of-memory error (host or device): a
        MemoryError, one of oom_types(), or one of oom_text_types() whose message has oom_text."""
        if isinstance(exc, MemoryError) or isinstance(exc, self.oom_types()):
            return True
        text = self.oom_message(exc)
        return isinstance(exc, self.oom_text_types()) and any(t in text for t in self.oom_text)

    def oom_types(self):
        """The framework's own out-of-memory exception classes (none before setup())."""
        return ()

    def oom_text_types(self):
        """The exception classes whose message is read for oom_text."""
        return (RuntimeError,)

    def oom_message(self, exc):
        """The message as oom_text is matched against it."""
        return str(exc).lower()

    def device_memory(self):
        """What the framework's own allocator says of device memory (bytes), or None.

        Read once after training (and after an out-of-memory failure, as its evidence), so it is
        set beside NVML's per-process figure from outside.
        """
        return None

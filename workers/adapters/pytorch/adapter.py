"""PyTorch adapter: translates workers.models architectures into torch.nn modules and trains them.

torch is imported in setup() only, so this module imports anywhere (the orchestrator lists
adapters without their frameworks). The step is kept as lean as a hand-written loop: batches
are arranged before the clock starts and the loss is summed on the device, never read per step.

Modes (docs/frameworks/pytorch.md, "Modes and precision"): eager runs the nn.Module; graph wraps
it in ``torch.compile(backend="aot_eager")`` (Dynamo and AOTAutograd capture the forward and
backward graphs, eager ATen kernels run them, no code is generated); compiled wraps it in
``torch.compile(backend="inductor", mode=compile_mode)``. The wrapper shares the module's
parameters, so reset() loads the initial weights into the module itself. Precisions: bf16 and fp16
are ``torch.autocast`` around the forward pass and the loss (fp16 with ``torch.amp.GradScaler``);
tf32 (cuda) switches on TensorFloat-32 matrix products and convolutions.
"""

import atexit
import os
import platform
import shutil
import tempfile

from workers import data, models
from workers.adapters import base
from workers.adapters.pytorch import layers



class Adapter(base.Adapter):
    name = "pytorch"
    title = "PyTorch"
    oom_text = ("out of memory", "can't allocate memory")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.torch = None
        self.device = None
        self.cuda = False
        self.model = None
        self.optimizer = None
        self._initial = None  # CPU copy of the initial state_dict, for reset()
        self._loss_sum = None
        self._x = self._y = self._x_val = self._y_val = None  # host tensors from load_data()
        self._x_epoch = self._y_epoch = None  # this epoch's batches, in order (pinned on cuda)
        self._batches = []
        self._output = None  # the last inference step's output, kept on the device
        self.memory_format = None  # torch.channels_last or torch.contiguous_format, for images
        self._run = None  # what a step calls: the module (eager) or its torch.compile wrapper
        self._autocast = None  # (device type, dtype) of a bf16/fp16 run's torch.autocast, else None
        self._scaler = None  # fp16's torch.amp.GradScaler
        self._replica = None  # a data-parallel run's replica: join_replicas() joined its group

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        try:
            import torch
        except ImportError as exc:
            raise base.Unavailable("cannot import torch ({}); install it in this environment "
                                   "(bench env setup pytorch)".format(exc)) from exc
        self.torch = torch
        threads = _apply_threads(torch, int(self.config.get("threads") or 0))
        torch.manual_seed(self.config["seed"])
        info = {
            "framework_version": torch.__version__,
            "python_version": platform.python_version(),
            "threads": threads,
            "cuda_version": torch.version.cuda,
            # What the installed wheel was built for, whatever the device of this run.
            "build": "cuda" if torch.version.cuda else "cpu",
        }
        if self.config["device"] == "cuda":
            _check_cuda(torch)
            self.cuda = True
            self.device = torch.device("cuda")
            # Let cuDNN pick the fastest algorithms for these shapes; warm-up absorbs the search.
            torch.backends.cudnn.benchmark = True
            index = _cuda_index(self.config)
            budget = self.gpu_memory_budget()
            if budget:
                info["gpu_memory_budget"] = _memory_budget(torch, budget, index)
            info.update(device_name=torch.cuda.get_device_name(index),
                        cudnn_version=torch.backends.cudnn.version(), cudnn_benchmark=True)
        elif self.config["device"] == "cpu":
            self.device = torch.device("cpu")
            info["device_name"] = base.cpu_name()
        else:
            raise base.not_supported("device", self.config["device"], self.title, " (cpu or cuda)")
        layout = _memory_format(self.cuda, self.config)
        self.memory_format = getattr(torch, layout)
        self._setup_mode(torch)
        self._setup_precision(torch)
        info["settings"] = _settings(torch, layout, self.execution["how"])
        return info

    def _setup_mode(self, torch):
        """What a step calls in this run's mode; the graph and compiled wrappers are made in build()."""
        mode = self.mode()
        if mode == "eager":
            how = "eager (nn.Module called op by op)"
        elif mode == "graph":
            how = "torch.compile(backend='aot_eager')"
        else:
            how = "torch.compile(backend='inductor', mode={!r})".format(self._compile_mode())
            self.execution["inductor_cpp_compiler"] = _inductor_compiler(torch)
        if mode != "eager":
            self.execution["compile_cache"] = _compile_cache()
        self.execution["how"] = how

    def _compile_mode(self):
        return self.config.get("compile_mode") or "default"

    def _setup_precision(self, torch):
        precision, device = self.precision(), "cuda" if self.cuda else "cpu"
        self.execution.update(precision_how="float32 throughout", loss_scaling=None)
        if self.cuda and precision != "tf32":
            # fp32 means float32 in every framework (docs/fairness.md): TF32 off for the matrix
            # products (PyTorch's default) and for cuDNN's convolutions too (PyTorch's default lets
            # them use TF32, which TensorFlow's and JAX's fp32 runs here do not), whatever a run
            # before this one in the process set.
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        if precision == "tf32":  # the runner refuses tf32 off cuda before setup
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            self.execution.update(
                precision_how="torch.backends.cuda.matmul.allow_tf32 = True, "
                              "torch.backends.cudnn.allow_tf32 = True",
                float32_matmul_precision=torch.get_float32_matmul_precision())
        elif precision in ("bf16", "fp16"):
            dtype = torch.bfloat16 if precision == "bf16" else torch.float16
            if not torch.amp.is_autocast_available(device):
                raise self.unsupported_precision(
                    "torch {} has no autocast for {}".format(torch.__version__, device))
            self._autocast = (device, dtype)
            self.execution["precision_how"] = "torch.autocast({!r}, dtype=torch.{}) around forward and " \
                "loss; backward and optimizer step outside, float32 parameters".format(device, str(dtype)[6:])
            if precision == "fp16":
                self._scaler = torch.amp.GradScaler(device)
                self.execution["loss_scaling"] = "torch.amp.GradScaler({!r}): dynamic, from 2**16, " \
                    "halved on non-finite gradients (that step skipped), doubled after 2000 finite".format(device)
        if self.cuda:
            self.execution["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
            self.execution["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)

    def _autocasting(self):
        """The run's torch.autocast context (bf16/fp16), or a context that changes nothing."""
        if self._autocast is None:
            return _NoContext()
        return self.torch.autocast(self._autocast[0], dtype=self._autocast[1])

    # -- data-parallel replicas --------------------------------------------------------------

    def join_replicas(self, replica):
        """torch.distributed's process group over TCP at the rendezvous (gloo on the CPU, NCCL on
        GPUs, one GPU a replica); build() wraps the model in DistributedDataParallel."""
        import datetime

        dist = self.torch.distributed
        if not dist.is_available():
            raise base.Unsupported("this torch {} was built without torch.distributed".format(
                self.torch.__version__))
        backend = "nccl" if self.cuda else "gloo"
        if self.cuda:
            count = self.torch.cuda.device_count()
            if replica["rank"] >= count:
                raise base.Unsupported("replica {} needs a GPU of its own; this machine has {}".format(
                    replica["rank"], count))
            self.torch.cuda.set_device(replica["rank"])
            self.device = self.torch.device("cuda", replica["rank"])
        # The timeout bounds a collective that never completes; bench's own timeout ends the run
        # first where it is shorter.
        seconds = max(60.0, float(self.config.get("timeout") or 300))
        dist.init_process_group(backend, init_method="tcp://" + replica["address"], rank=replica["rank"],
                                world_size=replica["count"], timeout=datetime.timedelta(seconds=seconds))
        self._replica = replica
        self.execution["data_parallel"] = (
            "torch.nn.parallel.DistributedDataParallel ({} over {} replicas, gradients averaged in "
            "buckets during backward)".format(backend, replica["count"]))

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        torch = self.torch
        # Seed here too, so the initial weights do not depend on what ran before build().
        torch.manual_seed(self.config["seed"])
        with torch.no_grad():
            model, shape = layers.sequential(torch.nn, arch["layers"], tuple(arch["input"]))
        if list(shape) != arch["output"]:
            raise ValueError("{} ends in shape {}".format(arch["name"], list(shape)))
        self.model = model.to(self.device).train()
        if len(arch["input"]) == 3:  # images: the layout setup() chose (a no-op for contiguous)
            self.model = self.model.to(memory_format=self.memory_format)
        self._initial = {k: v.detach().to("cpu", copy=True)
                         for k, v in self.model.state_dict().items()}
        self.optimizer = self._make_optimizer()
        self._loss_sum = torch.zeros((), device=self.device)
        self._steps = 0
        self.execution["compute_dtypes"] = self._compute_dtypes(arch)
        written = sorted({op for op in layers.HOW if _uses(arch["layers"], op)})
        if written:  # the attention models: how their nodes are written (docs/models.md)
            self.execution["layers"] = {op: layers.HOW[op] for op in written}
        self._run = self._wrap(self.model)
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def _wrap(self, model):
        """The module itself (eager), or torch.compile's wrapper of it (graph, compiled). Nothing is
        compiled here: Dynamo captures on the first call (warm-up, or the first step)."""
        mode = self.mode()
        if self._replica is not None:
            # DDP around the module (its hooks average the gradients during backward), and
            # torch.compile around DDP, the order PyTorch's DDP documentation gives.
            ddp = self.torch.nn.parallel.DistributedDataParallel
            model = ddp(model, device_ids=[self.device.index] if self.cuda else None)
        if mode == "eager":
            return model
        if self.config["model"] == "gru":
            # Dynamo breaks the graph at nn.GRU and runs it op by op outside any graph: the
            # model's heart would run eager under a graph or compiled label.
            raise self.unsupported_mode(
                "torch {}'s Dynamo does not capture nn.GRU (a graph break: the GRU would run "
                "eagerly outside the graph; torch._dynamo.config.allow_rnn is experimental and "
                "off)".format(self.torch.__version__))
        # Dynamo's caches and counters start empty for this model: a process that built another
        # model before (a test's driver) would otherwise fill Sequential.forward's recompile
        # limit (8 entries), after which Dynamo runs the model eagerly without a word; and
        # execution_info() reports this run's graphs and graph breaks from the counters.
        import torch._dynamo

        torch._dynamo.reset()
        # And where a run itself reaches the limit, the run fails with Dynamo's error instead of
        # falling back to eager (the option exists from torch 2.6; older ones keep the fallback).
        config = torch._dynamo.config
        if hasattr(config, "fail_on_recompile_limit_hit"):
            config.fail_on_recompile_limit_hit = True
        self.execution["fail_on_recompile_limit_hit"] = getattr(config, "fail_on_recompile_limit_hit", None)
        if mode == "graph":
            return self.torch.compile(model, backend="aot_eager")
        return self.torch.compile(model, backend="inductor", mode=self._compile_mode())

    def execution_info(self):
        info = super(Adapter, self).execution_info()
        if self.mode() != "eager" and self._run is not None:
            from torch._dynamo.utils import counters

            # What Dynamo captured: graphs compiled, and each graph break's reason (a break runs
            # the code between graphs eagerly).
            info["dynamo_graphs"] = int(counters["stats"].get("unique_graphs", 0))
            breaks = counters.get("graph_break", {})
            info["graph_breaks"] = int(sum(breaks.values()))
            if breaks:
                info["graph_break_reasons"] = sorted(str(k).split("\n")[0] for k in breaks)[:5]
        return info

    def _compute_dtypes(self, arch):
        """The output dtypes of the first Conv2d and the first Linear in one forward pass of the
        eager module on zeros (batch 2, evaluation mode, no gradients, under this run's autocast),
        made once at build, before any step: what autocast runs those layers in."""
        torch = self.torch
        seen = {}
        hooks = []
        for kind, cls in (("conv", torch.nn.Conv2d), ("matmul", torch.nn.Linear)):
            first = next((m for m in self.model.modules() if isinstance(m, cls)), None)
            if first is not None:
                hooks.append(first.register_forward_hook(_record_dtype(seen, kind)))
        shape = tuple(arch["input"])
        if arch.get("tokens"):
            x = torch.zeros((2,) + shape, dtype=torch.long, device=self.device)
        else:
            x = torch.zeros((2,) + shape, device=self.device)
            if len(shape) == 3:
                x = x.contiguous(memory_format=self.memory_format)
        self.model.eval()
        try:
            with torch.no_grad(), self._autocasting():
                self.model(x)
        finally:
            self.model.train()
            for hook in hooks:
                hook.remove()
        seen["source"] = "forward hooks on the first Conv2d and Linear, one eager forward at build"
        return seen

    def forward_shape(self, batch):
        torch, config = self.torch, self.config
        shape = models.input_shape(config["model"], config["image_size"], config.get("sequence_length"))
        self.model.eval()
        try:
            with torch.no_grad():
                if config["model"] in models.TOKEN_MODELS:  # token ids
                    x = torch.zeros((batch,) + shape, dtype=torch.long, device=self.device)
                else:
                    x = torch.zeros((batch,) + shape, device=self.device)
                return tuple(self.model(x).shape)
        finally:
            self.model.train()

    def _make_optimizer(self):
        optim, cfg = self.torch.optim, self.config
        params = self.model.parameters()
        if cfg["optimizer"] == "sgd":
            return optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum") or 0.0)
        if cfg["optimizer"] == "adam":
            return optim.Adam(params, lr=cfg["lr"])
        if cfg["optimizer"] == "rmsprop":
            return optim.RMSprop(params, lr=cfg["lr"])
        raise base.not_supported("optimizer", cfg["optimizer"], self.title)

    def reset(self):
        # Reseed too: every repeat then draws the same dropout masks, so repeats are comparable.
        self.torch.manual_seed(self.config["seed"])
        self.model.load_state_dict(self._initial)  # in place: a compiled wrapper shares them
        self.model.train()
        self.optimizer = self._make_optimizer()
        if self._scaler is not None:  # a fresh scale too, as at the start
            self._scaler = self.torch.amp.GradScaler(self._autocast[0])
        self._loss_sum.zero_()
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        arrays = data.load(self.config)
        from_numpy = self.torch.from_numpy
        self._x, self._y = from_numpy(arrays["x_train"]), from_numpy(arrays["y_train"])
        self._x_val, self._y_val = from_numpy(arrays["x_val"]), from_numpy(arrays["y_val"])
        return len(self._y), len(self._y_val)

    def prepare_epoch(self, order):
        torch, size = self.torch, self.config["batch_size"]
        steps = self.epoch_steps(order)
        # Copies of the previous epoch may still read the pinned buffer we are about to refill.
        self.synchronize()
        shape = (steps * size,) + tuple(self._x.shape[1:])
        if self._x_epoch is None or tuple(self._x_epoch.shape) != shape:
            # Pinned (page-locked) host memory lets the host->device copy run asynchronously.
            self._x_epoch = torch.empty(shape, dtype=self._x.dtype, pin_memory=self.cuda)
            # (N,) class labels, or a language model's (N, L) next tokens
            self._y_epoch = torch.empty(shape[:1] + tuple(self._y.shape[1:]), dtype=self._y.dtype,
                                        pin_memory=self.cuda)
        index = torch.as_tensor(order[:steps * size], dtype=torch.long)
        torch.index_select(self._x, 0, index, out=self._x_epoch)
        torch.index_select(self._y, 0, index, out=self._y_epoch)
        xs = self._x_epoch.split(size)
        if self._x_epoch.dim() == 4 and self.memory_format is not torch.contiguous_format:
            xs = [x.contiguous(memory_format=self.memory_format) for x in xs]  # untimed, CPU only
        self._batches = list(zip(xs, self._y_epoch.split(size)))
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        x, y = self._batches[index]
        if self.cuda:
            x = x.to(self.device, non_blocking=True)
            y = y.to(self.device, non_blocking=True)
        optimizer = self.optimizer
        optimizer.zero_grad(set_to_none=True)
        if self._autocast is None:
            loss = _cross_entropy(self.torch, self._run(x), y)
            loss.backward()
            optimizer.step()
        else:
            with self._autocasting():  # forward and loss; backward outside, as PyTorch's docs say
                loss = _cross_entropy(self.torch, self._run(x), y)
            if self._scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler = self._scaler
                scaler.scale(loss).backward()
                scaler.step(optimizer)  # skipped where the unscaled gradients are not finite
                scaler.update()
        self._loss_sum += loss.detach().float()  # stays on the device: no sync per step
        self._steps += 1

    def infer_step(self, index):
        x = self._batches[index][0]
        if self.cuda:
            x = x.to(self.device, non_blocking=True)
        if self.model.training:  # once: inference never trains, so eval mode stays
            self.model.eval()
        with self.torch.no_grad(), self._autocasting():
            self._output = self._run(x)

    def synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def read_loss_sum(self):
        return self._loss_sum.item()

    def clear_loss_sum(self):
        self._loss_sum.zero_()

    def evaluate(self):
        torch, size, n = self.torch, self.config["batch_size"], len(self._y_val)
        if n == 0:
            return float("nan"), float("nan")
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, n, size):
                    x = self._x_val[start:start + size].to(self.device)
                    if x.dim() == 4:
                        x = x.contiguous(memory_format=self.memory_format)
                    y = self._y_val[start:start + size].to(self.device)
                    with self._autocasting():
                        logits = self._run(x)
                    logits = logits.float()  # the loss and the accuracy in float32
                    total += _cross_entropy(torch, logits, y, reduction="sum")
                    correct += (logits.argmax(-1) == y).sum()
        finally:
            self.model.train()
        count = self._y_val.numel()  # a language model's: every position of every sequence
        return total.item() / count, correct.item() / count

    def tracer(self):
        from workers.adapters.pytorch import trace

        return trace.CpuTracer()

    def gpu_tracer(self, why_not_cupti):
        from workers.adapters.pytorch import trace

        return trace.CudaTracer(why_not_cupti)

    def device_memory(self):
        if not self.cuda:
            return None
        cuda = self.torch.cuda
        # Reserved is what the caching allocator holds from the driver (what NVML sees, less the
        # CUDA context); allocated is what live tensors use of it.
        return {
            "source": "torch.cuda",
            "max_memory_reserved": int(cuda.max_memory_reserved()),
            "max_memory_allocated": int(cuda.max_memory_allocated()),
            "memory_reserved": int(cuda.memory_reserved()),
            "total_memory": int(cuda.get_device_properties(self.device.index or 0).total_memory),
        }

    def oom_types(self):
        oom = getattr(getattr(self.torch, "cuda", None), "OutOfMemoryError", None)
        return (oom,) if oom is not None else ()


# -- setup helpers -------------------------------------------------------------------------


def _apply_threads(torch, n):
    """Apply threads > 0 to both of torch's pools; report what torch actually uses."""
    applied = {"requested": n}
    if n > 0:
        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(n)
            applied["interop_applied"] = True
        except RuntimeError as exc:  # only allowed before any inter-op work has started
            applied["interop_applied"] = False
            applied["interop_error"] = str(exc)
    applied["intra_op"] = torch.get_num_threads()
    applied["inter_op"] = torch.get_num_interop_threads()
    return applied


MEMORY_FORMATS = ("channels_last", "contiguous_format")


def _memory_format(cuda, config):
    """The layout of image batches and convolution weights: BENCH_TORCH_MEMORY_FORMAT where set
    (channels_last or contiguous_format); else channels_last for image models on the CPU from
    models.CHANNELS_LAST_MIN_SIZE px (oneDNN's native layout), and PyTorch's default otherwise (on CUDA
    not measured)."""
    value = os.environ.get("BENCH_TORCH_MEMORY_FORMAT")
    if value:
        if value not in MEMORY_FORMATS:
            raise ValueError("BENCH_TORCH_MEMORY_FORMAT={!r}: expected {}".format(
                value, " or ".join(MEMORY_FORMATS)))
        return value
    image = config.get("model") not in models.TOKEN_MODELS
    if cuda or not image or int(config.get("image_size") or 0) < models.CHANNELS_LAST_MIN_SIZE:
        return "contiguous_format"
    return "channels_last"


def _uses(nodes, op):
    for node in nodes:
        if node["op"] == op or any(_uses(node.get(k) or [], op) for k in ("body", "shortcut")):
            return True
    return False


def _cross_entropy(torch, logits, y, reduction="mean"):
    """Softmax cross-entropy; a language model's (N, L, V) logits against (N, L) next tokens are
    taken position by position (the mean over every position of every sequence)."""
    if logits.dim() == 3:
        logits, y = logits.flatten(0, 1), y.flatten()
    return torch.nn.functional.cross_entropy(logits, y, reduction=reduction)


class _NoContext(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _record_dtype(seen, kind):
    def hook(module, inputs, output):
        seen.setdefault(kind, str(output.dtype).replace("torch.", ""))
    return hook


COMPILE_CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def _compile_cache():
    """Where this run's compiled code is kept, in words, after making it a fresh folder.

    Inductor keeps what it compiled on disk (TORCHINDUCTOR_CACHE_DIR, by default
    /tmp/torchinductor_$USER; Triton's GPU kernels in TRITON_CACHE_DIR) and a later run of the same
    model finds it there: its compile figure is then a warm cache's (docs/fairness.md: a VGG16
    compile of 19.6 s cold read 0.3 s warm). So a graph or compiled run compiles into a fresh folder
    of its own (in the system's temporary folder, as inductor's default), removed as the worker exits; BENCH_COMPILE_CACHE=warm keeps the
    caches the environment names (or inductor's default), for a figure of a user's second run."""
    if os.environ.get("BENCH_COMPILE_CACHE") == "warm":
        named = ["{}={}".format(k, os.environ[k]) for k in COMPILE_CACHE_VARIABLES if os.environ.get(k)]
        return "warm (BENCH_COMPILE_CACHE=warm): " + (", ".join(named) or "inductor's default folders")
    folder = tempfile.mkdtemp(prefix="bench-compile-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    atexit.register(shutil.rmtree, folder, True)
    return ("cold: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in a fresh folder of the run's own "
            "({}), removed as the worker exits".format(folder))


def _inductor_compiler(torch):
    """The C++ compiler inductor builds its CPU kernels with (None where it cannot say)."""
    try:
        from torch._inductor import cpp_builder
        return cpp_builder.get_cpp_compiler()
    except Exception:
        return None


def _settings(torch, layout, how):
    """The switches that decide which CPU kernels run, as torch reports them (docs/fairness.md)."""
    backends = torch.backends
    return {
        "mkldnn_available": bool(backends.mkldnn.is_available()),  # oneDNN convolutions built in
        "mkldnn_enabled": bool(backends.mkldnn.enabled),  # and switched on (torch's default)
        "mkl_available": bool(backends.mkl.is_available()),
        "openmp_available": bool(backends.openmp.is_available()),
        "memory_format": layout,  # of image batches and weights
        "BENCH_TORCH_MEMORY_FORMAT": os.environ.get("BENCH_TORCH_MEMORY_FORMAT"),
        "execution": how,
    }


def _cuda_index(config):
    """The GPU this process runs on: a data-parallel replica's own (its rank: join_replicas()
    moves it there), else the first."""
    replica = config.get("replica") or {}
    return int(replica.get("rank") or 0) if replica.get("count", 1) > 1 else 0


def _memory_budget(torch, budget, index):
    """PyTorch's own cap on GPU ``index``: its caching allocator raises OutOfMemoryError beyond
    ``budget`` bytes, asked for as a fraction of the card's memory (at most all of it). Returns
    what the run's setup record says of it."""
    fraction = min(1.0, float(budget) / torch.cuda.get_device_properties(index).total_memory)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    return {"bytes": budget, "fraction": fraction, "device": index}


def _check_cuda(torch):
    base.check_cuda(
        "torch {}".format(torch.__version__), torch.version.cuda is not None, torch.cuda.is_available,
        "a CUDA build of torch in this environment (a wheel from the pytorch.org CUDA index)",
        "is built with CUDA {} but no CUDA device is visible".format(torch.version.cuda))

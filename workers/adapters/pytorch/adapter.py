"""PyTorch adapter: translates workers.models architectures into torch.nn modules and trains them.

torch is imported in setup() only, so this module imports anywhere (the orchestrator lists
adapters without their frameworks). The step is kept as lean as a hand-written loop: batches
are arranged before the clock starts and the loss is summed on the device, never read per step.

Modes and precisions (docs/frameworks/pytorch.md, "Modes and precision") are in modes.py: eager
runs the nn.Module, graph and compiled its torch.compile wrapper, which shares the module's
parameters, so reset() loads the initial weights into the module itself; bf16 and fp16 are
``torch.autocast`` around the forward pass and the loss (fp16 with ``torch.amp.GradScaler``).
"""

import platform

from workers import data, models
from workers.adapters import base
from workers.adapters.pytorch import env, layers, modes


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
        threads = env.apply_threads(torch, int(self.config.get("threads") or 0))
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
            env.check_cuda(torch)
            self.cuda = True
            self.device = torch.device("cuda")
            # Let cuDNN pick the fastest algorithms for these shapes; warm-up absorbs the search.
            torch.backends.cudnn.benchmark = True
            index = env.cuda_index(self.config)
            budget = self.gpu_memory_budget()
            if budget:
                info["gpu_memory_budget"] = env.memory_budget(torch, budget, index)
            info.update(device_name=torch.cuda.get_device_name(index),
                        cudnn_version=torch.backends.cudnn.version(), cudnn_benchmark=True)
        elif self.config["device"] == "cpu":
            self.device = torch.device("cpu")
            info["device_name"] = base.cpu_name()
        else:
            raise base.not_supported("device", self.config["device"], self.title, " (cpu or cuda)")
        layout = env.memory_format(self.cuda, self.config)
        self.memory_format = getattr(torch, layout)
        modes.setup_mode(self, torch)
        self._autocast, self._scaler = modes.setup_precision(self, torch)
        info["settings"] = env.settings(torch, layout, self.execution["how"])
        return info

    def _autocasting(self):
        """The run's torch.autocast context (bf16/fp16), or a context that changes nothing."""
        return modes.autocasting(self.torch, self._autocast)

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
        self.execution["compute_dtypes"] = modes.compute_dtypes(self, arch, self._autocast)
        written = sorted({op for op in layers.HOW if base.uses(arch["layers"], op)})
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
        return modes.wrap(self, model)

    def execution_info(self):
        info = super(Adapter, self).execution_info()
        if self.mode() != "eager" and self._run is not None:
            modes.dynamo_counts(info)
        return info

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


# -- helpers -------------------------------------------------------------------------------


def _cross_entropy(torch, logits, y, reduction="mean"):
    """Softmax cross-entropy; a language model's (N, L, V) logits against (N, L) next tokens are
    taken position by position (the mean over every position of every sequence)."""
    if logits.dim() == 3:
        logits, y = logits.flatten(0, 1), y.flatten()
    return torch.nn.functional.cross_entropy(logits, y, reduction=reduction)

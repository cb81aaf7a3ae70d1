"""PaddlePaddle adapter: translates workers.models architectures into paddle.nn layers and trains them.

paddle is imported in setup() only, so this module imports anywhere. Training runs by default in
Paddle 3's dynamic graph (eager): docs/frameworks/paddle.md gives the measurements against
paddle.jit.to_static behind that choice; the other modes and the precisions are in modes.py. Batches are made into tensors before the clock starts and
the loss is summed in a tensor, never read per step. Paddle's defaults that differ from the
benchmark's scheme (initialisers, BatchNorm momentum, RMSProp's epsilon and rho) are set explicitly.
"""

import gc
import os
import platform

from workers import data, models
from workers.adapters import base
from workers.adapters.paddle import attention, env, layers, modes

# Paddle's RMSProp adds epsilon INSIDE the square root (g / sqrt(v + eps)); PyTorch adds it
# outside (g / (sqrt(v) + eps), eps 1e-8). eps**2 inside gives the same floor of 1e-8 on the
# denominator and the same step wherever v >> eps**2 (measured: docs/frameworks/paddle.md).
_RMSPROP_EPS = models.RMSPROP_EPS ** 2


class Adapter(base.Adapter):
    name = "paddle"
    title = "Paddle"
    # Matched with the spaces taken out of both (oom_message): Paddle writes "ResourceExhausted"
    # in some messages and "Resource exhausted" in others.
    oom_text = ("outofmemory", "resourceexhausted", "cannotallocatememory")

    def __init__(self, config):
        super(Adapter, self).__init__(config)
        self.paddle = None
        self.cuda = False
        self.place = None
        self.model = None
        self.forward = None  # the model, or its to_static conversion
        self.optimizer = None
        self._trainable = []
        self._initial = None  # copy of the initial state_dict (host memory), for reset()
        self._loss_sum = None
        self._x = self._y = self._x_val = self._y_val = None  # numpy arrays from load_data()
        self._batches = []
        self._output = None  # the last inference step's output
        self._scaler = None  # fp16's GradScaler
        self._replica = None  # a data-parallel run's replica, once join_replicas() joined

    # -- setup -----------------------------------------------------------------------------

    def setup(self):
        threads = int(self.config.get("threads") or 0)
        omp_env = env.before_import(threads)
        budget = self.gpu_memory_budget()
        if budget:
            os.environ.update(env.memory_limit_flag(budget))  # read at import: before it
        try:
            import paddle
        except ImportError as exc:
            raise base.Unavailable("cannot import paddle ({}); install it in this environment "
                                   "(bench env setup paddle)".format(exc)) from exc
        self.paddle = paddle
        info = {
            "framework_version": paddle.__version__,
            "python_version": platform.python_version(),
            "threads": env.apply_threads(paddle, threads, omp_env),
            "cuda_version": env.cuda_version(paddle),
            "build": "cuda" if paddle.is_compiled_with_cuda() else "cpu",
            "settings": env.settings(paddle, self.mode()),
        }
        if self.config["device"] == "cuda":
            env.check_cuda(paddle)
            self.cuda = True
            self.place = paddle.CUDAPlace(0)
            paddle.set_device("gpu:0")
            if budget:
                flag_mb = int(env.memory_limit_flag(budget)[env.MEMORY_FLAG])
                info["gpu_memory_budget"] = {"bytes": budget, "flag_mb": flag_mb}
            info.update(device_name=paddle.device.cuda.get_device_name(0),
                        cudnn_version=paddle.get_cudnn_version())
        elif self.config["device"] == "cpu":
            self.place = paddle.CPUPlace()
            paddle.set_device("cpu")
            info["device_name"] = base.cpu_name()
        else:
            raise base.not_supported("device", self.config["device"], self.title, " (cpu or cuda)")
        self._check_mode_and_precision(paddle)
        paddle.seed(self.config["seed"])
        return info

    def _check_mode_and_precision(self, paddle):
        """Refuse what this wheel and device cannot run (after the device is set: auto_cast
        depends on it), and record how the rest runs."""
        precision = self.precision()
        if self.mode() == "compiled" and modes.cinn_missing(paddle):
            raise self.unsupported_mode(modes.cinn_missing(paddle))
        if precision in modes.DTYPES:
            why = modes.amp_refusal(paddle, precision)
            if why:
                raise self.unsupported_precision(why)
            self.execution["precision_how"] = "paddle.amp.auto_cast(dtype={!r}, level='O1')".format(
                modes.DTYPES[precision])
        tf32 = modes.tf32(paddle, self.cuda, precision)
        if tf32 is not None:
            self.execution["tf32_cublas"] = tf32
            if precision == "tf32":
                self.execution["precision_how"] = "paddle.framework.core.set_cublas_switch(True)"

    # -- data-parallel replicas --------------------------------------------------------------

    def join_replicas(self, replica):
        """Paddle's collective training: its parallel environment from the variables its launcher
        (paddle.distributed.launch) sets, gloo on the CPU, NCCL on GPUs (replica k on GPU k); build()
        wraps the model in paddle.DataParallel, which averages the gradients during backward."""
        if self.mode() != "eager":
            raise self.unsupported_mode(
                "bench runs Paddle's data-parallel training in dygraph (eager) only: paddle.DataParallel "
                "under paddle.jit.to_static is not built here yet")
        paddle, rank = self.paddle, replica["rank"]
        endpoints = replica["endpoints"]
        os.environ.update(
            PADDLE_TRAINER_ID=str(rank),
            PADDLE_TRAINERS_NUM=str(replica["count"]),
            PADDLE_TRAINER_ENDPOINTS=",".join(endpoints),
            PADDLE_CURRENT_ENDPOINT=endpoints[rank],
            PADDLE_MASTER=replica["address"],
            PADDLE_DISTRI_BACKEND="nccl" if self.cuda else "gloo",
        )
        if self.cuda:
            self.place = paddle.CUDAPlace(rank)
            paddle.set_device("gpu:{}".format(rank))
            os.environ["FLAGS_selected_gpus"] = str(rank)
        paddle.distributed.init_parallel_env()
        self._replica = replica
        self.execution["data_parallel"] = (
            "paddle.DataParallel ({} over {} replicas; paddle.distributed.init_parallel_env)".format(
                os.environ["PADDLE_DISTRI_BACKEND"], replica["count"]))

    # -- model -----------------------------------------------------------------------------

    def build(self, arch):
        paddle = self.paddle
        self._release()
        # Seed here too: the initialisers draw from the global generator as layers are made.
        paddle.seed(self.config["seed"])
        model, shape = layers.sequential(paddle, arch["layers"], tuple(arch["input"]))
        if list(shape) != arch["output"]:
            raise ValueError("{} ends in shape {}".format(arch["name"], list(shape)))
        model.train()
        self.model = model
        # BatchNorm's running mean and variance are parameters too, with trainable False.
        self._trainable = [p for p in model.parameters() if p.trainable and not p.stop_gradient]
        self._initial = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        zeros = paddle.zeros([1] + list(arch["input"]), dtype="int64" if arch["tokens"] else "float32")
        self.execution["compute_dtypes"] = modes.compute_dtypes(paddle, model, zeros, self.precision())
        written = attention.how(arch["layers"])
        if written:  # the attention models: how their nodes are written (docs/frameworks/paddle.md)
            self.execution["layers"] = written
        wrapped = paddle.DataParallel(model) if self._replica is not None else model
        self.forward, self.execution["how"] = modes.forward_for(paddle, wrapped, self.mode(), self.title)
        self._scaler = modes.scaler(paddle, self.precision())
        self.execution["loss_scaling"] = "paddle.amp.GradScaler()" if self._scaler is not None else None
        self.optimizer = self._make_optimizer()
        self._loss_sum = paddle.zeros([], dtype="float32")
        self._steps = 0
        return sum(_numel(p) for p in self._trainable)

    def _release(self):
        """Drop the previous model (a probe builds all five in one process)."""
        self.model = self.forward = self.optimizer = self._initial = None
        self._trainable = []
        gc.collect()
        if self.cuda:
            self.paddle.device.cuda.empty_cache()

    def _zeros(self, batch):
        """A batch of zeros in the model's input shape: images, or token ids (int64)."""
        config = self.config
        shape = models.input_shape(config["model"], config["image_size"], config.get("sequence_length"))
        dtype = "int64" if config["model"] in models.TOKEN_MODELS else "float32"
        return self.paddle.zeros([batch] + list(shape), dtype=dtype)

    def forward_shape(self, batch):
        self.model.eval()
        try:
            with self.paddle.no_grad(), self._autocast():
                return tuple(self.forward(self._zeros(batch)).shape)
        finally:
            self.model.train()

    def _autocast(self):
        return modes.autocast(self.paddle, self.precision())

    def _make_optimizer(self):
        opt, cfg, params = self.paddle.optimizer, self.config, self._trainable
        if cfg["optimizer"] == "sgd":
            momentum = cfg.get("momentum") or 0.0
            if momentum:
                # velocity = mu * velocity + g; p -= lr * velocity: PyTorch's SGD (dampening 0).
                return opt.Momentum(learning_rate=cfg["lr"], momentum=momentum, parameters=params)
            return opt.SGD(learning_rate=cfg["lr"], parameters=params)
        if cfg["optimizer"] == "adam":
            # Paddle's defaults already equal PyTorch's; written out so that stays true.
            return opt.Adam(learning_rate=cfg["lr"], beta1=models.ADAM_BETA1, beta2=models.ADAM_BETA2,
                            epsilon=models.ADAM_EPS, parameters=params)
        if cfg["optimizer"] == "rmsprop":
            # Paddle's defaults are rho 0.95, epsilon 1e-6; PyTorch's alpha is 0.99.
            return opt.RMSProp(learning_rate=cfg["lr"], rho=models.RMSPROP_ALPHA, epsilon=_RMSPROP_EPS,
                               momentum=0.0, centered=False, parameters=params)
        raise base.not_supported("optimizer", cfg["optimizer"], self.title)

    def reset(self):
        # Reseed too: every repeat then draws the same dropout masks, so repeats are comparable.
        self.paddle.seed(self.config["seed"])
        self.model.set_state_dict(self._initial)
        self.model.train()
        self.optimizer = self._make_optimizer()
        self._scaler = modes.scaler(self.paddle, self.precision())
        self._loss_sum.zero_()
        self._steps = 0

    # -- data ------------------------------------------------------------------------------

    def load_data(self):
        arrays = data.load(self.config)
        self._x, self._y = arrays["x_train"], arrays["y_train"]
        self._x_val, self._y_val = arrays["x_val"], arrays["y_val"]
        return len(self._y), len(self._y_val)

    def prepare_epoch(self, order):
        import numpy as np

        size = self.config["batch_size"]
        steps = self.epoch_steps(order)
        self.synchronize()  # the previous epoch's copies may still read the old batches
        self._batches = []
        index = np.asarray(order[:steps * size], dtype=np.int64)
        x, y = self._x[index], self._y[index]
        # Pinned host memory lets the host->device copy in train_step run asynchronously.
        place = self.paddle.CUDAPinnedPlace() if self.cuda else self.place
        to_tensor = self.paddle.to_tensor
        for start in range(0, steps * size, size):
            self._batches.append((to_tensor(x[start:start + size], place=place),
                                  to_tensor(y[start:start + size], place=place)))
        return steps

    # -- training --------------------------------------------------------------------------

    def train_step(self, index):
        x, y = self._batches[index]
        if self.cuda:
            x, y = x.cuda(blocking=False), y.cuda(blocking=False)
        with self._autocast():
            logits = self.forward(x)
        loss = _cross_entropy(self.paddle, logits.astype("float32"), y)
        if self._scaler is not None:  # fp16: scaled backward, unscaled and checked step
            self._scaler.scale(loss).backward()
            self._scaler.step(self.optimizer)
            self._scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        # set_to_zero=False releases the gradients (PyTorch's set_to_none) instead of zeroing.
        self.optimizer.clear_grad(set_to_zero=False)
        self._loss_sum.add_(loss.detach())  # stays a tensor: no read-back per step
        self._steps += 1

    def infer_step(self, index):
        x = self._batches[index][0]
        if self.cuda:
            x = x.cuda(blocking=False)
        if self.model.training:  # once: inference never trains, so eval mode stays
            self.model.eval()
        with self.paddle.no_grad(), self._autocast():
            self._output = self.forward(x)

    def synchronize(self):
        if self.cuda:
            self.paddle.device.synchronize()

    def read_loss_sum(self):
        return float(self._loss_sum)

    def clear_loss_sum(self):
        self._loss_sum.zero_()

    def evaluate(self):
        paddle, size, n = self.paddle, self.config["batch_size"], len(self._y_val)
        if n == 0:
            return float("nan"), float("nan")
        total = paddle.zeros([], dtype="float64")
        correct = paddle.zeros([], dtype="int64")
        self.model.eval()
        try:
            with paddle.no_grad():
                for start in range(0, n, size):
                    x = paddle.to_tensor(self._x_val[start:start + size], place=self.place)
                    y = paddle.to_tensor(self._y_val[start:start + size], place=self.place)
                    with self._autocast():
                        logits = self.forward(x).astype("float32")
                    total += _cross_entropy(paddle, logits, y, reduction="sum").astype("float64")
                    correct += (logits.argmax(axis=-1) == y).astype("int64").sum()
        finally:
            self.model.train()
        count = self._y_val.size  # a language model's: every position of every sequence
        return float(total) / count, int(correct) / count

    def tracer(self):
        from workers.adapters.paddle import trace

        return trace.Tracer()

    def oom_message(self, exc):
        # Paddle raises its ResourceExhausted errors (host and device) as MemoryError, which the
        # base class takes by type; other messages are read without their spaces.
        return str(exc).lower().replace(" ", "")


# -- helpers -------------------------------------------------------------------------------


def _cross_entropy(paddle, logits, y, reduction="mean"):
    """Softmax cross-entropy; a language model's (N, L, V) logits against (N, L) next tokens are
    taken position by position (the mean over every position of every sequence)."""
    if len(logits.shape) == 3:
        logits, y = logits.reshape([-1, logits.shape[-1]]), y.reshape([-1])
    return paddle.nn.functional.cross_entropy(logits, y, reduction=reduction)


def _numel(tensor):
    count = 1
    for dim in tensor.shape:
        count *= int(dim)
    return count

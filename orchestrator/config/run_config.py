"""The typed configuration of one run, and the rules every field must satisfy.

The matrix loader (orchestrator.config.matrix) turns YAML into ``RunConfig`` objects using the field table
below; everything downstream works on these plain objects. A field's validator returns the
normalised value or raises ``ValueError`` with the text that follows ``key:`` in the error.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from orchestrator.config.values import (
    MAX_CPUS,
    cpu_set,
    format_size,
    parse_cpus,
    parse_size,
    shown,
)
from workers import execution as modes
from workers import frameworks
from workers import models as definition

FRAMEWORKS = frameworks.NAMES  # workers/frameworks.py: what bench knows of each framework
# The model names are the one model definition's (workers/models/), never restated here.
MODELS = definition.ALL_MODELS
RECURRENT_MODELS = definition.RECURRENT  # sequence classifiers (the GRU): token ids in, a class out
LANGUAGE_MODELS = definition.LANGUAGE  # next-token language models: token ids in, per position out
TOKEN_MODELS = definition.TOKEN_MODELS  # token sequences in; image_size does not apply
IMAGE_MODELS = definition.MODELS
DEVICES = ("cpu", "cuda")
OPTIMIZERS = ("sgd", "adam", "rmsprop")
DATASETS = ("synthetic", "image_folder", "cifar10", "cifar100", "imdb")
TOKEN_DATASETS = ("imdb",)  # datasets of token sequences, for the recurrent models
TRACES = ("off", "kernels")
TASKS = ("train", "inference")
MODES = modes.MODES  # execution modes and precisions: workers/execution.py, the one definition
PRECISIONS = modes.PRECISIONS
# torch.compile's own modes (PyTorch, mode compiled): how hard inductor works, and CUDA graphs.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
FAULTS = (
    "ok",
    "raise",
    "segfault",
    "abort",
    "exit",
    "hang",
    "oom",
    "garbage",
    "no_result",
    "sleep",
    "unsupported",
    "unavailable",
    "hold",
    "hostile",
    "orphans",
    "flood",
    "learn",
    "hostile_result",
)
# The fields whose values are names from a fixed list: the validators, --help and the filters'
# did-you-mean all read them here.
CHOICES: dict[str, tuple[str, ...]] = {
    "framework": FRAMEWORKS,
    "model": MODELS,
    "device": DEVICES,
    "optimizer": OPTIMIZERS,
    "dataset": DATASETS,
    "fault": FAULTS,
    "trace": TRACES,
    "task": TASKS,
    "mode": MODES,
    "precision": PRECISIONS,
    "compile_mode": COMPILE_MODES,
}


@dataclass(frozen=True)
class RunConfig:
    """Every setting of one run. Field order is the column order of reports."""

    framework: str = "pytorch"
    model: str = "small_cnn"
    device: str = "cpu"
    batch_size: int = 32
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    epochs: int = 1
    warmup_steps: int = 2
    repeats: int = 1
    timeout: float = 300.0
    dataset: str = "synthetic"
    dataset_size: int = 256
    data_dir: str | None = None
    image_size: int = 64
    classes: int = 10
    val_fraction: float = 0.2
    threads: int = 0
    seed: int = 0
    fault: str | None = None
    exit_code: int | None = None
    seconds: float | None = None
    after_steps: int | None = None
    ignore_sigterm: bool | None = None
    # Resources and sampling (added in schema 3; left out of the hash while unset, so the
    # configurations of earlier sweeps keep their identity).
    cpus: str | None = None  # canonical CPU list such as "0-1,4"; None: every CPU bench may use
    memory_budget: int | None = None  # bytes of resident memory for the run's process tree
    gpu_memory_budget: int | None = None  # bytes of device memory, capped by the framework itself
    sample_interval: float | None = None  # seconds between resource samples; 0 turns the sampler off
    hold_threads: int | None = None
    hold_memory_mb: int | None = None
    hold_seconds: float | None = None
    hold_child_memory_mb: int | None = None
    # Kernel and operator tracing (schema 4): None (off) or "kernels". Traced timings are perturbed.
    trace: str | None = None
    # What the run measures (schema 5): None is training (the hash of earlier configurations is kept);
    # "inference" runs the model in evaluation mode without gradients. features: True stops at the
    # pooled features (the model without its classifier); None is the full model.
    task: str | None = None
    features: bool | None = None
    # Enough samples (schema 6): timed seconds and timed steps a run reaches at least, by extra
    # timed epochs; None is bench's default (resolved_timing), so earlier hashes are kept.
    min_time: float | None = None
    min_steps: int | None = None
    # Execution mode and precision (schema 7; workers/execution.py, docs/fairness.md): None is the
    # framework's default mode and fp32, so earlier hashes are kept. compile_mode: torch.compile's
    # mode (PyTorch, mode compiled). target_accuracy: time to accuracy, the validation accuracy
    # whose first reaching is timed; stop_at_target ends each repeat there.
    mode: str | None = None
    precision: str | None = None
    compile_mode: str | None = None
    target_accuracy: float | None = None
    stop_at_target: bool | None = None
    # Attention models (schema 8): a language model's tokens per sequence; None is its context
    # (workers.models.default_sequence_length), so earlier hashes are kept.
    sequence_length: int | None = None
    # Data-parallel training (schema 9; docs/distributed.md): replicas, each its own process with
    # batch_size samples a step; None is one (earlier hashes kept). fault_replica: the fault worker's
    # fault strikes only that replica (the others run ok), as one member of a collective failing.
    replicas: int | None = None
    fault_replica: int | None = None

    def __post_init__(self) -> None:
        if self.threads == THREADS_ALL:  # `threads: all`, resolved on the machine that expands the matrix
            object.__setattr__(self, "threads", all_threads(self.cpus, self.replicas))

    def to_dict(self) -> dict[str, Any]:
        # Every field is a plain scalar, so this equals dataclasses.asdict, without its deep copies
        # (which made hashing a 100,000-configuration matrix take seconds).
        return {name: getattr(self, name) for name in FIELD_NAMES}

    @cached_property  # fields are frozen; a sweep asks for each hash many times (eta.py, resume)
    def config_hash(self) -> str:
        """Stable identity: a hash of every setting, in canonical JSON."""
        settings = {k: v for k, v in self.to_dict().items() if not (k in LATE_FIELDS and v is None)}
        text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def train_size(self) -> int:
        return self.dataset_size - int(round(self.dataset_size * self.val_fraction))

    def label(self) -> str:
        """A short human description for progress lines and reports."""
        # The mode and precision where set: a modes matrix's runs differ by nothing else; so does a
        # traced run from its untraced twin.
        execution = "".join(f"/{v}" for v in (self.mode, self.precision) if v)
        traced = f"/trace-{self.trace}" if self.trace else ""
        return self._label() + execution + (f"/r{self.replicas}" if self.replicas else "") + traced

    def _label(self) -> str:
        if self.framework == "fault":
            return f"fault/{self.fault or 'ok'}"
        if self.task == "inference":
            what = "features" if self.features else "inference"
            return f"{self.framework}/{self.model}/{self.device}/bs{self.batch_size}/{what}/t{self.threads}"
        return (
            f"{self.framework}/{self.model}/{self.device}/bs{self.batch_size}"
            f"/{self.optimizer}/lr{self.lr:g}/t{self.threads}"
        )

    @property
    def replica_count(self) -> int:
        """Processes the run spreads over (1 unless data-parallel)."""
        return self.replicas or 1

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step, all replicas together (batch_size is per replica)."""
        return self.batch_size * self.replica_count


FIELD_NAMES = tuple(f.name for f in fields(RunConfig))
FAULT_FIELDS = (
    "fault",
    "exit_code",
    "seconds",
    "after_steps",
    "ignore_sigterm",
    "hold_threads",
    "hold_memory_mb",
    "hold_seconds",
    "hold_child_memory_mb",
    "fault_replica",
)
LATE_FIELDS = frozenset(FIELD_NAMES[FIELD_NAMES.index("cpus") :])
DEFAULT_SAMPLE_INTERVAL = 0.1


# Upper bounds of the integer and time settings: generous for any real benchmark, but finite, so
# that no setting can overflow SQLite's signed 64-bit INTEGER, a C int in the worker (os._exit, a
# thread count), or drive an absurd allocation or loop (docs/matrix.md lists them with reasons).
SQLITE_INT_MAX = 2**63 - 1
MAX_SECONDS = 10**7  # about 116 days, for timeout, sleeps and holds; threading's TIMEOUT_MAX is larger
INT_LIMITS: dict[str, tuple[int, int]] = {
    "batch_size": (1, 2**20),
    "epochs": (1, 10_000),
    "warmup_steps": (0, 100_000),
    "repeats": (1, 1_000),
    "dataset_size": (2, 10**9),
    "image_size": (8, 4096),
    "classes": (2, 1_000_000),
    "threads": (0, MAX_CPUS),
    "seed": (0, 2**32 - 1),  # numpy's RandomState takes seeds 0 to 2**32 - 1
    "exit_code": (-(2**31), 2**31 - 1),  # a C int: the fault worker's os._exit
    "after_steps": (0, 10**9),
    "hold_threads": (0, 10_000),
    "hold_memory_mb": (0, 2**24),  # MiB: 16 TiB
    "hold_child_memory_mb": (0, 2**24),
    "min_steps": (1, 10**9),
    "sequence_length": (1, 2**20),
    "replicas": (1, 1024),
    "fault_replica": (0, 1023),
}


# `threads: all` as it is read: every CPU the run may use. RunConfig resolves it at once (all_threads),
# so a configuration, its hash and its record hold the count, as if it had been written.
THREADS_ALL = -1


def all_threads(cpus: str | None, replicas: int | None = None) -> int:
    """`threads: all`: the CPUs of `cpus`, else every CPU bench may use here, shared equally among
    the run's replicas (at least one each)."""
    count = len(cpu_set(cpus)) if cpus else len(os.sched_getaffinity(0))
    return max(1, count // max(1, replicas or 1))


def _threads(value: Any) -> int:
    if value == "all":
        return THREADS_ALL
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected all or a non-negative integer, got {shown(value)}")
    return _int("threads")(value)


def _int(key: str) -> Callable[[Any], int]:
    low, high = INT_LIMITS[key]
    word = {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")
    word = "an integer" if low < 0 else word

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"expected {word}, got {shown(value)}")
        if value > high:
            raise ValueError(f"expected at most {high}, got {shown(value)}")
        return value

    return check


def _number(positive: bool, maximum: float | None = None) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        # An integer beyond a float's range is refused here: math.isfinite and float() would raise.
        ok = ok and (isinstance(value, float) or abs(value) < 2**1000) and math.isfinite(value)
        if ok and (value <= 0 if positive else value < 0):
            ok = False
        if ok and maximum is not None and value >= maximum:
            ok = False
        if not ok:
            word = "a positive number" if positive else "a non-negative number"
            if maximum is not None:
                word += f" below {maximum:g}"
            raise ValueError(f"expected {word}, got {shown(value)}")
        return float(value)

    return check


def _choice(options: tuple[str, ...], what: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise ValueError(f"unknown {what} {shown(value)} (known: {', '.join(options)})")
        return value

    return check


def _trace(value: Any) -> str | None:
    # YAML 1.1 reads a bare `off` as false; both mean untraced, stored as None so that the
    # configurations recorded before tracing existed keep their hash.
    if value is False or value is None or value == "off":
        return None
    if value != "kernels":
        raise ValueError(f"unknown trace {shown(value)} (known: {', '.join(TRACES)})")
    return "kernels"


def _task(value: Any) -> str | None:
    if value not in TASKS:
        raise ValueError(f"unknown task {shown(value)} (known: {', '.join(TASKS)})")
    return None if value == "train" else value  # train stored as None: earlier hashes are kept


def _features(value: Any) -> bool | None:
    return _bool(value) or None  # false stored as None, as above


def _precision(value: Any) -> str | None:
    _choice(PRECISIONS, "precision")(value)
    return None if value == modes.DEFAULT_PRECISION else value  # fp32 stored as None: hashes kept


def _replicas(value: Any) -> int | None:
    count = _int("replicas")(value)
    return None if count == 1 else count  # one replica stored as None: earlier hashes are kept


def _accuracy(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value <= 1:
        raise ValueError(f"expected an accuracy above 0 and at most 1 (0.75 for 75 %), got {shown(value)}")
    return float(value)


FEATURES_NEED_INFERENCE = "features applies to task: inference (the pooled features, no training)"


def _path(value: Any) -> str:
    # A NUL cannot be in a path: the operating system would refuse it, Python with a ValueError.
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise ValueError(f"expected a folder path, got {shown(value)}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


# Synthetic images are made in the worker up front, as float32 (workers.data.synthetic): a dataset
# above this would not fit in any machine's memory, so it is refused at load rather than run out.
MAX_SYNTHETIC_BYTES = 2**40


def synthetic_problem(config: RunConfig) -> str | None:
    """Why the configuration's synthetic images are too large to make, or None."""
    if config.framework == "fault" or config.dataset != "synthetic" or config.model in TOKEN_MODELS:
        return None
    size = config.dataset_size * 3 * config.image_size**2 * 4
    if size <= MAX_SYNTHETIC_BYTES:
        return None
    return (
        f"dataset_size {config.dataset_size} synthetic images of {config.image_size}x{config.image_size}"
        f" take {format_size(size)} as float32 (at most 1 TiB)"
    )


VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "framework": _choice(CHOICES["framework"], "framework"),
    "model": _choice(CHOICES["model"], "model"),
    "device": _choice(CHOICES["device"], "device"),
    "batch_size": _int("batch_size"),
    "optimizer": _choice(CHOICES["optimizer"], "optimizer"),
    "lr": _number(positive=True),
    "momentum": _number(positive=False, maximum=1.0),
    "epochs": _int("epochs"),
    "warmup_steps": _int("warmup_steps"),
    "repeats": _int("repeats"),
    "timeout": _number(positive=True, maximum=MAX_SECONDS),
    "dataset": _choice(CHOICES["dataset"], "dataset"),
    "dataset_size": _int("dataset_size"),
    "data_dir": _path,
    "image_size": _int("image_size"),
    "classes": _int("classes"),
    "val_fraction": _number(positive=True, maximum=1.0),
    "threads": _threads,
    "seed": _int("seed"),
    "fault": _choice(CHOICES["fault"], "fault"),
    "exit_code": _int("exit_code"),
    "seconds": _number(positive=False, maximum=MAX_SECONDS),
    "after_steps": _int("after_steps"),
    "ignore_sigterm": _bool,
    "cpus": parse_cpus,
    "memory_budget": parse_size,
    "gpu_memory_budget": parse_size,
    "sample_interval": _number(positive=False, maximum=3600.0),
    "hold_threads": _int("hold_threads"),
    "hold_memory_mb": _int("hold_memory_mb"),
    "hold_seconds": _number(positive=False, maximum=MAX_SECONDS),
    "hold_child_memory_mb": _int("hold_child_memory_mb"),
    "trace": _trace,
    "task": _task,
    "features": _features,
    "min_time": _number(positive=False, maximum=MAX_SECONDS),
    "min_steps": _int("min_steps"),
    "mode": _choice(CHOICES["mode"], "mode"),
    "precision": _precision,
    "compile_mode": _choice(CHOICES["compile_mode"], "compile_mode"),
    "target_accuracy": _accuracy,
    "stop_at_target": _features,
    "sequence_length": _int("sequence_length"),
    "replicas": _replicas,
    "fault_replica": _int("fault_replica"),
}

assert set(VALIDATORS) == set(FIELD_NAMES)


def validate_field(key: str, value: Any) -> Any:
    """Normalise one setting; raises ValueError with the message to show after ``key:``."""
    return VALIDATORS[key](value)

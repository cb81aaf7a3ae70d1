"""The typed configuration of one run, and the rules every field must satisfy.

The matrix loader (orchestrator.matrix) turns YAML into ``RunConfig`` objects using the field table
below; everything downstream works on these plain objects. A field's validator returns the
normalised value or raises ``ValueError`` with the text that follows ``key:`` in the error.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax", "fault")
MODELS = ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16", "googlenet", "gru")
RECURRENT_MODELS = ("gru",)  # token sequences in; image_size does not apply (workers.models)
IMAGE_MODELS = tuple(m for m in MODELS if m not in RECURRENT_MODELS)
DEVICES = ("cpu", "cuda")
OPTIMIZERS = ("sgd", "adam", "rmsprop")
DATASETS = ("synthetic", "image_folder", "cifar10", "cifar100", "imdb")
TOKEN_DATASETS = ("imdb",)  # datasets of token sequences, for the recurrent models
TRACES = ("off", "kernels")
TASKS = ("train", "inference")
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
)


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
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
        if self.framework == "fault":
            return f"fault/{self.fault or 'ok'}"
        if self.task == "inference":
            what = "features" if self.features else "inference"
            return f"{self.framework}/{self.model}/{self.device}/bs{self.batch_size}/{what}/t{self.threads}"
        return (
            f"{self.framework}/{self.model}/{self.device}/bs{self.batch_size}"
            f"/{self.optimizer}/lr{self.lr:g}/t{self.threads}"
        )


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
)
LATE_FIELDS = frozenset(FIELD_NAMES[FIELD_NAMES.index("cpus") :])
DEFAULT_SAMPLE_INTERVAL = 0.1
SIZE_UNITS = {
    "": 1 << 20,  # a bare number means MiB
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def _int(minimum: int) -> Callable[[Any], int]:
    word = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"expected {word}, got {value!r}")
        return value

    return check


def _any_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _number(positive: bool, maximum: float | None = None) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if ok and (value <= 0 if positive else value < 0):
            ok = False
        if ok and maximum is not None and value >= maximum:
            ok = False
        if not ok:
            word = "a positive number" if positive else "a non-negative number"
            if maximum is not None:
                word += f" below {maximum:g}"
            raise ValueError(f"expected {word}, got {value!r}")
        return float(value)

    return check


def _choice(options: tuple[str, ...], what: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise ValueError(f"unknown {what} {value!r} (known: {', '.join(options)})")
        return value

    return check


def _trace(value: Any) -> str | None:
    # YAML 1.1 reads a bare `off` as false; both mean untraced, stored as None so that the
    # configurations recorded before tracing existed keep their hash.
    if value is False or value is None or value == "off":
        return None
    if value != "kernels":
        raise ValueError(f"unknown trace {value!r} (known: {', '.join(TRACES)})")
    return "kernels"


def _task(value: Any) -> str | None:
    if value not in TASKS:
        raise ValueError(f"unknown task {value!r} (known: {', '.join(TASKS)})")
    return None if value == "train" else value  # train stored as None: earlier hashes are kept


def _features(value: Any) -> bool | None:
    return _bool(value) or None  # false stored as None, as above


FEATURES_NEED_INFERENCE = "features applies to task: inference (the pooled features, no training)"


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a folder path, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def parse_size(value: Any) -> int:
    """Bytes from a size such as ``512MiB``, ``2GiB`` or ``1.5G``; a bare number means MiB."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a size such as 512MiB or 2GiB, got {value!r}")
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in SIZE_UNITS:
        raise ValueError(f"expected a size such as 512MiB or 2GiB (a bare number means MiB), got {value!r}")
    size = int(float(match.group(1)) * SIZE_UNITS[unit])
    if size <= 0:
        raise ValueError(f"expected a positive size, got {value!r}")
    return size


def format_size(size: int | None) -> str:
    if size is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} B"


def parse_cpus(value: Any) -> str:
    """A canonical CPU list ("0-3,6") from a list of numbers, one number, or a list string."""
    if isinstance(value, bool):
        raise ValueError(f'expected CPU numbers such as [0, 1] or "0-3,6", got {value!r}')
    if isinstance(value, int):
        items: list[Any] = [value]
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    else:
        raise ValueError(f'expected CPU numbers such as [0, 1] or "0-3,6", got {value!r}')
    return format_cpus(_cpu_numbers(items, value))


def _cpu_numbers(items: list[Any], original: Any) -> set[int]:
    cpus: set[int] = set()
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            cpus.add(item)
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item) if isinstance(item, str) else None
        if match is None or (match.group(2) is not None and int(match.group(2)) < int(match.group(1))):
            raise ValueError(f'expected CPU numbers such as [0, 1] or "0-3,6", got {original!r}')
        cpus.update(range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1))
    if not cpus:
        raise ValueError("expected at least one CPU")
    return cpus


def cpu_set(text: str) -> set[int]:
    """The CPU numbers of a canonical list."""
    return _cpu_numbers(text.split(","), text)


def format_cpus(cpus: set[int]) -> str:
    ranges: list[str] = []
    for cpu in sorted(cpus):
        if ranges and ranges[-1].split("-")[-1] == str(cpu - 1):
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{cpu}"
        else:
            ranges.append(str(cpu))
    return ",".join(ranges)


VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "framework": _choice(FRAMEWORKS, "framework"),
    "model": _choice(MODELS, "model"),
    "device": _choice(DEVICES, "device"),
    "batch_size": _int(1),
    "optimizer": _choice(OPTIMIZERS, "optimizer"),
    "lr": _number(positive=True),
    "momentum": _number(positive=False, maximum=1.0),
    "epochs": _int(1),
    "warmup_steps": _int(0),
    "repeats": _int(1),
    "timeout": _number(positive=True),
    "dataset": _choice(DATASETS, "dataset"),
    "dataset_size": _int(2),
    "data_dir": _path,
    "image_size": _int(8),
    "classes": _int(2),
    "val_fraction": _number(positive=True, maximum=1.0),
    "threads": _int(0),
    "seed": _any_int,
    "fault": _choice(FAULTS, "fault"),
    "exit_code": _any_int,
    "seconds": _number(positive=False),
    "after_steps": _int(0),
    "ignore_sigterm": _bool,
    "cpus": parse_cpus,
    "memory_budget": parse_size,
    "gpu_memory_budget": parse_size,
    "sample_interval": _number(positive=False),
    "hold_threads": _int(0),
    "hold_memory_mb": _int(0),
    "hold_seconds": _number(positive=False),
    "hold_child_memory_mb": _int(0),
    "trace": _trace,
    "task": _task,
    "features": _features,
}

assert set(VALIDATORS) == set(FIELD_NAMES)


def validate_field(key: str, value: Any) -> Any:
    """Normalise one setting; raises ValueError with the message to show after ``key:``."""
    return VALIDATORS[key](value)

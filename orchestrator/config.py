"""The typed configuration of one run, and the rules every field must satisfy.

The matrix loader (orchestrator.matrix) turns YAML into ``RunConfig`` objects using the field table
below; everything downstream works on these plain objects. A field's validator returns the
normalised value or raises ``ValueError`` with the text that follows ``key:`` in the error.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "fault")
MODELS = ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16")
DEVICES = ("cpu", "cuda")
OPTIMIZERS = ("sgd", "adam", "rmsprop")
DATASETS = ("synthetic", "image_folder", "cifar10", "cifar100")
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def config_hash(self) -> str:
        """Stable identity: a hash of every setting, in canonical JSON."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def train_size(self) -> int:
        return self.dataset_size - int(round(self.dataset_size * self.val_fraction))

    def label(self) -> str:
        """A short human description for progress lines and reports."""
        if self.framework == "fault":
            return f"fault/{self.fault or 'ok'}"
        return (
            f"{self.framework}/{self.model}/{self.device}/bs{self.batch_size}"
            f"/{self.optimizer}/lr{self.lr:g}/t{self.threads}"
        )


FIELD_NAMES = tuple(f.name for f in fields(RunConfig))
FAULT_FIELDS = ("fault", "exit_code", "seconds", "after_steps", "ignore_sigterm")


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


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a folder path, got {value!r}")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


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
}

assert set(VALIDATORS) == set(FIELD_NAMES)


def validate_field(key: str, value: Any) -> Any:
    """Normalise one setting; raises ValueError with the message to show after ``key:``."""
    return VALIDATORS[key](value)

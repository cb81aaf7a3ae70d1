"""The typed configuration of one run, RunConfig: every setting declared in settings.py, as a
plain dataclass so that each field's type is seen by mypy (a check below and tests/test_settings.py
hold the two one-for-one).

The matrix loader (orchestrator.config.matrix) turns YAML into ``RunConfig`` objects with the
declarations' validators; everything downstream works on these plain objects. A validator returns
the normalised value or raises ``ValueError`` with the text that follows ``key:`` in the error.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from orchestrator.config import settings
from orchestrator.config.settings import (  # re-exported: the names everything reads from here
    CHOICES as CHOICES,
)
from orchestrator.config.settings import COMPILE_MODES as COMPILE_MODES
from orchestrator.config.settings import DATASETS as DATASETS
from orchestrator.config.settings import DEVICES as DEVICES
from orchestrator.config.settings import FAULT_FIELDS as FAULT_FIELDS
from orchestrator.config.settings import FAULT_PARTS as FAULT_PARTS
from orchestrator.config.settings import FAULTS as FAULTS
from orchestrator.config.settings import FRAMEWORKS as FRAMEWORKS
from orchestrator.config.settings import INT_LIMITS as INT_LIMITS
from orchestrator.config.settings import LATE_FIELDS as LATE_FIELDS
from orchestrator.config.settings import MAX_SECONDS as MAX_SECONDS
from orchestrator.config.settings import MODELS as MODELS
from orchestrator.config.settings import MODES as MODES
from orchestrator.config.settings import NOT_IDENTITY
from orchestrator.config.settings import OPTIMIZERS as OPTIMIZERS
from orchestrator.config.settings import PRECISIONS as PRECISIONS
from orchestrator.config.settings import SQLITE_INT_MAX as SQLITE_INT_MAX
from orchestrator.config.settings import TASKS as TASKS
from orchestrator.config.settings import THREADS_ALL as THREADS_ALL
from orchestrator.config.settings import TRACES as TRACES
from orchestrator.config.settings import VALIDATORS as VALIDATORS
from orchestrator.config.values import cpu_set, format_size
from workers import models as definition

RECURRENT_MODELS = definition.RECURRENT  # sequence classifiers (the GRU): token ids in, a class out
LANGUAGE_MODELS = definition.LANGUAGE  # next-token language models: token ids in, per position out
TOKEN_MODELS = definition.TOKEN_MODELS  # token sequences in; image_size does not apply
IMAGE_MODELS = definition.MODELS
TOKEN_DATASETS = ("imdb",)  # datasets of token sequences, for the recurrent models


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
    runs: int = 1
    work: int | None = None
    # Framework releases as an axis (schema 15; docs/frameworks.md): None is the pinned release,
    # so earlier hashes are kept; a release runs in its own environment (<framework>@<version>).
    version: str | None = None

    def __post_init__(self) -> None:
        if self.framework == "fault" and self.fault is None:  # the fault worker's fault defaults to ok
            object.__setattr__(self, "fault", "ok")
        if self.threads == THREADS_ALL:  # `threads: all`, resolved on the machine that expands the matrix
            object.__setattr__(self, "threads", all_threads(self.cpus, self.replicas))

    def to_dict(self) -> dict[str, Any]:
        # Every field is a plain scalar, so this equals dataclasses.asdict, without its deep copies
        # (which made hashing a 100,000-configuration matrix take seconds).
        return {name: getattr(self, name) for name in FIELD_NAMES}

    @cached_property  # fields are frozen; a sweep asks for each hash many times (eta.py, resume)
    def config_hash(self) -> str:
        """Stable identity: a hash of every setting but how often it runs, in canonical JSON."""
        settings = {
            k: v
            for k, v in self.to_dict().items()
            if not (k in LATE_FIELDS and v is None) and k not in NOT_IDENTITY
        }
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
        framework = f"{self.framework}@{self.version}" if self.version else self.framework
        if self.task == "inference":
            what = "features" if self.features else "inference"
            return f"{framework}/{self.model}/{self.device}/bs{self.batch_size}/{what}/t{self.threads}"
        return (
            f"{framework}/{self.model}/{self.device}/bs{self.batch_size}"
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
# The dataclass is written out so that mypy sees each field's type; it must say what the
# declarations say, field for field (tests/test_settings.py shows the difference).
assert [(f.name, f.type, f.default) for f in fields(RunConfig)] == [
    (s.name, s.type, s.default) for s in settings.SETTINGS
], "RunConfig and settings.SETTINGS disagree"
DEFAULT_SAMPLE_INTERVAL = 0.1


def all_threads(cpus: str | None, replicas: int | None = None) -> int:
    """`threads: all`: the CPUs of `cpus`, else every CPU bench may use here, shared equally among
    the run's replicas (at least one each)."""
    count = len(cpu_set(cpus)) if cpus else len(os.sched_getaffinity(0))
    return max(1, count // max(1, replicas or 1))


FEATURES_NEED_INFERENCE = "features applies to task: inference (the pooled features, no training)"


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


def validate_field(key: str, value: Any) -> Any:
    """Normalise one setting; raises ValueError with the message to show after ``key:``."""
    return VALIDATORS[key](value)

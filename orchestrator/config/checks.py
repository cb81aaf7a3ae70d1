"""The rules a configuration must satisfy beyond each field's own, and the strict reading of a
configuration stored in a database.

The matrix loader and every place that rebuilds a RunConfig from a database row apply the same
rules: a row is outside input (anyone can write a SQLite file), and a framework name that is not one
bench knows would otherwise become a path (envs.python_for) or an environment variable.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import fields
from pathlib import Path
from typing import Any

from orchestrator.config import pins
from orchestrator.config.run_config import (
    FAULT_FIELDS,
    FEATURES_NEED_INFERENCE,
    FIELD_NAMES,
    LANGUAGE_MODELS,
    TOKEN_DATASETS,
    TOKEN_MODELS,
    RunConfig,
    synthetic_problem,
    validate_field,
)
from orchestrator.errors import DatabaseError
from workers import frameworks, releases
from workers.models import GPT, check_image_size

# A problem: the keys that may be blamed (most specific first) and the message.
Problem = tuple[tuple[str, ...], str]
_OPTIONAL = frozenset(f.name for f in fields(RunConfig) if f.default is None)
_BYTES = ("memory_budget", "gpu_memory_budget")  # stored in bytes, where a matrix writes a size


def cross_field_problem(
    config: RunConfig, given: Collection[str], check_paths: bool = True
) -> Problem | None:
    """The first rule spanning fields that the configuration breaks, or None.

    ``given``: the keys that were set (not defaulted); ``check_paths``: whether data_dir must exist
    now (a stored configuration's folder may be gone since; the run itself then says so).
    """
    if config.memory_budget is not None and config.sample_interval == 0:
        return (
            "sample_interval",
            "memory_budget",
        ), "memory_budget needs the sampler, which sample_interval 0 turns off"
    problem = execution_problem(config) or replica_problem(config) or version_problem(config, check_paths)
    if problem:
        return problem
    if config.framework == "fault":
        return None
    stray = tuple(key for key in FAULT_FIELDS if key in given)
    if stray:
        return stray, f"only applies to framework fault, not {config.framework}"
    if config.features and config.task != "inference":
        return ("features", "task"), FEATURES_NEED_INFERENCE
    if config.features and config.model in LANGUAGE_MODELS:
        return ("features", "model"), (
            f"a language model has no pooled features ({config.model}'s output is the next token at every "
            "position: task inference without features runs it)"
        )
    problem = sequence_problem(config) or _data_problem(config, check_paths) or _batch_problem(config)
    if problem is None and (synthetic := synthetic_problem(config)):
        problem = ("dataset_size", "image_size"), synthetic
    if problem:
        return problem
    try:
        check_image_size(config.model, config.image_size)
    except ValueError as exc:
        return ("image_size", "model"), str(exc)
    return None


def execution_problem(config: RunConfig) -> Problem | None:
    """The rules of the execution settings (docs/matrix.md). The fault worker takes mode, precision
    and a target (it reports them, and its `learn` fault reaches targets), not compile_mode."""
    takes = [f.name for f in frameworks.FRAMEWORKS if f.compile_mode]
    if config.compile_mode is not None and (config.framework not in takes or config.mode != "compiled"):
        return ("compile_mode", "mode", "framework"), (
            f"torch.compile's mode: only applies to framework {' or '.join(takes)} with mode compiled"
        )
    if config.stop_at_target and config.target_accuracy is None:
        return ("stop_at_target", "target_accuracy"), "needs target_accuracy: the accuracy to stop at"
    if config.task == "inference":
        for key in ("target_accuracy", "stop_at_target"):
            if getattr(config, key) is not None:
                return (key, "task"), "time to accuracy applies to training, not task: inference"
    return None


def version_problem(config: RunConfig, check_pins: bool = True) -> Problem | None:
    """version: a release of a real framework. One the adapter does not serve is let through (its
    run is recorded `unsupported` with the reason); one it serves needs a pin set (``check_pins``:
    now, as data_dir must exist now; a stored configuration's pin set may be gone since)."""
    if config.version is None:
        return None
    if config.framework == "fault":
        return ("version", "framework"), "the fault worker has no releases: version applies to the frameworks"
    if not check_pins or releases.unsupported(config.framework, config.version):
        return None
    missing = pins.missing(config.framework, config.version)
    return (("version", "framework"), missing) if missing else None


def replica_problem(config: RunConfig) -> Problem | None:
    """replicas: data-parallel training; fault_replica names one of them."""
    if config.fault_replica is not None and config.fault_replica >= config.replica_count:
        return ("fault_replica", "replicas"), (
            f"replica {config.fault_replica} does not exist: the run has {config.replica_count}"
            " (numbered from 0)"
        )
    if config.replicas is not None and config.task == "inference":
        return ("replicas", "task"), "data-parallel replicas apply to training, not task: inference"
    return None


def sequence_problem(config: RunConfig) -> Problem | None:
    """sequence_length: a language model's, at most its context (its learned positions)."""
    if config.sequence_length is None or config.framework == "fault":
        return None
    if config.model not in LANGUAGE_MODELS:
        return ("sequence_length", "model"), (
            f"only applies to the language models ({', '.join(LANGUAGE_MODELS)}), not {config.model}"
        )
    context = GPT[config.model][1]
    if config.sequence_length > context:
        return ("sequence_length", "model"), (
            f"{config.sequence_length} tokens is longer than {config.model}'s context of {context}"
        )
    return None


def _data_problem(config: RunConfig, check_paths: bool) -> Problem | None:
    """Images feed the image models, token sequences the recurrent ones; IMDB has two classes."""
    if config.model in LANGUAGE_MODELS and config.dataset != "synthetic":
        return ("dataset", "model"), (
            f"model {config.model} reads synthetic language (dataset synthetic), not dataset {config.dataset}"
        )
    recurrent = config.model in TOKEN_MODELS
    if config.dataset != "synthetic" and recurrent != (config.dataset in TOKEN_DATASETS):
        what = "token sequences" if config.dataset in TOKEN_DATASETS else "images"
        wants = "token sequences (dataset synthetic or imdb)" if recurrent else "images"
        return (
            "dataset",
            "model",
        ), f"dataset {config.dataset} holds {what}, but model {config.model} reads {wants}"
    if config.dataset in TOKEN_DATASETS and config.classes != 2:
        return ("classes", "dataset"), (
            f"dataset {config.dataset} has 2 classes (negative, positive), not {config.classes}"
        )
    if config.dataset == "synthetic":
        if config.data_dir is not None:
            return ("data_dir",), "only applies to image_folder, cifar10, cifar100, imdb and digits datasets"
        return None
    if config.dataset == "digits" and config.classes != 10:
        return ("classes", "dataset"), f"dataset digits has 10 classes (the digits 0-9), not {config.classes}"
    if config.dataset == "digits" and config.data_dir is None:
        return None  # scikit-learn's own copy (orchestrator/provision/digits.py)
    if config.data_dir is None:
        return ("dataset",), f"dataset {config.dataset} needs data_dir: the folder that holds it"
    if check_paths and not _is_dir(config.data_dir):
        return ("data_dir",), f"no such folder: {config.data_dir}"
    return None


def _is_dir(path: str) -> bool:
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):  # a NUL in the name, a name too long: no such folder either
        return False


def _batch_problem(config: RunConfig) -> Problem | None:
    if config.global_batch <= config.train_size:
        return None
    if config.replicas:
        return ("batch_size", "replicas", "dataset_size"), (
            f"batch_size {config.batch_size} on each of {config.replicas} replicas is a global batch of"
            f" {config.global_batch}, larger than the training split of {config.train_size} samples"
            f" (dataset_size {config.dataset_size}, val_fraction {config.val_fraction:g})"
        )
    return ("batch_size", "dataset_size", "val_fraction"), (
        f"batch_size {config.batch_size} is larger than the training split of {config.train_size}"
        f" samples (dataset_size {config.dataset_size}, val_fraction {config.val_fraction:g})"
    )


# The defaults of min_time (seconds) and min_steps: chosen from benchmarks/harness/autorange.py's figures
# (docs/performance.md). The fault worker measures nothing, so it is held to neither.
DEFAULT_MIN_TIME = 2.0
DEFAULT_MIN_STEPS = 20


def resolved_timing(config: RunConfig) -> tuple[float, int]:
    """The min_time and min_steps a run uses: its own, else bench's defaults."""
    if config.framework == "fault":
        default_time, default_steps = 0.0, 1
    else:
        default_time, default_steps = DEFAULT_MIN_TIME, DEFAULT_MIN_STEPS
    min_time = default_time if config.min_time is None else config.min_time
    return min_time, default_steps if config.min_steps is None else config.min_steps


# A configuration is about 1 KB of JSON; far more is not one, and is refused before it is parsed.
STORED_CONFIG_CHARS = 64 << 10


def config_from_stored(text: Any, where: str) -> RunConfig:
    """The configuration of a runs.config_json value, checked as strictly as a matrix.

    ``where`` names the row and column (``bench.db: run 12: config_json``); every problem is one
    DatabaseError line that starts with it and names the key.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise DatabaseError(f"{where}: expected JSON text, got {type(text).__name__}")
    if len(text) > STORED_CONFIG_CHARS:
        raise DatabaseError(f"{where}: {len(text):,} characters, more than a configuration holds")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        detail = exc if isinstance(exc, ValueError) else "nested too deep"
        raise DatabaseError(f"{where}: not JSON ({detail})") from None
    return config_from_data(data, where)


def config_from_data(data: Any, where: str) -> RunConfig:
    """A configuration bench wrote as a JSON object (a database row, an in-flight state file),
    checked as strictly as a matrix; every problem one DatabaseError line starting with ``where``."""
    if not isinstance(data, dict):
        raise DatabaseError(f"{where}: expected a JSON object, got {type(data).__name__}")
    values = {key: _stored_value(key, value, where) for key, value in data.items()}
    config = RunConfig(**values)
    given = [key for key, value in values.items() if value is not None]
    problem = cross_field_problem(config, given, check_paths=False)
    if problem:
        keys, message = problem
        key = next((k for k in keys if k in given), keys[0])
        raise DatabaseError(f"{where}: {key}: {message}")
    return config


def _stored_value(key: Any, value: Any, where: str) -> Any:
    if not isinstance(key, str) or key not in FIELD_NAMES:
        raise DatabaseError(f"{where}: {key!r}: unknown key (not a setting of this bench)")
    if value is None and key in _OPTIONAL:
        return None
    try:
        if key in _BYTES:
            # Stored in bytes: the matrix's size parser would read a bare number as MiB.
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"expected a positive number of bytes, got {value!r}")
            return value
        if key == "data_dir" and not (isinstance(value, str) and Path(value).is_absolute()):
            raise ValueError(f"expected an absolute folder path (as bench stores it), got {value!r}")
        return validate_field(key, value)
    except ValueError as exc:
        raise DatabaseError(f"{where}: {key}: {exc}") from None

"""What each setting of a run means and which values it takes: one table, for `bench train --help`
and the options made from settings; docs/matrix.md's field table says the same for a reader.

The allowed values are derived from config.py's own constants and limits, so help cannot drift
from what the validators accept.
"""

from __future__ import annotations

from orchestrator.config.run_config import (
    CHOICES,
    FIELD_NAMES,
    INT_LIMITS,
    MAX_SECONDS,
)

_SIZE = "a size: 512MiB, 2GiB, 1.5G; a bare number is MiB"
_SECONDS = f"seconds, a number >= 0 below {MAX_SECONDS:.0e}"

# field -> what it does; allowed values come from _allowed() unless given in _FORMATS.
MEANINGS: dict[str, str] = {
    "framework": "Which framework runs it, in its own environment; fault: the fake that fails on command.",
    "model": "Architecture, defined once in workers/models/.",
    "device": "Where the model runs.",
    "batch_size": "Images per training step; at most the training split.",
    "optimizer": "Optimizer.",
    "lr": "Learning rate.",
    "momentum": "Momentum, for the optimizers that use it.",
    "epochs": "Timed epochs per repeat.",
    "warmup_steps": "Untimed training steps before the first repeat.",
    "repeats": "Times the timed epochs run, each from the same initial weights.",
    "timeout": "Seconds the whole run may take before its process group is killed.",
    "dataset": "Data set; synthetic is generated, the others are read from --data-dir (docs/datasets.md).",
    "dataset_size": "Images in the data set, training and validation together.",
    "data_dir": "The folder holding an image_folder, cifar10, cifar100 or imdb data set.",
    "image_size": "Side of the square images, in pixels.",
    "classes": "Number of classes.",
    "val_fraction": "Share of the data set held out for validation.",
    "threads": (
        "CPU threads for the framework; 0 leaves the framework's default (one thread for Paddle, half"
        " the cores for MXNet); all: every CPU the run may use (its cpus, else this machine's), shared"
        " among its replicas, resolved when the matrix is read."
    ),
    "seed": "Seed for data, initial weights and epoch order.",
    "fault": "framework fault only: what the fault worker does.",
    "exit_code": "framework fault only: the exit status of fault exit (or hostile).",
    "seconds": "framework fault only: how long fault sleep sleeps.",
    "after_steps": "framework fault only: strike at the start of step N + 1, not during setup.",
    "ignore_sigterm": "framework fault only: fault hang ignores SIGTERM (only the kill ends it).",
    "cpus": "The CPUs the run's processes are pinned to (default: every CPU bench may use).",
    "memory_budget": "Resident memory the run's process tree may hold; crossed, the run is oom.",
    "gpu_memory_budget": "Device memory, capped by the framework's own mechanism.",
    "sample_interval": "Seconds between resource samples (default 0.1); 0 turns the sampler off.",
    "hold_threads": "framework fault only, fault hold: threads started for the hold.",
    "hold_memory_mb": "framework fault only, fault hold: MiB allocated and kept resident.",
    "hold_seconds": "framework fault only, fault hold: how long the hold lasts.",
    "hold_child_memory_mb": "framework fault only, fault hold: MiB a child process holds.",
    "trace": "kernels: time each kernel or operator in the timed epochs (perturbs timing; docs/kernels.md).",
    "task": "inference: forward passes in evaluation mode, no training (docs/inference.md).",
    "features": "With task inference: stop at the pooled features, without the classifier.",
    "mode": "How a step runs: eager, graph or compiled (default: the framework's own; docs/fairness.md).",
    "precision": "fp32, or mixed bf16/fp16 as the framework's users do it; tf32 on NVIDIA GPUs "
    "(docs/fairness.md).",
    "compile_mode": "PyTorch with mode compiled: torch.compile's mode (default inductor's default).",
    "target_accuracy": "Time to accuracy: the validation accuracy whose first reaching is timed "
    "(docs/reports.md).",
    "stop_at_target": "With target_accuracy: end each repeat at the epoch that reaches it.",
    "sequence_length": "Language models: tokens per sequence (default: the model's context; docs/models.md).",
    "replicas": "Data-parallel training over this many processes, each with batch_size samples a step "
    "(docs/distributed.md).",
    "fault_replica": "framework fault only: the replica the fault strikes (the others run ok).",
    "min_time": (
        "Least timed seconds per run: extra timed epochs (not evaluated) are added until reached "
        "(default 2; fault 0; docs/reports.md)."
    ),
    "min_steps": "Least timed steps per run, reached as min_time is (default 20; fault 1).",
}

_FORMATS: dict[str, str] = {
    "lr": "a number > 0",
    "momentum": "a number, 0 <= m < 1",
    "val_fraction": "a number, 0 < f < 1",
    "timeout": f"seconds, a number > 0 below {MAX_SECONDS:.0e}",
    "seconds": _SECONDS,
    "hold_seconds": _SECONDS,
    "min_time": _SECONDS,
    "sample_interval": "seconds, a number >= 0 below 3600",
    "data_dir": "a folder path",
    "cpus": 'CPU numbers such as "0-3,6" or 2',
    "memory_budget": _SIZE,
    "gpu_memory_budget": _SIZE,
    "ignore_sigterm": "true | false",
    "features": "true | false",
    "stop_at_target": "true | false",
    "target_accuracy": "a number, 0 < a <= 1",
}


def allowed(field: str) -> str:
    """The values ``field`` takes, as help shows them."""
    if field in CHOICES:
        return " | ".join(CHOICES[field])
    if field in INT_LIMITS:
        low, high = INT_LIMITS[field]
        return ("all, or " if field == "threads" else "") + f"an integer, {low} to {high}"
    return _FORMATS[field]


def field_help(field: str, default: object = None) -> str:
    """One option's help: what it does, its values, its default."""
    text = f"{MEANINGS[field]} Values: {allowed(field)}."
    return text + (f" Default: {default}." if default is not None else "")


assert set(MEANINGS) == set(FIELD_NAMES), "every setting has a description"

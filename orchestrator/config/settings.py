"""Every setting of a run, declared once: its type, default, check, help, documentation and the
schema version of its ``runs`` column, in ``SETTINGS``.

RunConfig (run_config.py) is the typed dataclass of these settings, in this order (a test holds the
two one-for-one); the validators, the integer limits, the named choices, `bench train --help` and
docs/matrix.md's field table (field_docs.py) are derived from this list. A new setting is one entry
here, one field there, one column in schema.sql.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from orchestrator.config.setting import (
    Check,
    Setting,
    boolean,
    choice,
    folder_path,
    integer,
    number,
    true_or_unset,
)
from orchestrator.config.values import MAX_CPUS, parse_cpus, parse_size, shown
from workers import execution as modes
from workers import frameworks, releases
from workers import models as definition

FRAMEWORKS = frameworks.NAMES  # workers/frameworks.py: what bench knows of each framework
# The model names are the one model definition's (workers/models/), never restated here.
MODELS = definition.ALL_MODELS
DEVICES = ("cpu", "cuda")
OPTIMIZERS = ("sgd", "adam", "rmsprop")
DATASETS = ("synthetic", "image_folder", "cifar10", "cifar100", "imdb", "digits")
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

# Upper bounds of the integer and time settings: generous for any real benchmark, but finite, so
# that no setting can overflow SQLite's signed 64-bit INTEGER, a C int in the worker (os._exit, a
# thread count), or drive an absurd allocation or loop (docs/matrix.md lists them with reasons).
SQLITE_INT_MAX = 2**63 - 1
MAX_SECONDS = 10**7  # about 116 days, for timeout, sleeps and holds; threading's TIMEOUT_MAX is larger
# `threads: all` as it is read: every CPU the run may use. RunConfig resolves it at once (all_threads),
# so a configuration, its hash and its record hold the count, as if it had been written.
THREADS_ALL = -1

_SIZE = "a size: 512MiB, 2GiB, 1.5G; a bare number is MiB"
_SECONDS = f"seconds, a number >= 0 below {MAX_SECONDS:.0e}"


def _threads(value: Any) -> int:
    if value == "all":
        return THREADS_ALL
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected all or a non-negative integer, got {shown(value)}")
    return integer(0, MAX_CPUS)(value)


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


def _precision(value: Any) -> str | None:
    choice(PRECISIONS, "precision")(value)
    return None if value == modes.DEFAULT_PRECISION else value  # fp32 stored as None: hashes kept


def _replicas(value: Any) -> int | None:
    count = integer(*_REPLICAS)(value)
    return None if count == 1 else count  # one replica stored as None: earlier hashes are kept


_REPLICAS = (1, 1024)


def _version(value: Any) -> str:
    # YAML reads 2.10 as the number 2.1: a release written as a number is refused, not guessed.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError(f'expected a release as text, got the number {shown(value)}: quote it ("2.10")')
    problem = releases.shape_problem(value)
    if problem:
        raise ValueError(f"{problem}, got {shown(value)}")
    return str(value)


def _accuracy(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not 0 < value <= 1:
        raise ValueError(f"expected an accuracy above 0 and at most 1 (0.75 for 75 %), got {shown(value)}")
    return float(value)


# In RunConfig's order, which is the column order of reports and of `bench train`'s options.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="framework",
        type="str",
        default="pytorch",
        since=1,
        choices=FRAMEWORKS,
        help="Which framework runs it, in its own environment; fault: the fake that fails on command.",
        doc=(
            "Which framework runs it, in its own environment ([frameworks.md](frameworks.md)); `fault` is the"
            " deliberate fake that fails on command."
        ),
    ),
    Setting(
        name="model",
        type="str",
        default="small_cnn",
        since=1,
        choices=MODELS,
        help="Architecture, defined once in workers/models/.",
        doc=(
            "Architecture, defined once in `workers/models/` ([models.md](models.md)). `gpt2_small` and "
            "`gpt_tiny` are language models: they train on synthetic language (next token at every position) "
            "and take `sequence_length`; `image_size` and `classes` do not apply to them."
        ),
    ),
    Setting(
        name="device",
        type="str",
        default="cpu",
        since=1,
        choices=DEVICES,
        help="Where the model runs.",
    ),
    Setting(
        name="batch_size",
        type="int",
        default=32,
        since=1,
        limits=(1, 2**20),
        help="Images per training step; at most the training split.",
        doc_values="integer, 1 to 1,048,576 (2²⁰)",
    ),
    Setting(
        name="optimizer",
        type="str",
        default="sgd",
        since=1,
        choices=OPTIMIZERS,
        help="Optimizer.",
    ),
    Setting(
        name="lr",
        type="float",
        default=0.01,
        since=1,
        check=number(positive=True),
        values="a number > 0",
        help="Learning rate.",
        doc_values="number > 0",
    ),
    Setting(
        name="momentum",
        type="float",
        default=0.9,
        since=1,
        check=number(positive=False, maximum=1.0),
        values="a number, 0 <= m < 1",
        help="Momentum, for the optimizers that use it.",
        doc="Momentum (for the optimizers that use it).",
        doc_values="number, 0 ≤ m < 1",
    ),
    Setting(
        name="epochs",
        type="int",
        default=1,
        since=1,
        limits=(1, 10_000),
        help="Timed epochs per repeat.",
    ),
    Setting(
        name="warmup_steps",
        type="int",
        default=2,
        since=1,
        limits=(0, 100_000),
        help="Untimed training steps before the first repeat.",
        doc=(
            "The least untimed training steps before the first repeat: warm-up goes on until 3 consecutive "
            "steps are within 10 % of their median (at most 50 more steps, and at most 25 % of `timeout`), "
            "and the time above steady steps is the run's `compile_seconds` "
            "([architecture.md](architecture.md#warm-up-steady-state-and-compile-seconds)). `0`: no warm-up; "
            "the first timed epoch then includes any compilation."
        ),
    ),
    Setting(
        name="repeats",
        type="int",
        default=1,
        since=1,
        limits=(1, 1_000),
        help="Times the timed epochs run, each from the same initial weights.",
        doc="Times the timed epochs are run, each from the same initial weights.",
        doc_values="integer, 1 to 1,000",
    ),
    Setting(
        name="timeout",
        type="float",
        default=300.0,
        since=1,
        check=number(positive=True, maximum=MAX_SECONDS),
        values="seconds, a number > 0 below 1e+07",
        help="Seconds the whole run may take before its process group is killed.",
        doc_values="number > 0, below 10⁷ (about 116 days)",
    ),
    Setting(
        name="dataset",
        type="str",
        default="synthetic",
        since=1,
        choices=DATASETS,
        help="Data set; synthetic is generated, the others are read from --data-dir (docs/datasets.md).",
        doc=(
            "Data set ([datasets.md](datasets.md)); `synthetic` is generated, the others are read from "
            "`data_dir`, decoded once."
        ),
    ),
    Setting(
        name="dataset_size",
        type="int",
        default=256,
        since=1,
        limits=(2, 10**9),
        help="Images in the data set, training and validation together.",
    ),
    Setting(
        name="data_dir",
        type="str | None",
        default=None,
        since=1,
        check=folder_path,
        values="a folder path",
        help="The folder holding an image_folder, cifar10, cifar100, imdb or digits data set.",
        doc=(
            "Where `image_folder`/`cifar10`/`cifar100`/`imdb` data is (for `digits`, optional: a folder "
            "holding `digits.csv.gz`); relative to the matrix file."
        ),
        doc_values="folder path",
    ),
    Setting(
        name="image_size",
        type="int",
        default=64,
        since=1,
        limits=(8, 4096),
        help="Side of the square images, in pixels.",
    ),
    Setting(
        name="classes",
        type="int",
        default=10,
        since=1,
        limits=(2, 1_000_000),
        help="Number of classes.",
    ),
    Setting(
        name="val_fraction",
        type="float",
        default=0.2,
        since=1,
        check=number(positive=True, maximum=1.0),
        values="a number, 0 < f < 1",
        help="Share of the data set held out for validation.",
        doc="Share of `dataset_size` held out for validation (rounded).",
        doc_values="number, 0 < f < 1",
    ),
    Setting(
        name="threads",
        type="int",
        default=0,
        since=1,
        check=_threads,
        limits=(0, MAX_CPUS),
        also="all",
        help=(
            "CPU threads for the framework; 0 leaves the framework's default (one thread for Paddle, half the"
            " cores for MXNet); all: every CPU the run may use (its cpus, else this machine's), shared among "
            "its replicas, resolved when the matrix is read."
        ),
        doc=(
            "CPU threads for the framework (sets the thread variables); 0 leaves the framework's default, "
            "which is not every core for all of them (one thread for Paddle, half the cores for MXNet: "
            "[frameworks.md](frameworks.md)); `all` is every CPU the run may use (its `cpus`, else every CPU "
            "bench may use on the machine that reads the matrix), shared among its `replicas`. `all` is "
            "resolved when the matrix is read: the configuration, its hash and its record hold the count (2 "
            'on a 2-core machine), so a comparison "on all cores" says how many, and the same matrix on a '
            "bigger machine is a different configuration. With `--executor ray` it is the count of the "
            "machine that runs `bench run`, not the node's."
        ),
    ),
    Setting(
        name="seed",
        type="int",
        default=0,
        since=1,
        limits=(0, 2**32 - 1),  # numpy's RandomState takes seeds 0 to 2**32 - 1
        help="Seed for data, initial weights and epoch order.",
    ),
    Setting(
        name="fault",
        type="str | None",
        default=None,
        part="kind",
        since=1,
        choices=FAULTS,
        group="fault",
        help="framework fault only: what the fault worker does.",
        doc="What the fault worker does.",
        doc_values=(
            "`ok` `raise` `segfault` `abort` `exit` `hang` `oom` `garbage` `no_result` `sleep` `hold` "
            "`hostile` `orphans` `flood` `learn` `hostile_result` `unsupported` `unavailable`"
        ),
        doc_default="none (`ok` for framework `fault`)",
    ),
    Setting(
        name="exit_code",
        type="int | None",
        default=None,
        since=1,
        limits=(-(2**31), 2**31 - 1),  # a C int: the fault worker's os._exit
        group="fault",
        help="framework fault only: the exit status of fault exit (or hostile).",
        doc="Exit status for `fault: exit`; for `fault: hostile`, exit with it instead of raising.",
        doc_default="none (1)",
    ),
    Setting(
        name="seconds",
        type="float | None",
        default=None,
        since=1,
        check=number(positive=False, maximum=MAX_SECONDS),
        group="fault",
        values=_SECONDS,
        help="framework fault only: how long fault sleep sleeps.",
        doc="Sleep for `fault: sleep`.",
        doc_values="number ≥ 0, below 10⁷",
        doc_default="none (0)",
    ),
    Setting(
        name="after_steps",
        type="int | None",
        default=None,
        since=1,
        limits=(0, 10**9),
        group="fault",
        help="framework fault only: strike at the start of step N + 1, not during setup.",
        doc="Strike at the start of training step N + 1 (warm-up counts) instead of during setup.",
    ),
    Setting(
        name="ignore_sigterm",
        type="bool | None",
        default=None,
        since=1,
        check=boolean,
        group="fault",
        help="framework fault only: fault hang ignores SIGTERM (only the kill ends it).",
        doc="For `fault: hang`: ignore SIGTERM, so only the kill after the grace period ends it.",
    ),
    Setting(
        name="cpus",
        type="str | None",
        default=None,
        since=3,
        check=parse_cpus,
        values='CPU numbers such as "0-3,6" or 2',
        help="The CPUs the run's processes are pinned to (default: every CPU bench may use).",
        doc=(
            "The CPUs the run may use: the worker and every process and thread it starts are pinned to them "
            '(affinity). On an axis, each value is one set: `cpus: [[0], [0, 1]]` or `cpus: ["0", "0-1"]`. A '
            "CPU the machine does not offer makes the run `unavailable`."
        ),
        doc_values='CPU numbers 0 to 8191: `[0, 1]`, `"0-3,6"` or `2`',
        doc_default="none (every CPU bench may use)",
    ),
    Setting(
        name="memory_budget",
        type="int | None",
        default=None,
        since=3,
        check=parse_size,
        values=_SIZE,
        help="Resident memory the run's process tree may hold; crossed, the run is oom.",
        doc=(
            "Resident memory (RSS) the run's whole process tree may hold; the sampler kills the tree when it "
            "is crossed and the run is `oom` with the budget, the peak seen and the phase."
        ),
        doc_values="size: `512MiB`, `2GiB`, `1.5G`; a bare number is MiB; at most 2⁶² bytes (4 EiB)",
    ),
    Setting(
        name="gpu_memory_budget",
        type="int | None",
        default=None,
        since=3,
        check=parse_size,
        values=_SIZE,
        help="Device memory, capped by the framework's own mechanism.",
        doc=(
            "Device memory, capped by the framework's own mechanism (PyTorch's per-process fraction, "
            "TensorFlow's logical device limit, Paddle's `FLAGS_gpu_memory_limit_mb`); `unsupported` where "
            "there is none (MXNet, Singa) and on `device: cpu`."
        ),
        doc_values="size, as `memory_budget`",
    ),
    Setting(
        name="sample_interval",
        type="float | None",
        default=None,
        since=3,
        check=number(positive=False, maximum=3600.0),
        values="seconds, a number >= 0 below 3600",
        help="Seconds between resource samples (default 0.1); 0 turns the sampler off.",
        doc=(
            "How often the sidecar sampler takes a sample ([profiler.md](profiler.md)); 0 turns the sampler "
            "off."
        ),
        doc_values="number ≥ 0 (seconds), below 3600",
        doc_default="none (0.1)",
    ),
    Setting(
        name="hold_threads",
        type="int | None",
        default=None,
        since=3,
        limits=(0, 10_000),
        group="fault",
        help="framework fault only, fault hold: threads started for the hold.",
        doc="For `fault: hold`: threads started (each waits) for the hold.",
        doc_default="none (0)",
    ),
    Setting(
        name="hold_memory_mb",
        type="int | None",
        default=None,
        since=3,
        limits=(0, 2**24),  # MiB: 16 TiB
        group="fault",
        help="framework fault only, fault hold: MiB allocated and kept resident.",
        doc="For `fault: hold`: MiB allocated and written page by page, so all of it is resident.",
        doc_values="integer, 0 to 2²⁴ (16 TiB)",
        doc_default="none (0)",
    ),
    Setting(
        name="hold_seconds",
        type="float | None",
        default=None,
        since=3,
        check=number(positive=False, maximum=MAX_SECONDS),
        group="fault",
        values=_SECONDS,
        help="framework fault only, fault hold: how long the hold lasts.",
        doc=(
            "For `fault: hold`: how long threads and memory are held (phase `hold`); then training goes on as"
            " `ok`."
        ),
        doc_values="number ≥ 0, below 10⁷",
        doc_default="none (0)",
    ),
    Setting(
        name="hold_child_memory_mb",
        type="int | None",
        default=None,
        since=3,
        limits=(0, 2**24),
        group="fault",
        help="framework fault only, fault hold: MiB a child process holds.",
        doc="For `fault: hold`: a child process that holds this many MiB (resident) for the hold.",
    ),
    Setting(
        name="trace",
        type="str | None",
        default=None,
        since=4,
        check=_trace,
        choices=TRACES,
        help="kernels: time each kernel or operator in the timed epochs (perturbs timing; docs/kernels.md).",
        doc=(
            "`kernels`: record the time of each CUDA kernel (GPU) or framework operator (CPU) during the "
            "timed epochs, classified (gemm, batched gemm, convolution, …; [kernels.md](kernels.md)). Tracing"
            " perturbs timing: a traced run is its own configuration and its epoch times are marked in "
            "reports."
        ),
        doc_default="`off`",
    ),
    Setting(
        name="task",
        type="str | None",
        default=None,
        since=5,
        check=_task,
        choices=TASKS,
        help="inference: forward passes in evaluation mode, no training (docs/inference.md).",
        doc=(
            "`inference`: no training; the model runs forward in evaluation mode (dropout off, batch norm on "
            "its running statistics) without gradients over the training split in batches, after the same "
            "warm-up; each epoch records seconds, images/s and seconds per image "
            "([inference.md](inference.md)). `train` is stored as unset (earlier configurations keep their "
            "hash)."
        ),
        doc_default="`train`",
    ),
    Setting(
        name="features",
        type="bool | None",
        default=None,
        since=5,
        check=true_or_unset,
        help="With task inference: stop at the pooled features, without the classifier.",
        doc=(
            "With `task: inference`: stop at the pooled features (the model without its classifier: "
            "ResNet50's 2048 values); an error with `task: train`."
        ),
        doc_default="`false`",
    ),
    Setting(
        name="min_time",
        type="float | None",
        default=None,
        since=6,
        check=number(positive=False, maximum=MAX_SECONDS),
        values=_SECONDS,
        help=(
            "Least timed seconds per run: extra timed epochs (not evaluated) are added until reached (default"
            " 2; fault 0; docs/reports.md)."
        ),
        doc=(
            "Timed seconds a run reaches at least: after the configured epochs of every repeat, the worker "
            "adds **extra** timed epochs (continuing the last repeat, not evaluated) until the run has "
            "`min_time` seconds and `min_steps` steps of timing, up to 1,000 extra epochs, and none that "
            "would take the run past 70 % of its `timeout` (two epochs of margin); a run stopped short says "
            "so (`samples_note`, reports mark it `?`). See "
            "[reports.md](reports.md#samples-enough-of-them-and-one-source-for-every-unit). `0` turns it off."
        ),
        doc_values="number ≥ 0 (seconds), below 10⁷",
        doc_default="none (2; 0 for `fault`)",
    ),
    Setting(
        name="min_steps",
        type="int | None",
        default=None,
        since=6,
        limits=(1, 10**9),
        help="Least timed steps per run, reached as min_time is (default 20; fault 1).",
        doc="Timed training steps a run reaches at least, likewise. `1` turns it off.",
        doc_default="none (20; 1 for `fault`)",
    ),
    Setting(
        name="mode",
        type="str | None",
        default=None,
        since=7,
        choices=MODES,
        help="How a step runs: eager, graph or compiled (default: the framework's own; docs/fairness.md).",
        doc=(
            "How a step runs: operation by operation, a captured graph without a fusing compiler, or a "
            "compiler that generates fused code. A framework without the mode ends the run `unsupported` with"
            " the reason; never a fall-back. The run records the mode it resolved to and how "
            "([fairness.md](fairness.md#execution-modes-and-precision))."
        ),
        doc_values="`eager`, `graph`, `compiled`",
        doc_default=(
            "none (the framework's default: PyTorch and Paddle eager, TensorFlow, MXNet and Singa graph, JAX "
            "compiled)"
        ),
    ),
    Setting(
        name="precision",
        type="str | None",
        default=None,
        since=7,
        check=_precision,
        choices=PRECISIONS,
        help=(
            "fp32, or mixed bf16/fp16 as the framework's users do it; tf32 on NVIDIA GPUs (docs/fairness.md)."
        ),
        doc=(
            "Mixed bf16 or fp16 the way the framework's users do it (float32 parameters, a loss scaler for "
            "fp16); `tf32`: TensorFloat-32 matrix products on NVIDIA GPUs (cuda only). Unsupported is an "
            "outcome with its reason."
        ),
        doc_values="`fp32`, `bf16`, `fp16`, `tf32`",
        doc_default="`fp32`",
    ),
    Setting(
        name="compile_mode",
        type="str | None",
        default=None,
        since=7,
        choices=COMPILE_MODES,
        help="PyTorch with mode compiled: torch.compile's mode (default inductor's default).",
        doc="PyTorch with `mode: compiled` only: `torch.compile`'s mode (elsewhere the matrix is refused).",
        doc_values="`default`, `reduce-overhead`, `max-autotune`",
        doc_default="none (`default`)",
    ),
    Setting(
        name="target_accuracy",
        type="float | None",
        default=None,
        since=7,
        check=_accuracy,
        values="a number, 0 < a <= 1",
        help="Time to accuracy: the validation accuracy whose first reaching is timed (docs/reports.md).",
        doc=(
            "Time to accuracy: the wall time (training and evaluation, as MLPerf counts it) at which the "
            'validation accuracy first reaches it; "not reached" otherwise '
            "([architecture.md](architecture.md#time-to-accuracy)). Training only (refused with `task: "
            "inference`)."
        ),
        doc_values="number, 0 < a ≤ 1",
    ),
    Setting(
        name="stop_at_target",
        type="bool | None",
        default=None,
        since=7,
        check=true_or_unset,
        help="With target_accuracy: end each repeat at the epoch that reaches it.",
        doc=(
            "With `target_accuracy` (without it the matrix is refused): each repeat ends at the epoch that "
            "reaches it; no extra `min_time` epochs follow a repeat that stopped "
            "([architecture.md](architecture.md#time-to-accuracy))."
        ),
        doc_values="`true`, `false`",
        doc_default="`false`",
    ),
    Setting(
        name="sequence_length",
        type="int | None",
        default=None,
        since=8,
        limits=(1, 2**20),
        help="Language models: tokens per sequence (default: the model's context; docs/models.md).",
        doc=(
            "Language models only: tokens per sequence. Under `settings` it reaches only the language models'"
            " configurations (the others drop it, so one matrix can hold image and language models); on an "
            "axis or an include entry with another model it is refused. Their throughput is reported in "
            "tokens/s too (sequences/s × `sequence_length`)."
        ),
        doc_values="integer, 1 to the model's context",
        doc_default="the model's context (1024 for `gpt2_small`, 128 for `gpt_tiny`)",
    ),
    Setting(
        name="replicas",
        type="int | None",
        default=None,
        since=9,
        check=_replicas,
        limits=_REPLICAS,
        help=(
            "Data-parallel training over this many processes, each with batch_size samples a step "
            "(docs/distributed.md)."
        ),
        doc=(
            "Data-parallel training: the run spreads over this many processes (replicas), each training "
            "`batch_size` samples a step, so the global batch is `batch_size` × `replicas`; gradients are "
            "averaged through the framework's own machinery "
            "([distributed.md](distributed.md#data-parallel-runs)). The run's CPUs (its `cpus`, else all of "
            "bench's) are split into equal shares, one per replica, and `threads` is per replica (0: its "
            "share). More replicas than CPUs, or `replicas` × `threads` beyond them, is recorded `skipped` "
            "with the reason. Training only. `1` is stored as unset (earlier configurations keep their hash)."
        ),
        doc_default="`1`",
    ),
    Setting(
        name="fault_replica",
        type="int | None",
        default=None,
        part="replica",
        since=9,
        limits=(0, 1023),
        group="fault",
        help="framework fault only: the replica the fault strikes (the others run ok).",
        doc=(
            "With `replicas`: the fault strikes only this replica; the others run ok (and wait for it in "
            "their collective)."
        ),
        doc_values="integer, 0 to 1023, below `replicas`",
        doc_default="none (every replica)",
    ),
    Setting(
        name="runs",
        type="int",
        default=1,
        since=14,
        limits=(1, 1_000),
        column="planned_runs",
        identity=False,
        help=(
            "Independent runs of the configuration: each a worker process of its own and a row; reports "
            "give the cell's median over runs with its interval."
        ),
        doc=(
            "Independent runs of the configuration, each a fresh worker process and a row of its own "
            "(unlike `repeats`, which repeat inside one process and cannot see how far apart processes "
            "land). A sweep runs run k of every configuration before run k+1 of any, each round "
            "shuffled by the sweep's recorded seed; reports show the median over runs with a 95 % "
            "interval, and frameworks they cannot tell apart share a rank (docs/reports.md). Not part "
            "of the configuration's identity: runs asked for by another count pool with these."
        ),
        doc_values="integer, 1 to 1,000",
    ),
    Setting(
        name="work",
        type="int | None",
        default=None,
        since=14,
        limits=(0, 10**9),
        group="fault",
        help="framework fault only: extra real CPU work per training step (loop iterations).",
        doc=(
            "Extra real CPU work in every training step, as iterations of `sum(range(n))` (about 10 ns "
            'each on the 2-vCPU development machine: `python3 -m timeit "sum(range(1000000))"`, 9.6 ms): '
            "a step of known, fixed cost, for proving a comparison finds a slowdown of known size "
            "(docs/performance.md, power)."
        ),
        doc_values="integer, 0 to 10⁹",
        doc_default="none (0)",
    ),
    Setting(
        name="version",
        type="str | None",
        default=None,
        since=15,
        check=_version,
        values='a release such as "0.4.30"',
        help=(
            "The framework's release, in its own environment (bench env setup FRAMEWORK --version V); "
            "default: the pinned one (docs/frameworks.md)."
        ),
        doc=(
            "The framework's release: the run uses the environment made from `envs/<framework>@<version>.txt`"
            " (`bench env setup jax --version 0.4.30`), and the release installed there must be this one, or "
            "the run is `unavailable` saying both. A release outside what the framework's adapter serves is "
            "`unsupported` with the reason, nothing started; one inside it without a pin set is refused when "
            'the matrix is read. On an axis: `version: ["0.4.30", "0.10.2"]` with `framework: jax` '
            "([frameworks.md](frameworks.md#framework-versions)). Quote it: YAML reads 2.10 as a number."
        ),
        doc_values='release text: `"0.4.30"`, `"2.0.0rc1"`, `"2.4.1+cpu"`',
        doc_default="none (the pinned release, `envs/<framework>.txt`)",
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
VALIDATORS: dict[str, Check] = {s.name: s.validator for s in SETTINGS}
INT_LIMITS: dict[str, tuple[int, int]] = {s.name: s.limits for s in SETTINGS if s.limits is not None}
# The fields whose values are names from a fixed list: the validators, --help and the filters'
# did-you-mean all read them here.
CHOICES: dict[str, tuple[str, ...]] = {s.name: s.choices for s in SETTINGS if s.choices is not None}
# The fault worker's settings: a configuration of another framework that sets one is refused.
FAULT_FIELDS = tuple(s.name for s in SETTINGS if s.group == "fault")
# The same settings as one value, `fault: {kind: segfault, after_steps: 2, replica: 1}`: the
# setting of each key of that mapping (kind is the fault's own name).
FAULT_PARTS: dict[str, str] = {s.part_name: s.name for s in SETTINGS if s.group == "fault"}
# Added after the first schema: left out of the hash while unset, so earlier configurations keep
# their identity.
LATE_FIELDS = frozenset(s.name for s in SETTINGS if s.since > 1)
# Settings that are not part of a configuration's identity (its hash): how often it runs.
NOT_IDENTITY = frozenset(s.name for s in SETTINGS if not s.identity)
# The runs column of each setting (schema.sql).
COLUMNS: dict[str, str] = {s.name: s.runs_column for s in SETTINGS}


def fault_value(settings: Mapping[str, Any]) -> str | None:
    """A configuration's fault worker settings (RunConfig.to_dict()) as runs.fault stores them: JSON
    of the parts that are set, by part name, kind first; None where none is (a real framework)."""
    parts = {BY_NAME[n].part_name: settings[n] for n in FAULT_FIELDS if settings.get(n) is not None}
    return json.dumps(parts) if parts else None

"""What a study is once loaded: plain typed objects, and the vocabulary a study file may use.

A study file is input from outside (it may come with a paper's supplement or a colleague's
folder): nothing in it chooses what bench executes beyond the matrices it names, which go through
the matrix loader like any other. Everything else is data to compare and checks to evaluate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.config.matrix import Matrix

# The claim kinds bench can evaluate (claims.py; the bands and shapes in kinds.py), and the one it
# records without evaluating.
KINDS = (
    "fastest", "order", "ratio", "rises_with", "resource", "similar", "spread", "rises_beyond",
    "not_checkable",
)  # fmt: skip
# How a `fastest` claim gathers its columns: every column, the geometric mean over columns, or the
# worst column (each framework's slowest).
AGGREGATES = ("every", "average", "worst")
# The measured figures a claim may name: a run's time per image (lower is better), its throughput
# (higher is better) and the profiler's columns (docs/profiler.md), each a positive number per run.
TIME_METRICS = ("seconds_per_image",)
RATE_METRICS = ("images_per_second",)
RESOURCE_METRICS = ("cpu_percent_mean", "threads_steady", "rss_peak_bytes")
METRICS = TIME_METRICS + RATE_METRICS + RESOURCE_METRICS
# Figures read from a run's learning curve, its epochs' validation accuracy (accuracy.py), not from
# the runs table: the accuracy at an epoch (higher is better), and the epochs a run takes to reach
# a fraction of its own final accuracy (lower is better).
ACCURACY_METRICS = ("val_accuracy", "epochs_to_final")
AT = ("every", "last")  # which epochs a val_accuracy claim reads, where it names no `epoch`
RELATIONS = ("less", "greater")
# The units a published table may state: times (lower is faster) and rates (higher is faster).
TIME_UNITS = ("s", "ms", "s/epoch", "s/1000 images")
RATE_UNITS = ("images/s",)
# A published accuracy (0 to 1): compared with bench's as an order per epoch, never as a level.
ACCURACY_UNITS = ("fraction",)
UNITS = TIME_UNITS + RATE_UNITS + ACCURACY_UNITS
# What a scaling ratio's bench side may be read against where bench cannot measure it.
REFERENCES = ("linear",)
# What a table does with a missing published cell, or with a row of a framework bench lacks.
POLICIES = ("refuse", "carry")

VERDICTS = ("holds", "does not hold", "mixed", "not shown at this n", "not checkable here")


@dataclass(frozen=True)
class StudyMatrix:
    """One matrix the study runs, at one named scale (`cpu`: what a 2-core machine finishes)."""

    path: Path
    scale: str
    matrix: Matrix
    note: str = ""

    def sweep_name(self, study: str) -> str:
        """The sweep's name in the database: the study, the scale and the matrix, so a report finds
        its runs and says at which scale they ran."""
        return f"study {study}/{self.scale}: {self.matrix.name}"


@dataclass(frozen=True)
class Table:
    """A published table: which CSV rows, which value, what each row is, beside which measurement."""

    name: str
    file: Path
    unit: str
    row: str
    value: str  # the CSV column that holds the figure
    items: str  # the setting the rows compare (framework), also a CSV column
    columns: str  # the setting each comparison is made per (model), also a CSV column; or epoch
    where: tuple[tuple[str, str], ...]  # CSV rows kept: column = text
    measured: tuple[tuple[str, object], ...]  # the runs set beside it: setting = value
    missing: str = "refuse"  # an empty published cell: refuse the file, or carry it with its note
    unknown: str = "refuse"  # a framework bench lacks: refuse, or carry it as "not run here"
    notes: str = ""
    line: int = 0
    # A table bench has no figure for (its columns are not a setting, as GPU kernels are not): why,
    # shown with the table's rows instead of a measured column beside them.
    published_only: str = ""
    # Why bench lacks each of the table's items it cannot run (gluon: "MXNet's own API, which ..."),
    # added to the row's "bench has no framework gluon".
    absent: tuple[tuple[str, str], ...] = ()

    @property
    def higher_is_faster(self) -> bool:
        """Whether a higher figure ranks first (a rate; an accuracy, where "faster" reads "better")."""
        return self.unit in RATE_UNITS or self.unit in ACCURACY_UNITS


@dataclass(frozen=True)
class Claim:
    """One finding of the study written as a check (or as not checkable, with why)."""

    id: str
    kind: str
    text: str
    source: str
    line: int
    items: str = "framework"
    columns: str | None = None
    where: tuple[tuple[str, object], ...] = ()
    metric: str = "seconds_per_image"
    subjects: tuple[str, ...] = ()  # fastest: (who,); order: best first; ratio, resource, similar: (a, b)
    aggregates: tuple[str, ...] = ()  # fastest
    threshold: float | None = None  # ratio; similar, spread: within
    direction: str = ""  # ratio: above | below; resource: less | greater
    axis: str | None = None  # rises_with, rises_beyond
    reason: str = ""  # not_checkable
    epoch: int | None = None  # val_accuracy: the epoch read (else `at`)
    at: str = ""  # val_accuracy: every (each epoch a column of its own) or last
    fraction: float = 0.95  # epochs_to_final: the share of the run's final accuracy reached

    @property
    def higher_is_better(self) -> bool:
        return self.metric in RATE_METRICS or self.metric == "val_accuracy"


@dataclass(frozen=True)
class Cause:
    """What explains a changed claim, in the study file's words, and where bench's docs show it."""

    claims: tuple[str, ...]
    text: str
    see: str = ""  # docs/NAME.md or docs/NAME.md#section (since.SEE)
    line: int = 0


@dataclass(frozen=True)
class ScalingRatio:
    """A ratio the study shows between two levels of one CSV column of a published table (791 →
    6003 photos), per row of the table's other dimensions, and what bench sets beside it: its own
    ratio between the smallest and the largest value of a setting it ran (`measured`), or, where
    bench's figure cannot change with that axis, the reference the published ratio is read
    against (`reference: linear`, to / from), with why (never a made-up measured figure)."""

    name: str
    table: Table
    axis: str  # the CSV column whose two levels are compared
    low: str  # its level the ratio starts from (the CSV's text)
    high: str  # the level it ends at
    measured: str | None = None  # the setting whose smallest and largest values bench compares
    where: tuple[tuple[str, object], ...] = ()  # measured: settings pinned beside the table's own
    reference: str | None = None  # "linear": the published ratio read against high / low
    why: str = ""
    line: int = 0


@dataclass(frozen=True)
class Releases:
    """A matrix that runs the study's frameworks at several releases (`version` an axis), and the
    published table it answers: its cells are set beside that table per release, never pooled
    with the study's other runs (releases.py)."""

    matrix: StudyMatrix
    table: Table
    note: str = ""  # the study's words on the releases it compares with (the poster's era)
    line: int = 0


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    citation: str
    folder: Path
    matrices: tuple[StudyMatrix, ...]
    tables: tuple[Table, ...]
    claims: tuple[Claim, ...]
    notes: str = ""
    scales: tuple[str, ...] = field(default=())
    since: tuple[Cause, ...] = ()  # the causes its report's closing section names (since.py)
    ratios: tuple[ScalingRatio, ...] = ()
    releases: Releases | None = None  # the published table at older releases (releases.py)

    def at_scale(self, scale: str | None) -> tuple[StudyMatrix, ...]:
        """The matrices of one scale (all, where none is asked for)."""
        return tuple(m for m in self.matrices if scale is None or m.scale == scale)

    def runs_planned(self, scale: str | None = None) -> int:
        """The runs its matrices ask for at `scale` (every scale where None), each a worker process."""
        return sum(c.runs or 1 for m in self.at_scale(scale) for c in m.matrix.configs)

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
RELATIONS = ("less", "greater")
# The units a published table may state: times (lower is faster) and rates (higher is faster).
TIME_UNITS = ("s", "ms", "s/epoch", "s/1000 images")
RATE_UNITS = ("images/s",)
UNITS = TIME_UNITS + RATE_UNITS
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
    columns: str  # the setting each comparison is made per (model), also a CSV column
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
        return self.unit in RATE_UNITS


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

    @property
    def higher_is_better(self) -> bool:
        return self.metric in RATE_METRICS


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

    def at_scale(self, scale: str | None) -> tuple[StudyMatrix, ...]:
        """The matrices of one scale (all, where none is asked for)."""
        return tuple(m for m in self.matrices if scale is None or m.scale == scale)

    def runs_planned(self, scale: str | None = None) -> int:
        """The runs its matrices ask for at `scale` (every scale where None), each a worker process."""
        return sum(c.runs or 1 for m in self.at_scale(scale) for c in m.matrix.configs)

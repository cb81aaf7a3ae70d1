"""Where runs happen: one small interface, two implementations.

An executor takes the sweep's jobs and yields each job's `RunRecord` as the run ends; the sweep
(orchestrator/sweep/run.py) records every record the moment it arrives, whoever produced it. The local
executor runs one job at a time in this process's machine; the Ray executor
(orchestrator/executors/ray_cluster.py) runs each job as a Ray task on a node of a cluster.

Interruption (Ctrl-C, or a stop signal such as SIGTERM or SIGHUP turned into KeyboardInterrupt by
the sweep) is the executor's to handle: it stops what runs, yields those runs as `interrupted`, and
returns, or raises the interrupt again once it has yielded them (the Ray executor, whose interrupted
sweep may have had no run started yet); the sweep ends `interrupted` either way.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.run_record import RunRecord

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """One configuration to run, and where its run folder goes."""

    config: RunConfig
    run_dir: Path
    data_file: Path | None = None
    run_index: int = 0  # which of its configuration's independent runs (`runs: N`), from 0
    token: str | None = None  # marks the run's processes (orchestrator/launch/orphans.py)
    # Called with the worker's pid once it exists: the sweep notes it among the runs in flight
    # (orchestrator/sweep/liveruns.py), so that a later bench finds what a killed one left.
    on_worker_start: Callable[[int], None] | None = None


class ProgressSink(Protocol):
    """What an executor tells the sweep's progress (orchestrator/sweep/progress.py implements it)."""

    def begin(
        self, config: RunConfig, run_dir: Path, node: str | None = None, since: float | None = None
    ) -> None: ...

    def tick(self) -> None: ...

    def note(self, text: str) -> None: ...


class Executor(Protocol):
    name: str

    def run(self, jobs: Iterable[Job], progress: ProgressSink) -> Generator[RunRecord, None, None]:
        """Yield each job's record as its run ends (not necessarily in order)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a cluster connection)."""
        ...

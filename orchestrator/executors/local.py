"""Where runs happen: one small interface, two implementations.

An executor takes the sweep's jobs and yields each job's `RunRecord` as the run ends; the sweep
(orchestrator/sweep/run.py) records every record the moment it arrives, whoever produced it. The local
executor runs one job at a time in this process's machine; the Ray executor
(orchestrator/executors/ray_cluster.py) runs each job as a Ray task on a node of a cluster.

Interruption (Ctrl-C, or a stop signal such as SIGTERM or SIGHUP turned into KeyboardInterrupt by
the sweep) is the executor's to handle: it stops what runs, yields those runs as `interrupted`, and
returns.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from orchestrator.config.run_config import RunConfig
from orchestrator.executors import idle
from orchestrator.launch.execute import RunRecord, allowed_cpus, execute
from orchestrator.sweep import liveruns
from orchestrator.sweep.progress import Progress

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """One configuration to run, and where its run folder goes."""

    config: RunConfig
    run_dir: Path
    data_file: Path | None = None
    token: str | None = None  # marks the run's processes (orchestrator/launch/orphans.py)
    live: Path | None = None  # its file among the runs in flight (orchestrator/sweep/liveruns.py)


class Executor(Protocol):
    name: str

    def run(self, jobs: Iterable[Job], progress: Progress) -> Generator[RunRecord, None, None]:
        """Yield each job's record as its run ends (not necessarily in order)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a cluster connection)."""
        ...


class LocalExecutor:
    """One run at a time, on this machine, in the foreground of the sweep."""

    name = "local"

    def __init__(self, env_root: str | None, wait_idle: float | None = None) -> None:
        self.env_root = env_root
        self.wait_idle = wait_idle  # seconds to wait, at most, for a quiet machine before each run

    def run(self, jobs: Iterable[Job], progress: Progress) -> Generator[RunRecord, None, None]:
        for job in jobs:
            if self.wait_idle is not None:
                cpus = allowed_cpus(job.config)[0] or os.sched_getaffinity(0)
                idle.wait_idle(cpus, self.wait_idle, progress.note)
            progress.begin(job.config, job.run_dir)
            rec = execute(
                job.config,
                job.run_dir,
                self.env_root,
                tick=progress.tick,
                data_file=job.data_file,
                on_worker_start=partial(liveruns.note_worker, job.live) if job.live else None,
                token=job.token,
            )
            yield rec
            if rec.outcome.outcome == "interrupted":
                return

    def close(self) -> None:
        pass

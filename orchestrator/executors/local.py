"""The local executor: one configuration after another, on this machine, in the sweep's foreground."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable

from orchestrator.executors import idle
from orchestrator.executors.base import Job, ProgressSink
from orchestrator.launch.execute import allowed_cpus, execute
from orchestrator.launch.run_record import RunRecord


class LocalExecutor:
    """One run at a time, on this machine, in the foreground of the sweep."""

    name = "local"

    def __init__(self, env_root: str | None, wait_idle: float | None = None) -> None:
        self.env_root = env_root
        self.wait_idle = wait_idle  # seconds to wait, at most, for a quiet machine before each run

    def run(self, jobs: Iterable[Job], progress: ProgressSink) -> Generator[RunRecord, None, None]:
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
                on_worker_start=job.on_worker_start,
                token=job.token,
            )
            yield rec
            if rec.outcome.outcome == "interrupted":
                return

    def close(self) -> None:
        pass

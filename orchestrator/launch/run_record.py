"""RunRecord: what one run left, the contract between those who run it and the sweep that stores it.

Every executor hands one back per job, whatever happened (launch/execute.py builds it for a run on
this machine, a Ray task for a node's); the sweep writes it to the database (sweep/recording.py)
and nothing else. It crosses a Ray task's boundary as a pickle, so it holds plain data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.outcomes import Outcome
from profiler import timeline as timelines


@dataclass
class RunRecord:
    """Everything known about one finished run, ready for the database."""

    config: RunConfig
    outcome: Outcome
    run_dir: Path
    started_at: str
    ended_at: str
    wall_seconds: float
    worker_command: str
    epochs: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str = ""
    thread_env: dict[str, str] = field(default_factory=dict)
    timeline: timelines.Timeline = field(default_factory=timelines.Timeline)
    cpus_allowed: int = 0
    trace: dict[str, Any] | None = None  # trace: kernels runs: backend, status, records
    # Where it ran: the executor, the Ray node, that machine's facts (hostinfo.machine()), --pack.
    executor: str = "local"
    node: str | None = None
    host: dict[str, Any] | None = None
    packed: bool = False
    # A data-parallel run's replicas (launch/replicas.py), one row each for the replicas table;
    # empty for a run of one process.
    replicas: list[dict[str, Any]] = field(default_factory=list)
    # Which of its configuration's independent runs (`runs: N`) this is, from 0: the sweep's to say.
    run_index: int = 0


def now() -> str:
    """A record's timestamps (started_at, ended_at), and a sweep's: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")

"""The body of one Ray task: run one configuration on whichever node Ray chose.

It calls what the local executor calls (orchestrator/launch/execute.py `execute`): the isolated worker in
this node's framework environment, the sidecar profiler, the outcome decision. It returns the whole
`RunRecord`, with this node's name and machine facts, to the driver, which alone writes the
database. Ray imports this module on the node: it needs bench installed there, not ray's own API.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator.executors.base import Job
from orchestrator.launch.execute import execute
from orchestrator.launch.run_record import RunRecord
from orchestrator.provision import hostinfo

log = logging.getLogger(__name__)
REAPER = Path(__file__).resolve().with_name("reaper.py")


class Reaper:
    """A watchdog process that kills the run's process group if this task dies first."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(REAPER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ray's kill of the task's process must not take it along
        )
        self.proc.wait()  # the reaper forked and detached; its copy reads the pipe
        self.watched: list[int] = []

    def _say(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:  # the reaper is gone (killed by hand): the run goes on unguarded
            log.warning("the reaper did not take %r: %s", line, exc)

    def watch(self, pgid: int) -> None:
        self.watched.append(pgid)
        self._say(f"watch {pgid}")

    def close(self, finished: bool = True) -> None:
        """After a finished run (its group already gone) the reaper forgets it; otherwise it kills."""
        for pgid in self.watched if finished else []:
            self._say(f"done {pgid}")
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def node_name() -> str:
    """This node as the progress lines and the runs table name it: host, address, Ray node id."""
    import ray  # on a node, only ever imported inside a task, where ray is present

    context = ray.get_runtime_context()
    return f"{socket.gethostname()} {ray.util.get_node_ip_address()} {context.get_node_id()[:12]}"


def run_on_node(job: Job, env_root: str | None, packed: bool, started: Any) -> RunRecord:
    """Announce the start (``started``: a ray.util.queue.Queue), run the job, return its record."""
    node, host = node_name(), dict(hostinfo.machine())
    try:  # not waited for: the run must not wait for the queue actor (slow to start at first)
        started.actor.put_nowait.remote((str(job.run_dir), node, host, time.time()))
    except Exception as exc:  # the progress line loses the node; the record still carries it
        log.warning("could not announce the start of %s: %s", job.run_dir, exc)
    reaper = Reaper()
    try:
        rec = execute(
            job.config, job.run_dir, env_root, data_file=job.data_file, on_worker_start=reaper.watch
        )
    except BaseException:
        reaper.close(finished=False)
        raise
    reaper.close()
    rec.executor, rec.node, rec.packed = "ray", node, packed
    rec.host = host
    if rec.outcome.outcome == "unavailable":
        rec.outcome.reason = f"on node {node}: {rec.outcome.reason}"
    return rec

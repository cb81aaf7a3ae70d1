"""The body of one Ray task: run one configuration on whichever node Ray chose.

It calls what the local executor calls (orchestrator/launch/execute.py `execute`): the isolated worker in
this node's framework environment, the sidecar profiler, the outcome decision. A data-parallel run's
replica goes through the same lifecycle (orchestrator/launch/lifecycle.py: start, watch, end), and
the replicas' endings become the run's record as on one machine (lifecycle.record_replicas). It
returns the whole `RunRecord`, with this node's name and machine facts, to the driver, which alone
writes the database. Ray imports this module on the node: it needs bench installed there, not ray's own API.
"""

from __future__ import annotations

import dataclasses
import logging
import os
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


# -- data-parallel runs across nodes (docs/distributed.md, "Data-parallel runs") -------------------


def rendezvous_on_node(count: int) -> dict[str, Any]:
    """Replica 0's node: its address and ports free there now, for every replica to meet at."""
    import ray

    from orchestrator.launch.replicas import rendezvous_for

    return {**rendezvous_for(count, ray.util.get_node_ip_address()), "node": node_name()}


def run_replica_on_node(
    job: Job, rank: int, rendezvous: dict[str, Any], env_root: str | None, token: str
) -> dict[str, Any]:
    """One replica of a data-parallel run, on the node of its placement-group bundle: the worker
    process on this node's CPUs (or the configuration's), watched here; its ending and row."""
    from orchestrator.config.values import cpu_set
    from orchestrator.launch import lifecycle
    from orchestrator.provision import envs

    node, host = node_name(), dict(hostinfo.machine())
    python, where = envs.python_for(job.config.framework, env_root, job.config.version)
    if python is None:
        return {"rank": rank, "node": node, "host": host, "unavailable": f"on node {node}: {where}"}
    available = os.sched_getaffinity(0)
    cpus = frozenset(cpu_set(job.config.cpus) if job.config.cpus else available)
    threads = job.config.threads or len(cpus)
    reaper = Reaper()
    start = lifecycle.start_replica(
        job.config,
        job.run_dir,
        python,
        rank,
        rendezvous,
        (cpus, threads),
        data_file=job.data_file,
        on_worker_start=reaper.watch,
    )
    try:
        (finished,) = lifecycle.watch(job.config, [start], token)
    except BaseException:
        reaper.close(finished=False)
        raise
    reaper.close()
    ended_at = finished.exited_at or time.time()
    outcome, row = lifecycle.end_replica(job.config, job.run_dir, rank, start, finished)
    row["node"] = node
    return {
        "ended_at": ended_at,
        "rank": rank,
        "node": node,
        "host": host,
        "outcome": outcome,
        "finished": finished,
        "row": row,
        "command": f"on {node}: {start.command}",
    }


def run_replicated(
    job: Job, env_root: str | None, packed: bool, started: Any, bundle: dict[str, float]
) -> RunRecord:
    """A data-parallel run over the cluster: a placement group of one bundle a replica (one node
    each, STRICT_SPREAD; with --pack, PACK: replicas may share a node), the rendezvous on replica
    0's node, one task a replica on its bundle, watched from here. The first replica that fails
    ends the others (their tasks cancelled, whose reapers end their workers); the endings make the
    run's record as on one machine (lifecycle.record_replicas)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from orchestrator.launch import orphans, replicas
    from orchestrator.launch.run_record import now

    config, count = job.config, job.config.replica_count
    group = placement_group([dict(bundle)] * count, strategy="PACK" if packed else "STRICT_SPREAD")
    try:
        ray.get(group.ready())
        try:  # not waited for, as run_on_node's
            started.actor.put_nowait.remote(
                (str(job.run_dir), node_name(), dict(hostinfo.machine()), time.time())
            )
        except Exception as exc:
            log.warning("could not announce the start of %s: %s", job.run_dir, exc)

        def on(index: int) -> PlacementGroupSchedulingStrategy:
            return PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=index)

        options = _bundle_options(bundle)
        meet = ray.remote(max_retries=0)(rendezvous_on_node)
        one = ray.remote(max_retries=0)(run_replica_on_node)
        token = orphans.new_token()
        for attempt in range(replicas.PORT_TRIES):
            if attempt:
                replicas.clear(job.run_dir)
            rendezvous = ray.get(meet.options(num_cpus=0, scheduling_strategy=on(0)).remote(count))
            started_at, begun = now(), time.time()
            refs = {
                one.options(**options, scheduling_strategy=on(rank)).remote(
                    job, rank, rendezvous, env_root, token
                ): rank
                for rank in range(count)
            }
            ends = _watch(ray, refs, time.monotonic())
            rec = _record(config, job, ends, started_at, count, begun)
            stderrs = [r.get("stderr_tail") or "" for r in rec.replicas]
            if rec.outcome.outcome == "ok" or not replicas.port_was_taken(stderrs):
                break
        rec.executor, rec.node, rec.packed = "ray", rendezvous["node"], packed
        rec.host = next((e["host"] for e in ends.values() if e.get("rank") == 0 and e.get("host")), None)
        return rec
    finally:
        remove_placement_group(group)


def _bundle_options(bundle: dict[str, float]) -> dict[str, Any]:
    custom = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU", "memory")}
    options: dict[str, Any] = {"num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0)}
    if custom:
        options["resources"] = custom
    return options


# After a replica's failure is seen, how long the others' endings are awaited before the culprit is
# chosen and the rest cancelled: a replica that dies takes the others' collective down with it, and
# whichever task reports first need not be the one that failed first.
GRACE_SECONDS = 3.0


def _failed(end: dict[str, Any]) -> bool:
    if end.get("lost") or end.get("unavailable"):
        return True
    return "outcome" in end and end["outcome"].outcome != "ok" and end["finished"].ended_by is None


def _watch(ray: Any, refs: dict[Any, int], start: float) -> dict[int, dict[str, Any]]:
    """Every replica's ending. Once one has failed (and the grace period for the others' has
    passed), the replica that failed first is the culprit, and the tasks still running are
    cancelled (force: Ray kills their processes, the reapers their workers)."""
    ends: dict[int, dict[str, Any]] = {}
    waiting = dict(refs)
    deadline = None
    cancelled = False
    while waiting:
        left = None if deadline is None or cancelled else max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(list(waiting), num_returns=1, timeout=left)
        for ref in ready:
            rank = waiting.pop(ref)
            try:
                end = ray.get(ref)
            except ray.exceptions.TaskCancelledError:
                end = {"rank": rank, "cancelled": True}
            except ray.exceptions.RayError as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                end = {"rank": rank, "lost": f"{type(exc).__name__}: {first}"}
            end["wall"] = time.monotonic() - start
            end.setdefault("ended_at", time.time())
            ends[rank] = end
            if deadline is None and _failed(end):
                deadline = time.monotonic() + GRACE_SECONDS
        if deadline is not None and not cancelled and time.monotonic() >= deadline and waiting:
            for ref in waiting:
                ray.cancel(ref, force=True)
            cancelled = True  # their endings (TaskCancelledError) follow
    failed = [rank for rank, end in ends.items() if _failed(end)]
    culprit = min(failed, key=lambda r: (ends[r]["ended_at"], _signal_last(ends[r]))) if failed else None
    for end in ends.values():
        end["culprit"] = culprit
    return ends


def _signal_last(end: dict[str, Any]) -> bool:
    """Of failures at the same moment, a signal first: the others' errors follow from it."""
    finished = end.get("finished")
    return not (finished is not None and finished.returncode < 0)


def _record(
    config: Any, job: Job, ends: dict[int, dict[str, Any]], started_at: str, count: int, begun: float
) -> RunRecord:
    """The run's record from its replicas' endings, as lifecycle.record_replicas makes it here."""
    from orchestrator.launch import lifecycle, replicas
    from orchestrator.launch.outcomes import Outcome
    from orchestrator.launch.process import Finished

    ended, rows, commands = [], [], []
    for rank in range(count):
        end = ends[rank]
        if "outcome" in end:
            outcome, finished, row = end["outcome"], end["finished"], end["row"]
            # One clock for every node's replica (wall clock): which failed first.
            finished = dataclasses.replace(finished, wall_seconds=end["ended_at"] - begun)
            commands.append(end["command"])
        else:
            culprit = end.get("culprit")
            stopped = end.get("cancelled") and culprit is not None and culprit != rank
            if stopped:
                outcome = Outcome("stopped", reason=f"ended by bench: replica {culprit} failed")
            elif end.get("unavailable"):
                outcome = Outcome("unavailable", reason=end["unavailable"])
            else:
                outcome = Outcome(
                    "node_lost",
                    reason=f"the node of replica {rank} died or left the cluster ({end.get('lost')})",
                )
            finished = Finished(
                returncode=-9, wall_seconds=end["wall"], ended_by=culprit if stopped else None
            )
            row = (
                replicas.stopped_row(rank, job.run_dir, culprit or 0, end["wall"], end.get("node"))
                if stopped
                else {
                    "replica": rank,
                    "node": end.get("node"),
                    "outcome": outcome.outcome,
                    "reason": outcome.reason,
                    "wall_seconds": end["wall"],
                }
            )
        ended.append((outcome, finished))
        rows.append(row)
    from orchestrator.config.values import cpu_set

    shown = (ends.get(0) or {}).get("row", {}).get("cpus")
    cpus = len(cpu_set(shown)) if shown else 0
    share = (cpus, config.threads)
    return lifecycle.record_replicas(
        config, job.run_dir, ended, rows, started_at, " & ".join(commands), share
    )

"""The Ray executor: each configuration one Ray task on a node of a cluster (docs/distributed.md).

The driver (this module) submits tasks lazily, a bounded window ahead of what the cluster can run,
learns from each task where it started (a queue actor on the driver's node), and yields each task's
`RunRecord` as it finishes; orchestrator/sweep/run.py records it. Faults of the cluster become records
too: the node died (`node_lost`), Ray's memory monitor killed the task (`ray_oom`), no node offers
what the run needs (`unschedulable`), anything else Ray raised (`cluster_error`).
"""

from __future__ import annotations

import logging
import re
import socket
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.config.values import cpu_set
from orchestrator.errors import BenchError, ConfigError
from orchestrator.executors import ray_task
from orchestrator.executors.base import Job, ProgressSink
from orchestrator.launch import outcomes
from orchestrator.launch.lifecycle import gather
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.launch.sidecar import SAMPLES_FILE
from profiler import timeline as timelines

SLOT = "bench_slot"  # one per node: one run at a time there, unless --pack
POLL_SECONDS = 0.5
WAIT_NOTE_SECONDS = 5.0  # a task's start (a worker process on its node) takes well under this
NODES_EVERY_SECONDS = 2.0
START_HINT = f"""ray start --head --resources '{{"{SLOT}": 1}}'"""
log = logging.getLogger(__name__)


class ExecutorError(BenchError):
    """The Ray executor cannot start: ray is missing, the cluster unreachable or unprepared."""


@dataclass
class Flight:
    """A submitted task: its job, what it asked for, and where and when it started."""

    job: Job
    demand: dict[str, float]
    started_at: str = ""
    start: float = 0.0
    node: str | None = None
    host: dict[str, Any] | None = None
    begun: bool = False
    submitted: float = field(default_factory=time.monotonic)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "--executor ray needs the ray package: pip install 'bench[ray]' (or pip install ray)"
        ) from None
    return ray


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _node_in(message: str) -> str | None:
    """The node Ray's error message names (its address and id), for a task that never said."""
    match = re.search(r"IP: ([\w.:-]+), (?:node )?ID: ([0-9a-f]{12})", message)
    return f"{match.group(1)} {match.group(2)}" if match else None


def check_reachable(address: str) -> None:
    """A quick TCP look at HOST:PORT, so that a wrong address fails in seconds, not minutes."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    # ASCII digits in a port's range: isdigit() took '²', and socket raises OverflowError past 65535.
    if not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536 or not host or "\x00" in host:
        raise ConfigError(
            f"--address {address}: expected HOST:PORT (the head's GCS port, 6379), auto or ray://"
        )
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ExecutorError(
            f"--address {address}: no Ray cluster answers there ({exc.strerror or exc}): "
            f"start one with `{START_HINT}` or correct --address"
        ) from None


def demand(config: RunConfig, pack: bool) -> dict[str, float]:
    """What a run asks of a node, in Ray's resource names."""
    if pack:
        cpus = len(cpu_set(config.cpus)) if config.cpus else max(1, config.threads)
        need: dict[str, float] = {"CPU": float(cpus)}
        if config.memory_budget:
            need["memory"] = float(config.memory_budget)
    else:
        need = {SLOT: 1.0}
    if config.device == "cuda":
        need["GPU"] = 1.0
    return need


def task_options(need: dict[str, float]) -> dict[str, Any]:
    custom = {k: v for k, v in need.items() if k not in ("CPU", "GPU", "memory")}
    options: dict[str, Any] = {"num_cpus": need.get("CPU", 0), "num_gpus": need.get("GPU", 0)}
    if "memory" in need:
        options["memory"] = need["memory"]
    if custom:
        options["resources"] = custom
    return options


def fits(need: dict[str, float], node: dict[str, Any]) -> bool:
    have = node.get("Resources") or {}
    return all(have.get(k, 0.0) >= v for k, v in need.items() if v > 0)


class RayExecutor:
    """Runs each job as a Ray task; only this driver writes the database."""

    name = "ray"

    def __init__(self, address: str, pack: bool, env_root: str | None) -> None:
        self.ray = import_ray()
        self.pack, self.env_root, self.address = pack, env_root, address
        self.nodes: list[dict[str, Any]] = []
        self.nodes_at = 0.0
        self.window = 4
        check_reachable(address)
        try:
            self.ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            raise ExecutorError(
                f"--address {address}: cannot connect to a Ray cluster ({_first_line(exc)}): "
                f"start one with `{START_HINT}` or correct --address"
            ) from None
        try:
            self._refresh_nodes(force=True)
            if not pack and not any(n["Resources"].get(SLOT) for n in self.nodes):
                raise ExecutorError(
                    f"no node of the Ray cluster at {address} offers the {SLOT} resource: start each node "
                    f"with --resources '{{\"{SLOT}\": 1}}' (one run per node at a time), or pass --pack"
                )
            self._start_queue()
        except BaseException:
            self.ray.shutdown()
            raise
        self.task = self.ray.remote(max_retries=0)(ray_task.run_on_node)
        # A data-parallel run: one task that places its replicas (ray_task.run_replicated); it
        # takes no resources itself, its replicas' bundles do.
        # It runs on the driver's node, so that losing a replica's node never loses the coordinator.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(self.ray.get_runtime_context().get_node_id(), soft=True)
        self.replicated = self.ray.remote(max_retries=0, num_cpus=0, scheduling_strategy=here)(
            ray_task.run_replicated
        )

    def _start_queue(self) -> None:
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # On the driver's node, so that losing any other node never loses the start messages.
        here = self.ray.get_runtime_context().get_node_id()
        strategy = NodeAffinitySchedulingStrategy(here, soft=True)
        self.queue: Any = Queue(actor_options={"num_cpus": 0, "scheduling_strategy": strategy})

    def _refresh_nodes(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.nodes_at < NODES_EVERY_SECONDS:
            return
        self.nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        self.nodes_at = time.monotonic()
        key = "CPU" if self.pack else SLOT
        self.window = max(4, 2 * int(sum(n["Resources"].get(key, 0) for n in self.nodes)))

    def _feasible(self, need: dict[str, float]) -> bool:
        return any(fits(need, n) for n in self.nodes)

    def close(self) -> None:
        self.ray.shutdown()

    # --- the sweep --------------------------------------------------------------------------

    def run(self, jobs: Iterable[Job], progress: ProgressSink) -> Generator[RunRecord, None, None]:
        pending = iter(jobs)
        flights: dict[Any, Flight] = {}
        more = True
        self.said_waiting = False
        try:
            while True:
                while more and len(flights) < self.window:
                    job = next(pending, None)
                    if job is None:
                        more = False
                        break
                    need = demand(job.config, self.pack)
                    if not self._feasible(need):
                        yield self._unschedulable(Flight(job, need), progress)
                        continue
                    if job.config.replica_count > 1:
                        problem = self._replicas_problem(job.config, need)
                        if problem:
                            yield self._skipped(Flight(job, need), problem, progress)
                            continue
                        ref = self.replicated.remote(
                            replace(job, on_worker_start=None), self.env_root, self.pack, self.queue, need
                        )
                    else:
                        options = task_options(need)
                        ref = self.task.options(**options).remote(
                            replace(job, on_worker_start=None), self.env_root, self.pack, self.queue
                        )
                    flights[ref] = Flight(job, need)
                if not flights:
                    return
                ready, _ = self.ray.wait(list(flights), num_returns=1, timeout=POLL_SECONDS)
                if ready:
                    ready, _ = self.ray.wait(list(flights), num_returns=len(flights), timeout=0)
                self._drain_starts(flights, progress)
                self._say_if_waiting(flights, ready, progress)
                progress.tick()  # the live line's clock and ETA move while tasks run
                for ref in ready:
                    yield self._collect(ref, flights.pop(ref), progress)
                yield from self._stranded(flights, progress)
        except KeyboardInterrupt:
            yield from self._interrupt(flights, progress)
            # Said again, not swallowed: a sweep interrupted before any of its tasks had begun (all
            # waiting for a slot, or their start messages lost with the queue's node) yields no
            # interrupted run, and would otherwise end "finished" with exit status 0.
            raise
        finally:
            for ref in flights:
                self.ray.cancel(ref, force=True)

    def _say_if_waiting(self, flights: dict[Any, Flight], ready: list[Any], progress: ProgressSink) -> None:
        """Once a sweep, when its tasks have waited WAIT_NOTE_SECONDS and none has begun while the
        cluster has no free slot (another sweep holds them): a line saying so, so that a sweep on a
        busy shared cluster does not look hung."""
        if self.said_waiting or ready or self.pack or not flights:
            return
        if any(f.begun for f in flights.values()):
            self.said_waiting = True  # the sweep is under way: nothing to say
            return
        waited = time.monotonic() - min(f.submitted for f in flights.values())
        if waited < WAIT_NOTE_SECONDS:
            return
        try:
            free = self.ray.available_resources().get(SLOT, 0.0)
        except self.ray.exceptions.RayError:
            return
        if free < 1:
            self.said_waiting = True
            progress.note(
                f"waiting for a free {SLOT} on the cluster: {len(flights)} runs submitted "
                f"{waited:.0f} s ago, none started yet"
            )

    def _starts(self) -> list[tuple[str, str, dict[str, Any], float]]:
        if self.queue is None:
            return []
        try:
            size = self.queue.size()
            return list(self.queue.get_nowait_batch(size)) if size else []
        except self.ray.exceptions.RayError as exc:  # its node is gone: records still carry the node
            log.warning("progress loses track of where runs start: %s", _first_line(exc))
            self.queue = None
            return []

    def _drain_starts(self, flights: dict[Any, Flight], progress: ProgressSink) -> None:
        by_dir = {str(f.job.run_dir): f for f in flights.values()}
        for run_dir, node, host, at in self._starts():
            flight = by_dir.get(run_dir)
            if flight is not None and not flight.begun:
                flight.node, flight.host, flight.begun = node, host, True
                flight.started_at = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
                flight.start = time.monotonic() - max(0.0, time.time() - at)
                progress.begin(flight.job.config, flight.job.run_dir, node, since=at)

    def _collect(self, ref: Any, flight: Flight, progress: ProgressSink) -> RunRecord:
        try:
            rec: RunRecord = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            self._refresh_nodes(force=True)
            rec = self._lost(flight, self._fault(exc, flight))
        if not flight.begun:
            progress.begin(flight.job.config, flight.job.run_dir, rec.node)
        return rec

    def _fault(self, exc: BaseException, flight: Flight) -> outcomes.Outcome:
        errors = self.ray.exceptions
        # A task killed soon after it started may not have announced itself: Ray's message names it.
        flight.node = flight.node or _node_in(str(exc))
        node = flight.node or "(not reported)"
        gone = flight.node is not None and not any(
            n["NodeID"].startswith(flight.node.rsplit(" ", 1)[-1]) for n in self.nodes
        )
        if isinstance(exc, errors.NodeDiedError) or (isinstance(exc, errors.WorkerCrashedError) and gone):
            name, what = "node_lost", f"the node died or left the cluster during the run (node {node})"
        elif isinstance(exc, errors.OutOfMemoryError):
            name, what = "ray_oom", f"Ray's memory monitor killed the task on node {node}"
        else:
            name, what = "cluster_error", f"Ray failed the task on node {node}"
        return outcomes.Outcome(
            name,
            reason=f"{what}: {type(exc).__name__}: {_first_line(exc)}",
            exception_type=type(exc).__name__,
            exception_message=str(exc)[:8000],
            traceback=str(exc) if isinstance(exc, errors.RayTaskError) else None,
        )

    def _lost(self, flight: Flight, outcome: outcomes.Outcome) -> RunRecord:
        """A record for a run whose task returned none: what its folder holds, where reachable."""
        job = flight.job
        started = flight.started_at or now()
        command = f"ray task on {flight.node}" if flight.node else "ray task (never started)"
        rec = gather(job.config, outcome, job.run_dir, started, None, command, {})
        rec.wall_seconds = time.monotonic() - flight.start if flight.begun else 0.0
        rec.timeline = timelines.read(job.run_dir / SAMPLES_FILE)
        rec.executor, rec.node, rec.host, rec.packed = "ray", flight.node, flight.host, self.pack
        return rec

    def _unschedulable(self, flight: Flight, progress: ProgressSink) -> RunRecord:
        wanted = ", ".join(f"{k} {v:g}" for k, v in sorted(flight.demand.items()))
        offered = "; ".join(
            f"{n['NodeManagerAddress']} {n['NodeID'][:12]}: "
            + ", ".join(f"{k} {v:g}" for k, v in sorted(n["Resources"].items()) if not k.startswith("node:"))
            for n in self.nodes
        )
        outcome = outcomes.Outcome(
            "unschedulable",
            reason=f"no node of the cluster offers what the run needs ({wanted}); nodes: {offered or 'none'}",
        )
        progress.begin(flight.job.config, flight.job.run_dir)
        return self._lost(flight, outcome)

    def _replicas_problem(self, config: RunConfig, need: dict[str, float]) -> str | None:
        """Why the cluster cannot hold a data-parallel run's replicas, or None: one node each
        (without --pack), or as many bundles as its nodes' resources fit (with it)."""
        count = config.replica_count
        if not self.pack:
            nodes = sum(1 for n in self.nodes if fits(need, n))
            if nodes < count:
                return (
                    f"replicas {count} need a node each (a {SLOT} each, STRICT_SPREAD), and the cluster "
                    f"has {nodes} such node{'s' if nodes != 1 else ''}; --pack lets replicas share a node"
                )
            return None
        room = 0
        for n in self.nodes:
            have = n.get("Resources") or {}
            room += int(min((have.get(k, 0.0) // v for k, v in need.items() if v > 0), default=0))
        if room < count:
            wanted = ", ".join(f"{k} {v:g}" for k, v in sorted(need.items()))
            return (
                f"replicas {count} of {wanted} each do not fit the cluster's nodes together (room for {room})"
            )
        return None

    def _skipped(self, flight: Flight, reason: str, progress: ProgressSink) -> RunRecord:
        progress.begin(flight.job.config, flight.job.run_dir)
        return self._lost(flight, outcomes.Outcome("skipped", reason=reason))

    def _stranded(self, flights: dict[Any, Flight], progress: ProgressSink) -> Iterator[RunRecord]:
        """Waiting tasks that no live node can run any more (their only fitting node left)."""
        self._refresh_nodes()
        for ref, flight in list(flights.items()):
            if not flight.begun and not self._feasible(flight.demand):
                self.ray.cancel(ref, force=True)
                del flights[ref]
                yield self._unschedulable(flight, progress)

    def _interrupt(self, flights: dict[Any, Flight], progress: ProgressSink) -> Iterator[RunRecord]:
        """Cancel every task (force: Ray kills its process, the reaper the run's group); record
        the ones that had started as interrupted. The ones still waiting leave no row, like the
        configurations the sweep had not reached. Those that had already finished are recorded
        as they finished."""
        self._drain_starts(flights, progress)
        done, _ = self.ray.wait(list(flights), num_returns=len(flights), timeout=0) if flights else ([], [])
        for ref in done:
            yield self._collect(ref, flights.pop(ref), progress)
        for ref in flights:
            self.ray.cancel(ref, force=True)
        self._drain_starts(flights, progress)
        reason = "the sweep was interrupted (Ctrl-C, SIGTERM or SIGHUP); its Ray task was cancelled (force)"
        for flight in [f for f in flights.values() if f.begun]:
            yield self._lost(flight, outcomes.Outcome("interrupted", reason=reason))
        flights.clear()

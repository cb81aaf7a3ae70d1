"""The Ray executor on a real two-node Ray cluster on this machine (ray.cluster_utils.Cluster: a head
and a second node, each its own raylet with num_cpus=1 and one bench_slot).

The cluster is module-scoped: a few seconds to start, shared by every test here. Drivers are the
bench CLI, in-process (CliRunner) or as a real process where signals matter.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from ray.cluster_utils import Cluster

from tests import dbs
from tests.conftest import bench_command, default_sigint
from tests.test_outcomes import pid_alive
from tests.test_resume import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.holds_machine]  # its Ray cluster lives between tests

SLOT = {"bench_slot": 1}

FAULTS = """
name: faults
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0, exit_code: 3, timeout: 8}
axes:
  framework: [fault]
  fault: [ok, raise, segfault, abort, exit, hang, garbage, no_result, unsupported, unavailable]
"""
EXPECTED = {
    "ok": "ok",
    "raise": "error",
    "segfault": "crash",
    "abort": "crash",
    "exit": "error",
    "hang": "timeout",
    "garbage": "invalid",
    "no_result": "invalid",
    "unsupported": "unsupported",
    "unavailable": "unavailable",
}
# What a run's row says about the configuration and how it ended, not when, where or how fast.
CONTENT = (
    "config_hash",
    "config_json",
    "outcome",
    "exit_code",
    "signal_name",
    "exception_type",
    "exception_message",
    "last_phase",
    "last_epoch",
    "last_step",
    "parameter_count",
    "steps_per_epoch",
)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "resources": SLOT})
    c.add_node(num_cpus=1, resources=SLOT)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def query(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def watched(run_dir: Path) -> bool:
    """Whether the run's sampler started and was pointed at its worker (samples.jsonl's start record)."""
    try:
        lines = (run_dir / "samples.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return False
    starts = [json.loads(line) for line in lines if '"start"' in line]
    return any(s.get("kind") == "start" and ("pid" in s or "missed" in s) for s in starts)


def content(db: Path) -> dict[str, dict]:
    """Per configuration: its row's content, its epochs and whether it has samples."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    out = {}
    for row in conn.execute("SELECT * FROM runs"):
        data = {k: row[k] for k in CONTENT}
        reason = row["reason"] or ""
        data["reason"] = reason.split(": ", 1)[1] if reason.startswith("on node ") else reason
        data["epochs"] = conn.execute(
            "SELECT repeat, epoch, steps, images FROM epochs WHERE run_id = ? ORDER BY repeat, epoch",
            (row["id"],),
        ).fetchall()
        if row["outcome"] == "timeout":  # seconds long: sampled under any executor, on any load
            sampled = conn.execute("SELECT count(*) > 0 FROM samples WHERE run_id = ?", (row["id"],))
            data["sampled"] = sampled.fetchone()[0]
        elif row["outcome"] == "ok":
            # The ok fault run lasts a fraction of a second: on a loaded machine it may end before
            # the sampler's first look under either executor. What both must do is watch it: the
            # sampler started, was pointed at the worker, and said so (a start record, sampled or
            # "missed"), which it cannot do where an executor never ran it.
            data["watched"] = watched(Path(db).parent / row["run_dir"])
        env = conn.execute(
            "SELECT framework_version, python_version FROM environments WHERE run_id = ?", (row["id"],)
        )
        data["environment"] = tuple(env.fetchone())
        out[row["config_hash"]] = data
    conn.close()
    return out


def assert_same_content(a: Path, b: Path) -> None:
    left, right = content(a), content(b)
    assert sorted(left) == sorted(right)
    for key in left:
        differ = {k: (v, right[key][k]) for k, v in left[key].items() if right[key][k] != v}
        assert not differ, (json.loads(left[key]["config_json"])["fault"], differ)


def test_fault_sweep_on_two_nodes_records_what_the_local_executor_records(
    cli, write_matrix, workdir, cluster
):
    write_matrix(FAULTS)
    local = cli("run", "--matrix", "m.yaml", "--db", "local.db")
    assert local.exit_code == 0, local.output
    remote = cli(
        "run", "--matrix", "m.yaml", "--db", "ray.db", "--executor", "ray", "--address", cluster.address
    )
    assert remote.exit_code == 0, remote.output
    sql = "SELECT json_extract(fault, '$.kind'), outcome, executor, node, packed, machine FROM runs"
    rows = query(workdir / "ray.db", sql)  # runs.fault: one JSON value, the fault's name its kind
    assert {fault: outcome for fault, outcome, *_ in rows} == EXPECTED
    assert {r[2] for r in rows} == {"ray"} and {r[4] for r in rows} == {0}
    assert len({r[3] for r in rows}) == 2  # both nodes ran some
    assert all(r[5] for r in rows)
    assert_same_content(workdir / "ray.db", workdir / "local.db")
    unavailable = query(workdir / "ray.db", "SELECT reason, node FROM runs WHERE outcome = 'unavailable'")[0]
    assert unavailable[0].startswith(f"on node {unavailable[1]}: ")
    assert "running on " in remote.output  # progress names the node


@pytest.mark.framework
def test_a_tiny_pytorch_sweep_on_two_nodes(cli, write_matrix, workdir, cluster, pytorch_python):
    write_matrix(
        """
        name: tiny-torch
        settings: {min_time: 0, min_steps: 1,
                   model: small_cnn, dataset_size: 64, epochs: 1, warmup_steps: 1, threads: 1}
        axes:
          framework: [pytorch]
          batch_size: [16, 32]
        """
    )
    assert cli("run", "--matrix", "m.yaml", "--db", "local.db").exit_code == 0
    remote = cli(
        "run", "--matrix", "m.yaml", "--db", "ray.db", "--executor", "ray", "--address", cluster.address
    )
    assert remote.exit_code == 0, remote.output
    rows = query(workdir / "ray.db", "SELECT outcome, node, median_epoch_seconds FROM runs")
    assert [r[0] for r in rows] == ["ok", "ok"]
    assert len({r[1] for r in rows}) == 2
    assert all(r[2] > 0 for r in rows)
    assert_same_content(workdir / "ray.db", workdir / "local.db")


REPLICA_EVENTS = "sweep-*/*/**/events.jsonl"  # every replica's, replica 0's in the run's folder
REPLICATED = """
name: replicated
settings: {framework: fault, replicas: 2, dataset_size: 40, batch_size: 4, epochs: 2, warmup_steps: 1,
           timeout: 60}
"""


def test_a_data_parallel_run_puts_one_replica_on_each_node(cli, write_matrix, workdir, cluster):
    """Replicas 2 on the two-node cluster: a placement group of one bundle a node (STRICT_SPREAD),
    the rendezvous on replica 0's node, each replica's task on its own node; and replicas 3 there,
    with two nodes, is skipped with the reason."""
    write_matrix(REPLICATED + "axes:\n  replicas: [2, 3]\n")
    result = cli("run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    assert result.exit_code == 0, result.output
    runs = query(
        workdir / "bench.db", "SELECT id, replicas, outcome, reason, executor, global_batch FROM runs"
    )
    two = next(r for r in runs if r[1] == 2)
    three = next(r for r in runs if r[1] == 3)
    assert two[2] == "ok" and two[4] == "ray" and two[5] == 8, two
    assert three[2] == "skipped" and three[3].startswith("replicas 3 need a node each"), three
    reps = query(workdir / "bench.db", f"SELECT replica, outcome, node FROM replicas WHERE run_id = {two[0]}")
    assert [(r[0], r[1]) for r in reps] == [(0, "ok"), (1, "ok")]
    assert reps[0][2] and reps[1][2] and reps[0][2] != reps[1][2]  # one node each
    epochs = query(workdir / "bench.db", f"SELECT images FROM epochs WHERE run_id = {two[0]}")
    assert [e[0] for e in epochs] == [32, 32]  # every replica's images


def test_a_replica_that_crashes_on_its_node_ends_the_other_one(cli, write_matrix, workdir, cluster):
    write_matrix(
        REPLICATED.replace("timeout: 60", "timeout: 60, fault: segfault, fault_replica: 1, after_steps: 2")
    )
    result = cli("run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    assert result.exit_code == 0, result.output
    ((run_id, outcome, reason, run_dir),) = query(
        workdir / "bench.db", "SELECT id, outcome, reason, run_dir FROM runs"
    )
    assert outcome == "crash" and reason.startswith("replica 1 of 2: "), reason
    reps = query(workdir / "bench.db", f"SELECT replica, outcome FROM replicas WHERE run_id = {run_id}")
    assert reps[1] == (1, "crash")
    assert reps[0][1] in ("stopped", "error")  # ended by bench, or it saw the collective close first
    events = Path(run_dir).rglob("events.jsonl")
    pids = [json.loads(line)["pid"] for f in events for line in f.read_text().splitlines()[:1]]
    assert len(pids) == 2 and not [p for p in pids if pid_alive(p)]


def test_a_cuda_run_on_a_cpu_only_cluster_is_unschedulable(cli, write_matrix, workdir, cluster):
    write_matrix(
        """
        name: gpu
        settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
        axes:
          framework: [fault]
          device: [cpu, cuda]
        """
    )
    result = cli("run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    assert result.exit_code == 0, result.output
    rows = dict(query(workdir / "bench.db", "SELECT device, outcome FROM runs"))
    assert rows == {"cpu": "ok", "cuda": "unschedulable"}
    (reason,) = query(workdir / "bench.db", "SELECT reason FROM runs WHERE device = 'cuda'")[0]
    assert "GPU 1" in reason and "bench_slot 1" in reason and "nodes:" in reason


def test_packed_runs_are_marked_in_the_report(cli, write_matrix, workdir, cluster):
    write_matrix(
        """
        name: packed
        settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
        axes:
          framework: [fault]
          seed: [1, 2, 3]
        """
    )
    result = cli("run", "--matrix", "m.yaml", "--executor", "ray", "--pack", "--address", cluster.address)
    assert result.exit_code == 0, result.output
    assert query(workdir / "bench.db", "SELECT DISTINCT packed, outcome FROM runs") == [(1, "ok")]
    report = cli("report").output
    assert report.count(" +") >= 3 and "packed (--pack)" in report


SLEEPS = """
name: sleepy
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
axes:
  framework: [fault]
  fault: [sleep]
  seconds: [4]
  seed: [1, 2, 3, 4, 5, 6]
"""


def start(workdir: Path, *args: str, stderr: Any = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        bench_command(*args),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=default_sigint,
    )


def running_workers(workdir: Path, pattern: str = "sweep-*/*/events.jsonl") -> dict[int, Path]:
    """Worker pid -> run folder, for every run folder whose worker is alive now (``pattern``: the
    event files to look at; a data-parallel run's replicas' are below its folder too)."""
    found = {}
    for events in (workdir / "bench-runs").glob(pattern):
        lines = events.read_text().splitlines()
        if lines:
            pid = json.loads(lines[0])["pid"]
            if pid_alive(pid):
                found[pid] = events.parent
    return found


def raylet_of(pid: int) -> int | None:
    """The raylet above a worker: worker <- its Ray task's process <- the raylet that started it."""
    try:
        return psutil.Process(pid).parent().parent().pid
    except (psutil.Error, AttributeError):
        return None


def kill_node(raylet: int) -> None:
    """What a machine's death looks like to Ray: the raylet and its Ray processes, SIGKILLed."""
    for child in psutil.Process(raylet).children():
        child.kill()
    os.kill(raylet, signal.SIGKILL)


def bury(cluster: Cluster, victim) -> None:
    """Remove a killed node and wait until the GCS has counted it dead (its health check, seconds
    later). Every node of this cluster is on one host, so a driver started before then may attach to
    the dead node's raylet and lose what it places there: the next test's progress queue did."""
    try:
        cluster.remove_node(victim, allow_graceful=False)
    except Exception:  # its raylet is already gone; the rest of its processes go here
        pass
    if victim in cluster.worker_nodes:
        cluster.worker_nodes.remove(victim)
    cluster.wait_for_nodes(timeout=120)


def test_a_node_killed_mid_sweep_is_node_lost_and_resume_completes_the_sweep(write_matrix, workdir, cluster):
    victim = cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    raylet = victim.all_processes["raylet"][0].process.pid
    write_matrix(SLEEPS)
    args = ("run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    proc = start(workdir, *args)
    try:
        wait_for(lambda: any(raylet_of(p) == raylet for p in running_workers(workdir)), timeout=120)
        doomed = next(p for p in running_workers(workdir) if raylet_of(p) == raylet)
        kill_node(raylet)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
        bury(cluster, victim)
    assert proc.returncode == 0, err
    db = workdir / "bench.db"
    rows = query(db, "SELECT outcome, reason, exception_type, node FROM runs")
    lost = [r for r in rows if r[0] == "node_lost"]
    assert len(lost) == 1 and len(rows) == 6, rows
    assert lost[0][2] == "NodeDiedError" and lost[0][3] in lost[0][1]
    assert sorted(r[0] for r in rows if r is not lost[0]) == ["ok"] * 5
    wait_for(lambda: not pid_alive(doomed), timeout=30)  # no worker left behind on the dead node
    resumed = start(workdir, *args, "--resume")
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    assert "1 ok; 5 already finished" in out
    per_config = query(db, "SELECT config_hash, group_concat(outcome) FROM runs GROUP BY config_hash")
    assert sorted(outcomes for _, outcomes in per_config) == ["node_lost,ok"] + ["ok"] * 5


def test_a_node_lost_under_a_replica_makes_the_run_node_lost(write_matrix, workdir, cluster):
    """Replicas 3 on three nodes (a third added for this test); the node of one replica dies mid-run:
    the run is node_lost naming that replica, the other replicas are ended, and no worker is left."""
    victim = cluster.add_node(num_cpus=1, resources=SLOT)
    cluster.wait_for_nodes()
    raylet = victim.all_processes["raylet"][0].process.pid
    write_matrix(
        REPLICATED.replace("replicas: 2", "replicas: 3, fault: sleep, seconds: 120").replace(
            "timeout: 60", "timeout: 300"
        )
    )
    proc = start(workdir, "run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    try:
        wait_for(
            lambda: any(raylet_of(p) == raylet for p in running_workers(workdir, REPLICA_EVENTS)), timeout=120
        )
        wait_for(lambda: len(running_workers(workdir, REPLICA_EVENTS)) == 3, timeout=60)
        everyone = list(running_workers(workdir, REPLICA_EVENTS))
        kill_node(raylet)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
        bury(cluster, victim)
    assert proc.returncode == 0, err
    ((run_id, outcome, reason),) = query(workdir / "bench.db", "SELECT id, outcome, reason FROM runs")
    assert outcome == "node_lost", reason
    assert re.match(r"replica [0-2] of 3: the node of replica [0-2] died or left the cluster", reason), reason
    reps = query(workdir / "bench.db", f"SELECT replica, outcome FROM replicas WHERE run_id = {run_id}")
    assert sorted(r[1] for r in reps) == ["node_lost", "stopped", "stopped"]
    for pid in everyone:
        wait_for(lambda pid=pid: not pid_alive(pid), timeout=30)  # no replica left behind


HANGS = """
name: hangs
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0, timeout: 600}
axes:
  framework: [fault]
  fault: [hang]
  seed: [1, 2, 3]
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_on_the_driver_cancels_its_tasks_and_leaves_no_worker_behind(
    write_matrix, workdir, cluster, sig
):
    write_matrix(HANGS)
    proc = start(workdir, "run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    children: dict[int, int] = {}

    def both_hanging() -> bool:
        for pid, run_dir in running_workers(workdir).items():
            events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
            children.update((pid, e["pid"]) for e in events if e.get("event") == "child")
        return len(children) == 2

    try:
        wait_for(both_hanging, timeout=120)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "--resume" in err
    db = workdir / "bench.db"
    assert query(db, "SELECT outcome, count(*) FROM runs GROUP BY outcome") == [("interrupted", 2)]
    assert query(db, "SELECT status FROM sweeps") == [("interrupted",)]
    for pid in [*children, *children.values()]:  # each worker and the child it started
        wait_for(lambda pid=pid: not pid_alive(pid), timeout=30)


def test_ctrl_c_on_a_sweep_waiting_for_the_clusters_slots_ends_it_interrupted(write_matrix, workdir, cluster):
    """Another sweep holds every slot, so none of this one's tasks has begun: there is no run to
    record as interrupted, and the sweep still ends interrupted, with 130, not finished with 0."""
    write_matrix(HANGS)
    args = ("run", "--matrix", "m.yaml", "--executor", "ray", "--address", cluster.address)
    holder = start(workdir, *args)
    waiting_dir = workdir / "waiting"
    waiting_dir.mkdir()
    (waiting_dir / "m.yaml").write_text(HANGS.replace("name: hangs", "name: waits"))
    waiting = None
    try:
        wait_for(lambda: len(running_workers(workdir)) == 2, timeout=120)
        err_file = waiting_dir / "stderr.txt"
        with open(err_file, "w") as err_out:
            waiting = start(waiting_dir, *args, stderr=err_out)
        db = waiting_dir / "bench.db"
        # Its tasks submitted and none begun, every slot held by the other sweep: bench says so.
        wait_for(lambda: "waiting for a free bench_slot" in err_file.read_text(), timeout=120)
        assert dbs.poll(db, "SELECT count(*) FROM sweeps") == [(1,)]
        assert len(running_workers(workdir)) == 2 and not running_workers(waiting_dir)
        waiting.send_signal(signal.SIGINT)
        waiting.communicate(timeout=120)
        err = err_file.read_text()
        assert waiting.returncode == 130, err
        assert "--resume" in err
        assert query(db, "SELECT status FROM sweeps") == [("interrupted",)]
        assert query(db, "SELECT count(*) FROM runs") == [(0,)]
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=120)
        assert holder.returncode == 130
    finally:
        holder.kill()
        if waiting is not None:
            waiting.kill()


def test_an_unreachable_address_is_one_line_and_records_nothing(cli, write_matrix, workdir):
    write_matrix(FAULTS)
    result = cli("run", "--matrix", "m.yaml", "--executor", "ray", "--address", "127.0.0.1:1")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "ray start --head" in result.output, result.output
    assert query(workdir / "bench.db", "SELECT count(*) FROM sweeps") == [(0,)]


def test_without_the_ray_package_the_error_names_the_fix(write_matrix, workdir):
    write_matrix(FAULTS)
    # The ray package made unimportable in this interpreter, as in an install without the extra.
    code = "import sys; sys.modules['ray'] = None; from orchestrator.cli.main import main; main()"
    args = ["run", "--matrix", "m.yaml", "--executor", "ray"]
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=workdir, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: --executor ray needs the ray package: pip install 'bench[ray]' (or pip install ray)"
    ]


def test_pack_needs_the_ray_executor(cli, write_matrix, workdir):
    write_matrix(FAULTS)
    result = cli("run", "--matrix", "m.yaml", "--pack")
    assert result.exit_code == 1 and "--executor ray" in result.output


def test_a_cluster_without_bench_slots_is_refused_in_one_line(write_matrix, workdir):
    write_matrix(FAULTS)
    bare = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1})
    address = bare.address
    try:
        args = ["run", "--matrix", "m.yaml", "--executor", "ray", "--address", address]
        done = subprocess.run(bench_command(*args), cwd=workdir, capture_output=True, text=True)
    finally:
        bare.shutdown()
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: no node of the Ray cluster at {address} offers the bench_slot resource: start each "
        """node with --resources '{"bench_slot": 1}' (one run per node at a time), or pass --pack"""
    ]
    assert query(workdir / "bench.db", "SELECT count(*) FROM sweeps") == [(0,)]


def test_a_task_killed_by_rays_memory_monitor_is_ray_oom(write_matrix, workdir):
    """A node whose memory monitor acts at 2% of memory in use: Ray's own monitor, for real, kills
    the task (and the queue actor beside it) as a node short of memory would."""
    write_matrix(
        """
        name: ooms
        settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0, hold_seconds: 60}
        axes:
          framework: [fault]
          fault: [hold]
        """
    )
    monitor = {"RAY_memory_usage_threshold": "0.02", "RAY_memory_monitor_refresh_ms": "200"}
    head = {"num_cpus": 1, "resources": SLOT, "env_vars": monitor}
    tight = Cluster(initialize_head=True, connect=False, head_node_args=head)
    try:
        args = ["run", "--matrix", "m.yaml", "--executor", "ray", "--address", tight.address]
        done = subprocess.run(bench_command(*args), cwd=workdir, capture_output=True, text=True, timeout=180)
    finally:
        tight.shutdown()
    assert done.returncode == 0, done.stderr
    [(outcome, exception_type, reason)] = query(
        workdir / "bench.db", "SELECT outcome, exception_type, reason FROM runs"
    )
    assert (outcome, exception_type) == ("ray_oom", "OutOfMemoryError")
    assert (
        reason.startswith("Ray's memory monitor killed the task on node ")
        and "running low on memory" in reason
    )
    assert not running_workers(workdir)


def test_a_node_without_the_frameworks_environment_records_unavailable_with_the_node(
    cli, write_matrix, workdir, cluster
):
    write_matrix(
        """
        name: no-env
        settings: {model: small_cnn, dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0}
        axes:
          framework: [pytorch, tensorflow]
        """
    )
    empty = workdir / "no-envs"
    empty.mkdir()
    args = (
        "run",
        "--matrix",
        "m.yaml",
        "--executor",
        "ray",
        "--address",
        cluster.address,
        "--env-dir",
        str(empty),
    )
    result = cli(*args)
    assert result.exit_code == 0, result.output
    rows = query(workdir / "bench.db", "SELECT framework, outcome, node, reason FROM runs")
    assert {(r[0], r[1]) for r in rows} == {("pytorch", "unavailable"), ("tensorflow", "unavailable")}
    for _, _, node, reason in rows:
        assert reason.startswith(f"on node {node}: ") and "bench env setup" in reason, reason

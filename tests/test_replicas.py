"""Data-parallel runs (issue 26): a run of several replicas, each its own process, launched, watched
and recorded by bench. The fault worker's replicas meet on a real loopback socket and exchange a
byte a step (a collective as small as it can be), so a replica that dies or hangs does to the others
what it would in a framework; the frameworks' own machinery is tested in their files."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from orchestrator.config.matrix import load_matrix
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError
from orchestrator.launch import replicas
from workers import runner

TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two replicas need two CPUs")


def rows(db: Path, query: str) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(query)]
    finally:
        conn.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def pids_of(run_dir: Path) -> list[int]:
    found = []
    for events in sorted(run_dir.rglob("events.jsonl")):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") in ("start", "child"):
                found.append(event["pid"])
    return found


MATRIX = """
settings:
  framework: fault
  replicas: 2
  batch_size: 4
  dataset_size: 40
  warmup_steps: 2
  epochs: 2
  timeout: 60
  sample_interval: 0.05
"""


@pytest.mark.slow
@TWO_CPUS
def test_two_replicas_run_apart_and_their_run_counts_the_global_batch(write_matrix, cli, workdir):
    result = cli("run", "--matrix", str(write_matrix(MATRIX)))
    assert result.exit_code == 0, result.output
    db = workdir / "bench.db"
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["outcome"] == "ok", run["reason"]
    assert run["replicas"] == 2 and run["global_batch"] == 8 and run["batch_size"] == 4
    # 32 training samples: 4 global batches of 8 an epoch; each epoch's images are all replicas'
    assert run["steps_per_epoch"] == 4
    epochs = rows(db, "SELECT * FROM epochs ORDER BY epoch")
    assert [e["images"] for e in epochs] == [32, 32]
    assert run["images_per_second"] == pytest.approx(32 / run["median_epoch_seconds"], rel=1e-6)
    reps = rows(db, "SELECT * FROM replicas ORDER BY replica")
    assert [r["replica"] for r in reps] == [0, 1] and all(r["outcome"] == "ok" for r in reps)
    run_dir = Path(run["run_dir"])
    assert [r["run_folder"] for r in reps] == [".", "replica-1"]
    for rep in reps:
        where = run_dir / rep["run_folder"]
        spec = json.loads((where / "spec.json").read_text())
        assert spec["replica"]["rank"] == rep["replica"] and spec["replica"]["count"] == 2
        assert (where / "events.jsonl").is_file() and (where / "stderr.log").is_file()
        assert (where / "samples.jsonl").is_file()  # each replica has its own sampler
        start = json.loads((where / "events.jsonl").read_text().splitlines()[0])
        assert start["pid"] == rep["pid"]
        assert start["cpus"] == [int(rep["cpus"])]  # pinned to its own CPU
        assert rep["threads"] == 1 and rep["cpu_percent_mean"] is not None
        # its own share: half the global batch (16 of an epoch's 32) over its own epoch seconds
        own = json.loads((where / "result.json").read_text())["epochs"]
        assert [e["replica_images"] for e in own] == [16, 16]
        rates = [16 / e["seconds"] for e in own]
        assert rep["images_per_second"] == pytest.approx(sum(rates) / 2, rel=1e-9)
    assert reps[0]["cpus"] != reps[1]["cpus"]
    assert "/r2" in result.output  # the progress line names the replicas


@pytest.mark.slow
@TWO_CPUS
def test_a_replica_that_crashes_makes_the_run_a_crash_naming_it_and_ends_the_others(
    write_matrix, cli, workdir
):
    matrix = MATRIX + "  fault: segfault\n  fault_replica: 1\n  after_steps: 3\n"
    result = cli("run", "--matrix", str(write_matrix(matrix)))
    assert result.exit_code == 0, result.output
    db = workdir / "bench.db"
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["outcome"] == "crash" and run["signal_name"] == "SIGSEGV"
    assert run["reason"].startswith("replica 1 of 2: ")
    assert "Fatal Python error" in run["stderr_tail"]  # replica 1's evidence, not replica 0's
    reps = rows(db, "SELECT * FROM replicas ORDER BY replica")
    assert reps[1]["outcome"] == "crash" and reps[1]["signal_name"] == "SIGSEGV"
    # replica 0 was waiting in the collective: bench ended it, or it saw the connection close
    assert reps[0]["outcome"] in ("stopped", "error")
    assert reps[0]["outcome"] != "stopped" or reps[0]["ended_by"] == 1
    assert not [p for p in pids_of(Path(run["run_dir"])) if alive(p)]


@pytest.mark.slow
@TWO_CPUS
def test_a_replica_that_hangs_makes_the_run_a_timeout_and_nothing_is_left(write_matrix, cli, workdir):
    matrix = (
        MATRIX.replace("timeout: 60", "timeout: 6") + "  fault: hang\n  fault_replica: 1\n  after_steps: 3\n"
    )
    result = cli("run", "--matrix", str(write_matrix(matrix)))
    assert result.exit_code == 0, result.output
    db = workdir / "bench.db"
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["outcome"] == "timeout"
    # both wait: replica 1 in its hang, replica 0 in the collective replica 1 never joins
    assert "replicas 0 and 1 of 2 still running at the timeout of 6 s" in run["reason"]
    assert [r["outcome"] for r in rows(db, "SELECT outcome FROM replicas ORDER BY replica")] == [
        "timeout"
    ] * 2
    pids = pids_of(Path(run["run_dir"]))
    assert len(pids) == 3  # two replicas and the hung replica's child
    assert not [p for p in pids if alive(p)]


@pytest.mark.slow
@TWO_CPUS
def test_a_replica_killed_from_outside_is_a_crash_naming_it(write_matrix, cli, workdir):
    """A replica SIGKILLed mid-run (not by bench, no OOM): the run is a crash of replica 1, replica 0
    is ended, and no process of the run is left."""
    matrix = MATRIX + "  fault: sleep\n  fault_replica: 1\n  seconds: 60\n"
    path = write_matrix(matrix)
    killed = []

    def kill_replica_1() -> None:
        deadline = time.time() + 30
        while time.time() < deadline:
            for events in workdir.glob("bench-runs/*/*/replica-1/events.jsonl"):
                lines = events.read_text().splitlines()
                if lines:
                    pid = json.loads(lines[0])["pid"]
                    time.sleep(0.5)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_replica_1)
    killer.start()
    result = cli("run", "--matrix", str(path))
    killer.join()
    assert result.exit_code == 0, result.output
    assert killed
    db = workdir / "bench.db"
    (run,) = rows(db, "SELECT * FROM runs")
    assert run["outcome"] == "crash" and run["signal_name"] == "SIGKILL"
    assert run["reason"].startswith("replica 1 of 2: ")
    assert "bench then ended replica 0" in run["reason"]
    reps = rows(db, "SELECT * FROM replicas ORDER BY replica")
    assert (reps[0]["outcome"], reps[0]["ended_by"]) == ("stopped", 1)
    assert reps[1]["pid"] == killed[0]
    assert not [p for p in pids_of(Path(run["run_dir"])) if alive(p)]
    shown = cli("inspect", str(run["id"])).output
    assert "replicas (2; batch_size is per replica" in shown
    assert "  replica 0: stopped, CPUs " in shown and "ended by bench: replica 1 failed" in shown
    assert "  replica 1: crash, CPUs " in shown and f"pid {killed[0]}," in shown
    assert "its folder: replica-1/" in shown


@pytest.mark.slow
@TWO_CPUS
def test_more_replicas_than_cpus_is_skipped_with_the_reason(write_matrix, cli, workdir):
    matrix = MATRIX + '  cpus: "0"\n'
    result = cli("run", "--matrix", str(write_matrix(matrix)))
    assert result.exit_code == 0, result.output
    (run,) = rows(workdir / "bench.db", "SELECT * FROM runs")
    assert run["outcome"] == "skipped"
    assert run["reason"].startswith("replicas 2 need a CPU each, and cpus 0 offers 1 (0)")
    assert not rows(workdir / "bench.db", "SELECT * FROM replicas")
    assert not list(Path(run["run_dir"]).glob("replica-*"))  # nothing was started


def test_replicas_times_threads_beyond_the_cpus_is_skipped():
    config = RunConfig(framework="fault", replicas=2, threads=2)
    plan, problem = replicas.plan(config, {0, 1})
    assert plan is None
    assert problem is not None and problem.startswith(
        "replicas 2 of threads 2 need 4 CPUs, and this machine offers 2"
    )
    plan, problem = replicas.plan(RunConfig(framework="fault", replicas=2, cpus="0-3"), {0, 1, 2, 3})
    assert problem is None and plan is not None
    assert plan.cpus == (frozenset({0, 1}), frozenset({2, 3})) and plan.threads == 2


@pytest.mark.slow
@TWO_CPUS
def test_a_rendezvous_port_taken_is_tried_again_on_another(write_matrix, cli, workdir, monkeypatch):
    """The port bench chose is taken before replica 0 binds it: the run starts again on another
    port, and what the first attempt left is gone."""
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.bind((replicas.HOST, 0))  # bound, not listening: connecting to it is refused
    taken = squatter.getsockname()[1]
    real = replicas.free_ports
    calls: list[list[int]] = []

    def ports(count: int) -> list[int]:
        got = real(count)
        if not calls:
            got[0] = taken  # the first attempt's rendezvous: replica 0 cannot bind it
        calls.append(got)
        return got

    monkeypatch.setattr(replicas, "free_ports", ports)
    try:
        result = cli("run", "--matrix", str(write_matrix(MATRIX)))
    finally:
        squatter.close()
    assert result.exit_code == 0, result.output
    (run,) = rows(workdir / "bench.db", "SELECT * FROM runs")
    assert run["outcome"] == "ok", run["reason"]
    spec = json.loads((Path(run["run_dir"]) / "spec.json").read_text())
    assert spec["replica"]["address"] != f"{replicas.HOST}:{taken}"
    assert "Address already in use" not in (Path(run["run_dir"]) / "stderr.log").read_text()
    assert len(calls) == 2  # the second attempt ran


@pytest.mark.parametrize(
    "text, message",
    [
        ("replicas: 0", r"m.yaml:4: replicas: expected a positive integer, got 0"),
        ("replicas: 2000", r"m.yaml:4: replicas: expected at most 1024, got 2000"),
        (
            "replicas: 2\n  fault_replica: 2",
            r"m.yaml:5: fault_replica: replica 2 does not exist: the run has 2",
        ),
        ("replicas: 2\n  task: inference", r"m.yaml:4: replicas: data-parallel replicas apply to training"),
    ],
)
def test_bad_replica_settings_name_file_line_and_key(tmp_path, text, message):
    path = tmp_path / "m.yaml"
    path.write_text(f"settings:\n  framework: fault\n  fault: ok\n  {text}\n")
    with pytest.raises(ConfigError, match=message):
        load_matrix(path)


def test_a_global_batch_beyond_the_training_split_is_a_matrix_error(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("settings:\n  framework: pytorch\n  dataset_size: 40\n  batch_size: 16\n  replicas: 3\n")
    with pytest.raises(
        ConfigError,
        match=r"m.yaml:4: batch_size: batch_size 16 on each of 3 replicas is a global batch of 48",
    ):
        load_matrix(path)


def test_one_replica_keeps_the_configuration_hash(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("settings:\n  framework: pytorch\naxes:\n  replicas: [1, 2]\n")
    one, two = load_matrix(path).configs
    assert one == RunConfig() and one.config_hash == RunConfig().config_hash
    assert two.replicas == 2 and two.label().endswith("/r2") and two.global_batch == 64


def test_each_replica_trains_its_slice_of_every_global_batch():
    order = list(range(20))
    parts = [runner.shard(order, 3, rank, 2) for rank in range(2)]
    assert parts == [[0, 1, 2, 6, 7, 8, 12, 13, 14], [3, 4, 5, 9, 10, 11, 15, 16, 17]]
    assert runner.shard(order, 3, 0, 1) == order  # one replica: the order itself


@pytest.mark.slow
@TWO_CPUS
def test_the_replica_command_is_shown_for_each_replica(write_matrix, cli, workdir):
    result = cli("run", "--matrix", str(write_matrix(MATRIX)))
    assert result.exit_code == 0
    (run,) = rows(workdir / "bench.db", "SELECT worker_command FROM runs")
    assert run["worker_command"].count("-m workers --spec spec.json") == 2
    assert "replica-1" in run["worker_command"]


@pytest.mark.slow
@TWO_CPUS
def test_the_scaling_table_sets_each_replica_count_beside_one_replica(write_matrix, cli, workdir):
    """Replicas 1 and 2 of the same configuration, traced: the one-replica row is the baseline,
    the two-replica row's efficiency is its images/s over twice the baseline's, and its
    communication share is what its trace classed as the gradient exchange (the fault worker's
    tracer gives the exchange a tenth of the time)."""
    matrix = MATRIX.replace("  replicas: 2\n", "  trace: kernels\n") + "axes:\n  replicas: [1, 2]\n"
    result = cli("run", "--matrix", str(write_matrix(matrix)))
    assert result.exit_code == 0, result.output
    table = cli("report", "--table", "scaling")
    assert table.exit_code == 0, table.output
    assert "data-parallel scaling: batch_size is per replica" in table.output
    records = json.loads(cli("report", "--table", "scaling", "--format", "json").output)
    rows = {r["replica_count"]: r for r in records["rows"]}
    one, two = rows[1], rows[2]
    assert (one["global_batch"], two["global_batch"]) == (4, 8)
    assert one["scaling_efficiency"] == pytest.approx(1.0)
    expected = two["images_per_second_median"] / (2 * one["images_per_second_median"])
    assert two["scaling_efficiency"] == pytest.approx(expected)
    assert two["baseline_config_hash"] == one["config_hash"]
    assert two["communication_share"] == pytest.approx(0.1, rel=1e-6)
    assert one["communication_share"] == 0.0
    assert "10.0%" in table.output and "baseline" in table.output
    html = cli("report", "--html", str(workdir / "page"))
    assert html.exit_code == 0, html.output
    page = (workdir / "page" / "index.html").read_text()
    assert "Data-parallel scaling" in page
    pictures = list((workdir / "page" / "plots").glob("scaling-*.png"))
    assert len(pictures) == 1 and pictures[0].read_bytes().startswith(b"\x89PNG")


def test_a_version_8_database_gains_the_replica_columns_and_table_and_keeps_its_rows(tmp_path):
    """Schema 9 adds runs.replicas, fault_replica and global_batch, and the replicas table; a
    version 8 file (tests/data/schema_v8.sql) is brought up and its rows read back unchanged."""
    from orchestrator.storage.db import Database, schema_version

    old = tmp_path / "bench.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v8.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    config = RunConfig(framework="pytorch")
    conn.execute(
        "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, "
        "momentum, epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, "
        "val_fraction, threads, seed, config_json, outcome, started_at, ended_at, wall_seconds, "
        "run_dir, worker_command, reproduce, images_per_second) VALUES (1, ?, 'pytorch', 'small_cnn', 'cpu', "
        "32, 'sgd', 0.01, 0.9, 1, 2, 1, 300, 'synthetic', 256, 64, 10, 0.2, 0, 0, ?, 'ok', 't', 't', 1, 'd', "
        "'w', 'r', 12.5)",
        (config.config_hash, json.dumps(config.to_dict())),
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 9
    row = conn.execute("SELECT model, images_per_second, replicas, global_batch FROM runs").fetchone()
    assert row == ("small_cnn", 12.5, None, None)  # nothing recorded is changed or made up
    assert conn.execute("SELECT count(*) FROM replicas").fetchone()[0] == 0
    conn.close()


def _failed(code: int, wall: float, exited_at: float | None) -> replicas.Finished:
    return replicas.Finished(returncode=code, wall_seconds=wall, exited_at=exited_at)


def test_the_first_failure_is_ordered_by_when_it_exited_not_by_its_own_wall_time():
    # Replica 0 started 3 s after replica 1 on another node: its own wall time is shorter, yet it
    # exited 2 s later; the one that exited first failed first.
    first = replicas.first_failure([_failed(1, 5.0, 1002.0), _failed(1, 7.0, 1000.0)])
    assert first == 1


def test_failures_that_ended_together_are_led_by_the_death_by_signal():
    # The peer saw the collective close a few hundredths of a second before bench saw the
    # segfaulted replica's exit on its own node: the signal is the cause, the error its echo.
    together = [_failed(1, 4.0, 1000.00), _failed(-signal.SIGSEGV, 6.0, 1000.04)]
    assert replicas.first_failure(together) == 1
    # Seconds apart, the earlier error stands on its own.
    apart = [_failed(1, 4.0, 1000.0), _failed(-signal.SIGSEGV, 6.0, 1000.0 + 2 * replicas.TOGETHER_SECONDS)]
    assert replicas.first_failure(apart) == 0
    # No exit times (an older record): their wall times order them.
    assert replicas.first_failure([_failed(1, 4.0, None), _failed(1, 3.0, 1000.0)]) == 1

"""The executor interface's fast parts: what a run asks of a Ray node, progress over several nodes,
and the schema 5 upgrade that lets an older database hold the cluster outcomes."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.executors.ray_cluster import demand, fits, task_options
from orchestrator.launch.outcomes import CLUSTER_OUTCOMES, OUTCOMES
from orchestrator.storage.db import Database, schema_version
from orchestrator.sweep.progress import Progress

DATA = Path(__file__).parent / "data"


def test_by_default_a_run_takes_its_nodes_slot_and_a_cuda_run_one_gpu_too():
    assert demand(RunConfig(framework="fault", threads=4), pack=False) == {"bench_slot": 1.0}
    cuda = demand(RunConfig(framework="fault", device="cuda"), pack=False)
    assert cuda == {"bench_slot": 1.0, "GPU": 1.0}
    assert task_options(cuda) == {"num_cpus": 0, "num_gpus": 1.0, "resources": {"bench_slot": 1.0}}


def test_packed_a_run_takes_its_threads_or_cpus_and_its_memory_budget():
    assert demand(RunConfig(framework="fault"), pack=True) == {"CPU": 1.0}
    assert demand(RunConfig(framework="fault", threads=4, memory_budget=2**30), pack=True) == {
        "CPU": 4.0,
        "memory": float(2**30),
    }
    assert demand(RunConfig(framework="fault", cpus="0-2"), pack=True) == {"CPU": 3.0}


def test_a_demand_fits_a_node_that_has_every_resource_it_names():
    node = {"Resources": {"CPU": 2.0, "bench_slot": 1.0, "memory": 1e9}}
    assert fits({"bench_slot": 1.0}, node)
    assert not fits({"bench_slot": 1.0, "GPU": 1.0}, node)
    assert not fits({"CPU": 4.0}, node)


def test_progress_names_the_node_and_estimates_from_the_sweeps_throughput():
    out = io.StringIO()
    progress = Progress(4, stream=out, live=False)
    a, b = RunConfig(framework="fault", seed=1), RunConfig(framework="fault", seed=2)
    progress.begin(a, Path("a"), "node-1")
    progress.begin(b, Path("b"), "node-2")
    progress.end("ok", 7, "", Path("b"))
    progress.end("crash", 8, ": killed by SIGSEGV", Path("a"))
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/4] fault/ok: running on node-1"
    assert lines[1] == "[2/4] fault/ok: running on node-2"
    assert lines[2].startswith("[1/4] fault/ok: ok in ") and lines[2].endswith("(run 7) on node-2")
    assert lines[3].endswith("(run 8) on node-1: killed by SIGSEGV")
    assert progress.most_at_once == 2 and progress._eta() != "?"


def test_local_progress_lines_are_unchanged():
    out = io.StringIO()
    progress = Progress(1, stream=out, live=False)
    progress.begin(RunConfig(framework="fault"), Path("a"))
    progress.end("ok", 1)
    first, second = out.getvalue().splitlines()
    assert first == "[1/1] fault/ok: running"
    assert second.startswith("[1/1] fault/ok: ok in ") and second.endswith(" s (run 1)")


def test_a_version_4_database_is_upgraded_to_hold_the_cluster_outcomes(tmp_path):
    old = tmp_path / "v4.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v4.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert {"executor", "node", "machine", "packed"} <= {
        r[1] for r in conn.execute("PRAGMA table_info(runs)")
    }
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    columns = (
        "sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, momentum, epochs, "
        "warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, val_fraction, threads, "
        "seed, config_json, outcome, started_at, ended_at, wall_seconds, run_dir, worker_command, reproduce"
    )
    values = "1, 'h', 'fault', 'm', 'cpu', 1, 'sgd', 0.1, 0, 1, 0, 1, 1, 'synthetic', 1, 1, 1, 0, 0, 0, '{}'"
    for outcome in CLUSTER_OUTCOMES:
        conn.execute(
            f"INSERT INTO runs ({columns}) VALUES ({values}, ?, 't', 't', 0, 'd', 'w', 'r')", (outcome,)
        )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(f"INSERT INTO runs ({columns}) VALUES ({values}, 'bogus', 't', 't', 0, 'd', 'w', 'r')")
    conn.close()


def test_the_schema_allows_exactly_the_known_outcomes():
    text = (Path(__file__).parent.parent / "schema.sql").read_text()
    check = text[text.index("CHECK (outcome IN") :].split(")", 1)[0]
    assert sorted(w.strip(" '\n(") for w in check.split("IN", 1)[1].split(",")) == sorted(OUTCOMES)

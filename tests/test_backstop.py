"""Batch sweeps stop at the wall: after an `oom` at batch b, the same configuration at larger
batches is recorded `skipped` ("oom at batch b"), not run; --no-backstop and --resume."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.storage.db import Database, schema_version

DATA = Path(__file__).parent / "data"

# The fault worker's oom is real (it caps its address space and allocates until that fails);
# every batch size of fault/oom ends oom when it runs. fault/ok is another configuration.
FAULTS = """
name: wall
settings: {framework: fault, dataset_size: 256, epochs: 1, warmup_steps: 0, sample_interval: 0}
include:
  - {fault: oom, batch_size: 16}
  - {fault: oom, batch_size: 8}
  - {fault: oom, batch_size: 32}
  - {fault: ok, batch_size: 64}
  - {fault: oom, batch_size: 64}
"""


def outcomes(db: Path, sweep: int | None = None) -> list[tuple]:
    conn = sqlite3.connect(db)
    where = f"WHERE sweep_id = {sweep}" if sweep else ""
    rows = conn.execute(f"SELECT fault, batch_size, outcome, reason FROM runs {where} ORDER BY id").fetchall()
    conn.close()
    # runs.fault: one JSON value; NULL for a real framework's run
    return [(json.loads(fault)["kind"] if fault else None, *rest) for fault, *rest in rows]


def test_larger_batches_after_an_oom_are_skipped_with_the_batch(write_matrix, cli, workdir):
    write_matrix(FAULTS)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    rows = outcomes(workdir / "bench.db")
    assert [r[:3] for r in rows] == [
        ("oom", 16, "oom"),
        ("oom", 8, "oom"),  # smaller than the wall: runs
        ("oom", 32, "skipped"),
        ("ok", 64, "ok"),  # another configuration: its own wall
        ("oom", 64, "skipped"),
    ]
    assert rows[2][3] == "oom at batch 8" and rows[4][3] == "oom at batch 8"
    assert "2 skipped" in result.output
    # Nothing ran for a skipped configuration: its folder has no events.
    skipped = sorted((workdir / "bench-runs").glob("sweep-1/0003-*"))
    assert len(skipped) == 1 and not (skipped[0] / "events.jsonl").exists()


def test_no_backstop_runs_every_batch(write_matrix, cli, workdir):
    write_matrix(FAULTS)
    result = cli("run", "--matrix", "m.yaml", "--no-backstop")
    assert result.exit_code == 0, result.output
    assert [r[2] for r in outcomes(workdir / "bench.db")] == ["oom", "oom", "oom", "ok", "oom"]


def test_resume_respects_the_wall_and_no_backstop_runs_what_it_skipped(write_matrix, cli, workdir):
    write_matrix(FAULTS)
    db = workdir / "bench.db"
    assert cli("run", "--matrix", "m.yaml", "--only", "batch_size=8").exit_code == 0
    # The oom at 8 was recorded in the first part of the sweep; the resumed part knows it from the
    # database, so even batch 16 (listed before 8) is skipped now.
    result = cli("run", "--matrix", "m.yaml", "--resume")
    assert result.exit_code == 0, result.output
    assert [r[1:3] for r in outcomes(db, 1)] == [
        (8, "oom"),
        (16, "skipped"),
        (32, "skipped"),
        (64, "ok"),
        (64, "skipped"),
    ]
    assert {r[3] for r in outcomes(db, 1) if r[2] == "skipped"} == {"oom at batch 8"}
    assert "nothing run" in cli("run", "--matrix", "m.yaml", "--resume").output
    result = cli("run", "--matrix", "m.yaml", "--resume", "--no-backstop")
    assert result.exit_code == 0, result.output
    assert [r[1:3] for r in outcomes(db, 1)][5:] == [(16, "oom"), (32, "oom"), (64, "oom")]


@pytest.mark.slow
@pytest.mark.framework
def test_a_real_pytorch_sweep_stops_at_its_memory_budget(write_matrix, cli, workdir, pytorch_python):
    """small_cnn at 32 px on one thread peaked at 399 MiB RSS at batch 4, 830 MiB at 256 and
    1045 MiB at 512 (measured on the 2-core development machine): a 600 MiB budget is the wall."""
    write_matrix("""
        name: wall
        settings: {min_time: 0, min_steps: 1,
                   framework: pytorch, model: small_cnn, image_size: 32, dataset_size: 600,
                   val_fraction: 0.1, epochs: 1, warmup_steps: 1, threads: 1, memory_budget: 600MiB}
        axes:
          batch_size: [4, 256, 512]
    """)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    rows = outcomes(workdir / "bench.db")
    assert [r[1:3] for r in rows] == [(4, "ok"), (256, "oom"), (512, "skipped")], rows
    assert rows[2][3] == "oom at batch 256"
    table = cli("report", "--table", "batch").output
    assert "skipped" in table and "oom" in table, table


def test_a_version_4_database_learns_the_skipped_outcome(tmp_path):
    old = tmp_path / "v4.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v4.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(RUN.format(outcome="skipped"))
    conn.execute(RUN.format(outcome="ok"))
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    conn.execute(RUN.format(outcome="skipped"))
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(RUN.format(outcome="no such outcome"))
    assert [r[0] for r in conn.execute("SELECT outcome FROM runs ORDER BY id")] == ["ok", "skipped"]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


RUN = (
    "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, momentum, "
    "epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, val_fraction, "
    "threads, "
    "seed, config_json, outcome, started_at, ended_at, wall_seconds, run_dir, worker_command, reproduce) "
    "VALUES (1, 'h', 'fault', 'm', 'cpu', 8, 'sgd', 0.1, 0.9, 1, 0, 1, 1, 'synthetic', 8, 8, 2, 0.2, 0, 0, "
    "'{{}}', '{outcome}', 't', 't', 0, 'd', 'c', 'r')"
)

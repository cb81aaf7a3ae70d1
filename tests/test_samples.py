"""Enough samples and one source for derived figures (issue 22): min_time/min_steps add extra timed
epochs in the worker, a run short of them says so, every unit of a row derives from one aggregate,
reports show the samples and their spread, and --compare says what to change. Real subprocesses
(the fault worker, PyTorch and TensorFlow) and real SQLite files; the extra-epoch loop's bounds are
also checked on their own, where reaching them for real would take minutes."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.config.samples import advice
from orchestrator.storage.db import Database, schema_version
from workers import runner

DATA = Path(__file__).parent / "data"


def rows_of(cli, *args: str) -> list[dict]:
    result = cli("report", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    return document["rows"] if "rows" in document else document["runs"]


# --- one source: images/s × ms/image = 1000 on every row of a real sweep ----------------------

# Two frameworks, two batch sizes; 2 steps an epoch at batch 16 and 9 at batch 4, so min_steps 16
# makes 8 and 2 timed epochs: even counts, where a median of images/s and one of ms/image (the old
# way) are not each other's inverse.
REAL = """
name: one-source
settings: {model: small_cnn, image_size: 32, dataset_size: 48, classes: 3, epochs: 1, warmup_steps: 1,
           threads: 1, min_time: 0, min_steps: 16, timeout: 300}
axes:
  framework: [pytorch]
  batch_size: [4, 16]
include:
  - {framework: tensorflow, batch_size: 16}
"""


def agree(ips: float, spi: float) -> None:
    assert ips * spi * 1000 == pytest.approx(1000, rel=1e-9)


@pytest.mark.slow
@pytest.mark.framework
def test_every_row_of_a_real_sweep_has_images_per_second_times_ms_per_image_1000(
    write_matrix, cli, workdir, pytorch_python
):
    write_matrix(REAL)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    runs = rows_of(cli)
    assert {r["outcome"] for r in runs} == {"ok"} and len(runs) == 3
    for r in runs:  # the results table: one row per run
        agree(r["images_per_second"], r["seconds_per_image"])
        assert r["timed_steps"] >= 16 and r["timed_epochs"] in (2, 8) and r["samples_note"] is None
    for table in ("batch", "comparison"):
        for r in rows_of(cli, "--table", table):
            agree(r["images_per_second_median"], r["seconds_per_image_median"])
            agree(r["images_per_second_min"], r["seconds_per_image_max"])  # the range ends too
            agree(r["images_per_second_max"], r["seconds_per_image_min"])
            assert r["seconds_per_image_min"] <= r["seconds_per_image_median"] <= r["seconds_per_image_max"]
            if table == "comparison":  # s/epoch from the same aggregate: × the images of an epoch
                images = r["epoch_seconds_median"] / r["seconds_per_image_median"]
                assert images == pytest.approx(r["batch_size"] * (2 if r["batch_size"] == 16 else 9))
    text = cli("report", "--table", "batch", "--format", "csv").output
    for r in csv.DictReader(io.StringIO(text)):
        agree(float(r["images_per_second_median"]), float(r["seconds_per_image_median"]))
    conn = sqlite3.connect(workdir / "bench.db")
    extra = conn.execute("SELECT extra, count(*), count(val_accuracy) FROM epochs GROUP BY extra").fetchall()
    conn.close()
    # 3 configured epochs evaluated; 1 + 7 + 7 extra ones timed, never evaluated
    assert sorted(extra) == [(0, 3, 3), (1, 15, 0)]
    assert [r["epoch"] for r in rows_of(cli, "--table", "accuracy")] == [1, 1, 1]


# --- the worker adds epochs, up to its bounds, and says when it had fewer -----------------------

FAULT = """
name: extra
settings: {framework: fault, dataset_size: 40, batch_size: 16, epochs: 1, warmup_steps: 0,
           sample_interval: 0}
include:
  - {min_steps: 10}
  - {min_time: 1000, timeout: 8, dataset_size: 2000, batch_size: 2}  # about 0.4 s an epoch, unloaded
"""


@pytest.mark.slow
def test_extra_epochs_reach_min_steps_and_a_run_stopped_by_its_timeout_says_so(write_matrix, cli, workdir):
    write_matrix(FAULT)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0
    # the progress line of the short run says so
    assert "ok in" in result.output and ": fewer samples: " in result.output.splitlines()[-2]
    conn = sqlite3.connect(workdir / "bench.db")
    conn.row_factory = sqlite3.Row
    enough, short = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
    epochs = conn.execute("SELECT epoch, extra FROM epochs WHERE run_id = ? ORDER BY epoch", (enough["id"],))
    assert [tuple(e) for e in epochs] == [(1, 0), (2, 1), (3, 1), (4, 1), (5, 1)]  # 2 steps an epoch
    assert (enough["timed_epochs"], enough["timed_steps"], enough["min_steps"]) == (5, 10, 10)
    assert enough["samples_note"] is None and enough["outcome"] == "ok"
    # min_time 1000 s cannot be reached in an 8 s run: the worker stops with margin, ok, and says why
    # (how many extra epochs fit depends on the machine's load).
    assert short["outcome"] == "ok" and short["timed_epochs"] >= 1 and short["wall_seconds"] < 8
    assert short["samples_note"].endswith("less than min_time 1000 s, stopped by the run's timeout (8 s)")
    conn.close()
    text = cli("report").output
    assert "? few samples" in text and "5 epochs, 10 steps" in text
    assert "fewer samples: " in cli("inspect", str(short["id"])).output


def test_the_extra_epoch_loop_stops_at_its_bound_and_before_the_timeout():
    config = {"epochs": 1, "min_time": 0, "min_steps": 10**9, "timeout": 10**6}
    records = [{"seconds": 0.0, "steps": 1}]
    added = []

    def more(epoch):
        added.append(epoch)
        return {"seconds": 0.0, "steps": 1}

    stopped = runner.extra_epochs(config, records, more, 0.0, runner.time.perf_counter())
    assert stopped == f"the bound of {runner.MAX_EXTRA_EPOCHS} extra epochs"
    assert added == list(range(2, runner.MAX_EXTRA_EPOCHS + 2))
    config.update(timeout=10.0)
    records, added[:] = [{"seconds": 1.0, "steps": 1}], []
    # 3 s an epoch and 1 s gone: two more epochs would pass 70% of 10 s, so none is added
    started = runner.time.perf_counter() - 1.0
    assert runner.extra_epochs(config, records, more, 3.0, started) == "the run's timeout (10 s)"
    assert added == []
    config.update(min_steps=1)
    assert runner.extra_epochs(config, records, more, 3.0, started) is None


def test_min_time_and_min_steps_keep_earlier_configurations_identity():
    assert RunConfig(min_time=None, min_steps=None).config_hash == RunConfig().config_hash
    assert RunConfig(min_time=0.0).config_hash != RunConfig().config_hash


# --- --compare says what to change --------------------------------------------------------------


@pytest.mark.slow
def test_compare_says_what_to_change_when_it_cannot_decide(write_matrix, cli):
    write_matrix("settings: {framework: fault, dataset_size: 40, batch_size: 16, sample_interval: 0}\n")
    for _ in range(2):
        assert cli("run", "--matrix", "m.yaml").exit_code == 0
    out = cli("report", "--compare", "1", "2").output
    assert "too few epochs" in out
    line = next(line for line in out.splitlines() if line.startswith("too few epochs ("))
    assert ": run with epochs: 3 or min_time: " in line and "(now A: 1 timed epoch of 2 steps, " in line
    [row] = rows_of(cli, "--compare", "1", "2")
    assert row["verdict"] == "too few epochs" and row["advice"].startswith("run with epochs: 3 or min_time: ")


def test_advice_asks_for_enough_epochs_and_the_time_they_take():
    assert (
        advice(1, 1, 2, 0.4, 3) == "run with epochs: 3 or min_time: 1.4 (now 1 timed epoch of 2 steps, 0.4 s)"
    )
    assert advice(2, 2, 40, 2.0, 3).startswith("run with epochs: 3 or min_time: 3.6 (now 2 timed epochs, 40")


# --- the schema: a version-5 database is upgraded ----------------------------------------------


def test_a_version_5_database_gains_the_sample_columns_and_keeps_its_rows(tmp_path, cli, workdir):
    old = workdir / "bench.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v5.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    config = RunConfig(framework="fault", fault="ok")
    conn.execute(
        "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, "
        "momentum, epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, "
        "val_fraction, threads, seed, fault, config_json, outcome, started_at, ended_at, wall_seconds, "
        "run_dir, worker_command, reproduce, steps_per_epoch, median_epoch_seconds, min_epoch_seconds, "
        "max_epoch_seconds, images_per_second, seconds_per_image) VALUES (1, ?, 'fault', 'small_cnn', "
        "'cpu', 32, 'sgd', 0.01, 0.9, 1, 2, 1, 300, 'synthetic', 256, 64, 10, 0.2, 0, 0, 'ok', ?, 'ok', "
        "'t', 't', 1, 'd', 'w', 'r', 6, 0.192, 0.192, 0.192, 1000, 0.001)",
        (config.config_hash, json.dumps(config.to_dict())),
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    runs = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"min_time", "min_steps", "timed_epochs", "timed_steps", "timed_seconds", "samples_note"} <= runs
    assert "extra" in {r[1] for r in conn.execute("PRAGMA table_info(epochs)")}
    assert conn.execute("SELECT timed_epochs, seconds_per_image FROM runs").fetchall() == [(None, 0.001)]
    conn.close()
    # A row recorded before schema 6 counts its configured epochs, and is marked as having few.
    [row] = rows_of(cli, "--table", "batch")
    assert (row["timed_epochs"], row["timed_steps"], row["samples_mark"]) == (1, 6, "?")
    agree(row["images_per_second_median"], row["seconds_per_image_median"])

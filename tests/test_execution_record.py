"""A run's execution mode and precision, warm-up, first step's loss and time to target reach the
database and `bench inspect` (issue 24): real fault-worker runs through bench and the shared runner,
a worker that writes garbage into every one of these fields, a version-6 database upgraded, and the
settings' rules at the command line. The runner's own rules are in tests/test_steady.py; a real
framework's run in tests/test_time_to_accuracy.py."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.storage.db import Database, schema_version
from orchestrator.sweep import result_fields

DATA = Path(__file__).parent / "data"

# `learn` reaches accuracy 0.55, 0.775, 0.8875, 0.94375, ... after epochs 1, 2, 3, 4 since reset.
SWEEP = """
name: execution
settings: {framework: fault, dataset_size: 64, batch_size: 8, epochs: 5, repeats: 2, sample_interval: 0}
include:
  - {fault: learn, target_accuracy: 0.8, stop_at_target: true, mode: compiled, precision: bf16}
  - {fault: learn, target_accuracy: 0.99}
  - {fault: learn, warmup_steps: 0}
  - {fault: hostile_result}
  - {fault: raise, after_steps: 3, mode: graph, precision: fp16}
  - {fault: ok, precision: tf32}
"""


def rows(db: Path, query: str, *args) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    found = [dict(r) for r in conn.execute(query, args)]
    conn.close()
    return found


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    path = tmp_path_factory.mktemp("execution")
    (path / "m.yaml").write_text(SWEEP)
    cwd = os.getcwd()
    os.chdir(path)
    try:
        result = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return path / "bench.db"


def inspect(db: Path, run_id: int) -> str:
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    result = CliRunner().invoke(cli, ["inspect", str(run_id), "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_a_target_reached_stops_each_repeat_and_is_stored(sweep):
    [run] = rows(sweep, "SELECT * FROM runs WHERE id = 1")
    assert (run["outcome"], run["target_reached"], run["target_epoch"]) == ("ok", 1, 3)
    epochs = rows(sweep, "SELECT repeat, epoch, val_accuracy, wall_seconds FROM epochs WHERE run_id = 1")
    # Each repeat stopped at epoch 3, the first at 0.8 or above; no extra epoch after a stop.
    assert [(e["repeat"], e["epoch"]) for e in epochs] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
    at_target = sorted(e["wall_seconds"] for e in epochs if e["epoch"] == 3)
    assert run["target_seconds"] == pytest.approx(sum(at_target) / 2)  # the median of two repeats
    for repeat in (0, 1):
        walls = [e["wall_seconds"] for e in epochs if e["repeat"] == repeat]
        assert walls == sorted(walls) and walls[0] > 0
    assert (run["mode"], run["precision"], run["resolved_mode"], run["resolved_precision"]) == (
        "compiled",
        "bf16",
        "compiled",
        "bf16",
    )
    execution = json.loads(run["execution"])
    assert execution["mode"] == "compiled" and execution["mode_default"] is False
    assert "fault worker" in execution["how"]
    # The fault worker's warm-up is exactly warmup_steps (2), and its first step's loss is its curve's.
    assert (run["warmup_steps_run"], run["first_step_loss"]) == (2, 2.3)
    assert run["compile_seconds"] >= 0 and run["first_step_seconds"] > 0
    assert run["steady_by"].startswith("a fixed warm-up of 2 steps")
    text = inspect(sweep, 1)
    assert "mode: compiled\n" in text and "precision: bf16\n" in text
    assert "time to target: reached at epoch 3 after " in text and "(target 0.8, median of 2 repeats)" in text
    assert "first step loss: 2.3" in text and "compile seconds: " in text


@pytest.mark.slow
def test_a_target_not_reached_runs_every_epoch(sweep):
    [run] = rows(sweep, "SELECT * FROM runs WHERE id = 2")
    assert (run["target_reached"], run["target_seconds"], run["target_epoch"]) == (0, None, None)
    assert rows(sweep, "SELECT count(*) AS n FROM epochs WHERE run_id = 2")[0]["n"] == 10
    assert (run["resolved_mode"], run["resolved_precision"], run["mode"]) == ("eager", "fp32", None)
    text = inspect(sweep, 2)
    assert "mode: eager (the framework's default)" in text
    assert "time to target: not reached in every repeat (target 0.99)" in text


@pytest.mark.slow
def test_no_target_and_no_warmup(sweep):
    [run] = rows(sweep, "SELECT * FROM runs WHERE id = 3")
    assert run["target_reached"] is None and run["target_accuracy"] is None
    assert (run["warmup_steps_run"], run["compile_seconds"], run["first_step_loss"]) == (0, None, None)
    assert run["steady_by"].startswith("no warm-up (warmup_steps: 0)")
    assert "time to target" not in inspect(sweep, 3)


@pytest.mark.slow
def test_garbage_in_every_new_field_is_stored_as_null_or_bounded_json(sweep):
    [run] = rows(sweep, "SELECT * FROM runs WHERE id = 4")
    assert run["outcome"] == "ok"  # its one epoch is sound: the timings stand
    # A mode that is not a mode, a precision that is a number: the configuration's are stored.
    assert (run["resolved_mode"], run["resolved_precision"]) == ("eager", "fp32")
    for key in ("compile_seconds", "first_step_seconds", "warmup_steps_run", "first_step_loss"):
        assert run[key] is None, key
    assert run["target_reached"] is None  # no target configured: the worker's "target" is ignored
    assert len(run["steady_by"]) == result_fields.TEXT_LIMIT
    execution = json.loads(run["execution"])  # re-encoded: JSON, and bounded
    assert len(run["execution"]) <= result_fields.EXECUTION_CHARS
    assert len(execution["how"]) == result_fields.EXECUTION_STRING
    assert "nested deeper" in run["execution"]
    text = inspect(sweep, 4)
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert "steady: \\x1b]0;pwned" in text


@pytest.mark.slow
def test_a_failed_run_has_the_mode_and_precision_its_configuration_resolves_to(sweep):
    [failed, refused] = rows(sweep, "SELECT * FROM runs WHERE id IN (5, 6) ORDER BY id")
    assert failed["outcome"] == "error"
    # It failed in its first epoch, after warm-up: the warm-up's figures come from its event.
    assert (failed["warmup_steps_run"], failed["last_phase"]) == (2, "epoch")
    assert failed["steady_by"].startswith("a fixed warm-up") and failed["compile_seconds"] >= 0
    assert (failed["resolved_mode"], failed["resolved_precision"], failed["execution"]) == (
        "graph",
        "fp16",
        None,
    )
    assert refused["outcome"] == "unsupported" and "'tf32'" in refused["reason"]
    assert (refused["resolved_mode"], refused["resolved_precision"]) == ("eager", "tf32")
    assert "precision: tf32\n" in inspect(sweep, 6)


def test_result_fields_take_only_what_each_column_means():
    config = RunConfig(framework="fault", fault="ok", target_accuracy=0.5)
    row = result_fields.columns(
        config,
        {
            "execution": ["not", "an", "object"],
            "warmup": {"steps": True, "compile_seconds": float("nan"), "first_step_seconds": 1e400},
            "first_step_loss": float("inf"),
            "target": {"reached": 1, "seconds": 3, "epoch": 2},
        },
    )
    assert row["execution"] is None and row["resolved_mode"] == "eager"
    assert (row["warmup_steps_run"], row["compile_seconds"], row["first_step_seconds"]) == (None, None, None)
    assert row["first_step_loss"] is None
    assert row["target_reached"] is None  # 1 is not a flag the runner writes
    good = result_fields.columns(config, {"target": {"reached": True, "seconds": 3, "epoch": 2}})
    assert (good["target_reached"], good["target_seconds"], good["target_epoch"]) == (1, 3.0, 2)
    assert result_fields.columns(config, None)["resolved_precision"] == "fp32"


# --- a version-6 database is upgraded ----------------------------------------------------------


def test_a_version_6_database_gains_the_execution_columns_and_keeps_its_rows(workdir, cli):
    old = workdir / "bench.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v6.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    config = RunConfig(framework="fault", fault="ok")
    conn.execute(
        "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, "
        "momentum, epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, "
        "val_fraction, threads, seed, fault, config_json, outcome, started_at, ended_at, wall_seconds, "
        "run_dir, worker_command, reproduce) VALUES (1, ?, 'fault', 'small_cnn', 'cpu', 32, 'sgd', 0.01, "
        "0.9, 1, 2, 1, 300, 'synthetic', 256, 64, 10, 0.2, 0, 0, 'ok', ?, 'ok', 't', 't', 1, 'd', 'w', 'r')",
        (config.config_hash, json.dumps(config.to_dict())),
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 8
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"mode", "precision", "resolved_mode", "execution", "compile_seconds", "steady_by"} <= columns
    assert {"target_reached", "target_seconds", "target_epoch", "first_step_loss"} <= columns
    assert "wall_seconds" in {r[1] for r in conn.execute("PRAGMA table_info(epochs)")}
    assert {"sequence_length", "tokens_per_second"} <= columns  # version 8, on the way
    assert conn.execute("SELECT resolved_mode, outcome FROM runs").fetchall() == [(None, "ok")]
    conn.close()
    result = cli("inspect", "1")  # a row from before schema 7 has no execution section
    assert result.exit_code == 0 and "execution:" not in result.output


# --- the settings' rules, at the command line ------------------------------------------------

RULES = [
    ("mode: turbo", "mode: unknown mode 'turbo' (known: eager, graph, compiled)"),
    ("precision: fp8", "precision: unknown precision 'fp8' (known: fp32, bf16, fp16, tf32)"),
    ("target_accuracy: 2", "target_accuracy: expected an accuracy above 0 and at most 1"),
    ("target_accuracy: 0", "target_accuracy: expected an accuracy above 0 and at most 1"),
    ("stop_at_target: 3", "stop_at_target: expected true or false, got 3"),
    ("stop_at_target: true", "stop_at_target: needs target_accuracy"),
    ("compile_mode: max-autotune", "compile_mode: torch.compile's mode: only applies to framework pytorch"),
    ("framework: tensorflow, mode: compiled, compile_mode: default", "compile_mode: torch.compile's mode"),
    ("task: inference, target_accuracy: 0.5", "target_accuracy: time to accuracy applies to training"),
    ("framework: fault, compile_mode: default", "compile_mode: torch.compile's mode"),
]


@pytest.mark.parametrize(("entry", "message"), RULES)
def test_bad_execution_settings_are_a_matrix_error_naming_file_line_and_key(
    entry, message, write_matrix, cli
):
    write_matrix(f"name: bad\nsettings:\n  framework: pytorch\ninclude:\n  - {{{entry}}}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1
    assert result.output.startswith(f"error: m.yaml:5: {message}"), result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_the_fault_worker_takes_mode_precision_and_a_target(write_matrix, cli):
    write_matrix("include:\n  - {framework: fault, mode: compiled, precision: bf16, target_accuracy: 0.5}\n")
    result = cli("run", "--matrix", "m.yaml", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "1 configurations, 1 to run", result.output
    common = next(line for line in lines if line.startswith("common to all: "))
    assert common.startswith("common to all: framework=fault, "), common
    assert common.endswith(", fault=ok, mode=compiled, precision=bf16, target_accuracy=0.5"), common


def test_the_live_line_counts_warmup_steps_past_warmup_steps(tmp_path):
    from orchestrator.sweep import progress

    path = tmp_path / "events.jsonl"
    lines = [
        {"event": "phase", "phase": "warmup", "steps": 2, "most": 52},
        {"event": "step", "epoch": 0, "step": 2},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    events = progress._Events(path)
    events.read()
    assert progress.where_in_run(events, None) == "warmup step 2/2"
    with open(path, "a") as f:
        f.write(json.dumps({"event": "step", "epoch": 0, "step": 7}) + "\n")
    events.read()
    assert progress.where_in_run(events, None) == "warmup step 7 (until steady, at most 52)"


@pytest.mark.slow
def test_the_new_columns_on_both_backends(db_url, write_matrix, cli):
    """The same values on SQLite and PostgreSQL: a flag, a median of seconds, JSON text, a
    worker's garbage as NULL (PostgreSQL's types are stricter than SQLite's about what they take)."""
    from tests import dbs

    write_matrix(
        "settings: {framework: fault, dataset_size: 64, batch_size: 8, epochs: 4, sample_interval: 0}\n"
        "include:\n  - {fault: learn, target_accuracy: 0.8, stop_at_target: true, precision: bf16}\n"
        "  - {fault: hostile_result}\n"
    )
    result = cli("run", "--matrix", "m.yaml", "--db", db_url)
    assert result.exit_code == 0, result.output
    found = dbs.query(db_url, "SELECT * FROM runs ORDER BY id")
    assert [(r["target_reached"], r["target_epoch"], r["resolved_precision"]) for r in found] == [
        (1, 3, "bf16"),
        (None, None, "fp32"),
    ]
    assert found[0]["target_seconds"] > 0 and found[0]["first_step_loss"] == 2.3
    assert json.loads(found[1]["execution"])["how"].endswith("...")
    assert found[1]["compile_seconds"] is None and found[1]["warmup_steps_run"] is None
    walls = dbs.query(
        db_url, "SELECT wall_seconds FROM epochs WHERE run_id = :r ORDER BY epoch", r=found[0]["id"]
    )
    assert len(walls) == 3 and all(w["wall_seconds"] > 0 for w in walls)

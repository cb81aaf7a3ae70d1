"""The run folder as the first record (issue 45): record.json written atomically before the database
is touched, the database's rows an import of it (idempotent), `bench import RUN_DIR`, a record read
back as hostile input, and the patience for a database that is away (tests/test_record_faults.py:
a server stopped mid-sweep, bench killed after the record, a full disk)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError, DatabaseError
from orchestrator.sweep import catch_up
from orchestrator.sweep.record_file import RECORD_FILE, RecordError
from tests import dbs

pytestmark = pytest.mark.slow

TWO = """
name: two
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 1}
axes:
  framework: [fault]
  fault: [ok, segfault]
"""
CHILDREN = ("environments", "epochs", "samples", "phases", "replicas", "kernels")


def _swept(cli, write_matrix, workdir: Path, db: str | None = None) -> list[Path]:
    write_matrix(TWO)
    result = cli("run", "--matrix", "m.yaml", *(["--db", db] if db else []))
    assert result.exit_code == 0, result.output
    return sorted(p for p in (workdir / "bench-runs" / "sweep-1").iterdir() if p.is_dir())


def _counts(db: str) -> dict[str, int]:
    return {t: dbs.query(db, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in ("sweeps", "runs", *CHILDREN)}


def _same(rows: list[dict]) -> list[str]:
    """Rows comparable across a JSON file and a database: numbers as floats (a REAL column gives
    1.0 for the 1 a record holds), the link to the run left out, in a fixed order."""

    def plain(value):
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    return sorted(
        json.dumps({k: plain(v) for k, v in r.items() if k != "run_id"}, sort_keys=True) for r in rows
    )


def test_each_run_leaves_its_record_and_its_rows_are_an_import_of_it(cli, write_matrix, workdir, db_url):
    """On both backends: the rows are the record's, value for value (PostgreSQL's integer columns
    are of another type in bench's tables: a record must not lose their values there)."""
    db = db_url
    folders = _swept(cli, write_matrix, workdir, db)
    assert len(folders) == 2
    for folder in folders:
        names = [p.name for p in folder.iterdir()]
        assert RECORD_FILE in names and not [n for n in names if n.endswith(".tmp")]
        record = json.loads((folder / RECORD_FILE).read_text())
        (row,) = dbs.query(db, "SELECT * FROM runs WHERE record_id = :r", r=record["record_id"])
        # every column the record holds is the row's, as stored
        for key, value in record["runs"].items():
            assert row[key] == value, key
        assert Path(row["run_dir"]) == folder.resolve()
        assert row["reproduce"].startswith(f"bench rerun {row['id']} --db ")
        for table in CHILDREN:
            stored = dbs.query(db, f"SELECT * FROM {table} WHERE run_id = :i", i=row["id"])
            assert _same(stored) == _same(record[table]), table
        assert record["samples"] and all(r["seq"] is not None for r in record["samples"])
        sweep = dbs.query(db, "SELECT * FROM sweeps WHERE id = 1")[0]
        assert all(sweep[k] == v for k, v in record["sweep"].items())
    outcomes = sorted(r["outcome"] for r in dbs.query(db, "SELECT outcome FROM runs"))
    assert outcomes == ["crash", "ok"]


def test_importing_run_folders_twice_changes_nothing_here_or_in_another_database(cli, write_matrix, workdir):
    folders = _swept(cli, write_matrix, workdir)
    here = str(workdir / "bench.db")
    before = _counts(here)
    again = cli("import", "bench-runs/sweep-1", "--db", here)
    assert again.exit_code == 0, again.output
    assert "run folders: 0 imported, 2 already there, 0 refused" in again.output
    assert _counts(here) == before
    # a colleague's folders, copied elsewhere, into a database that has not their sweep
    copied = workdir / "colleague"
    shutil.copytree(workdir / "bench-runs" / "sweep-1", copied)
    other = str(workdir / "other.db")
    first = cli("import", str(copied / folders[0].name), str(copied / folders[1].name), "--db", other)
    assert first.exit_code == 0, first.output
    assert "run folders: 2 imported (runs 1, 2), 0 already there, 0 refused" in first.output
    assert _counts(other) == before
    second = cli("import", str(copied), "--db", other)
    assert "run folders: 0 imported, 2 already there" in second.output and _counts(other) == before
    (sweep,) = dbs.query(other, "SELECT name, status, host, command FROM sweeps")
    (mine,) = dbs.query(here, "SELECT name, host, command FROM sweeps")
    assert sweep["status"] == "interrupted" and {k: sweep[k] for k in mine} == mine
    # each row names the folder it was imported from
    dirs = sorted(r["run_dir"] for r in dbs.query(other, "SELECT run_dir FROM runs"))
    assert dirs == sorted(str((copied / f.name).resolve()) for f in folders)


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda d: d["runs"].update(outcome=5),
            "record.json: runs: outcome: 5 is not a value of this column",
        ),
        (lambda d: d["runs"].update({"\x1b[31mred": 1}), r"record.json: runs: '\x1b[31mred' is not a column"),
        (lambda d: d.update(record_id="../../x"), "record.json: record_id: '../../x' is not 32 hexadecimal"),
        (
            lambda d: d["epochs"].append({"seconds": "fast"}),
            ": seconds: 'fast' is not a value of this column",
        ),
        (lambda d: d["sweep"].pop("command"), "record.json: sweep: command is missing"),
        (lambda d: d.update(schema=999), "record.json: schema: 999; this bench reads up to"),
        (lambda d: d["runs"].update(wall_seconds=float("nan")), "record.json: not JSON (NaN is not a number"),
    ],
    ids=["type", "control", "record_id", "child", "identity", "schema", "nan"],
)
def test_a_bad_record_is_refused_in_one_line_naming_the_file_and_key(
    cli, write_matrix, workdir, edit, expected
):
    folders = _swept(cli, write_matrix, workdir)
    here = str(workdir / "bench.db")
    before = _counts(here)
    bad = workdir / "bad"
    shutil.copytree(folders[0], bad)
    document = json.loads((bad / RECORD_FILE).read_text())
    document["record_id"] = document["runs"]["record_id"] = "f" * 32  # not the stored run's
    edit(document)
    (bad / RECORD_FILE).write_text(json.dumps(document))
    empty = workdir / "empty"
    empty.mkdir()
    result = cli("import", str(bad), str(empty), "--db", here)
    assert result.exit_code == 1
    assert "Traceback" not in result.output and "\x1b" not in result.output
    lines = result.output.splitlines()
    assert any(line.startswith(f"refused: {bad}") and expected in line for line in lines), result.output
    assert f"refused: {empty}: no record.json in it or in its folders" in lines
    assert "run folders: 0 imported, 0 already there, 2 refused" in result.output
    assert _counts(here) == before


def test_a_write_is_retried_with_backoff_while_the_database_is_away_then_given_up():
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    patience = catch_up.Patience(10.0, sleep, lambda: clock[0])
    tries = iter([DatabaseError("the server refused the connection")] * 3 + [None])

    def write() -> str:
        failure = next(tries)
        if failure is not None:
            raise failure
        return "stored"

    assert catch_up.patiently(write, "storing", patience) == "stored"
    assert slept == [0.5, 1.0, 2.0]

    slept.clear()
    clock[0] = 0.0

    def away() -> None:
        raise DatabaseError("the server refused the connection")

    with pytest.raises(DatabaseError):
        catch_up.patiently(away, "storing", patience)
    assert slept == [0.5, 1.0, 2.0, 4.0, 2.5] and clock[0] == 10.0  # never past the bound

    calls = []

    def bad() -> None:
        calls.append(1)
        raise RecordError("x/record.json: runs: outcome: 5 is not a value of this column")

    with pytest.raises(RecordError):
        catch_up.patiently(bad, "storing", patience)
    assert calls == [1]  # a bad record is not the database's absence


def test_the_retry_bound_is_read_from_the_environment_and_checked(monkeypatch):
    monkeypatch.setenv(catch_up.RETRY_VARIABLE, "2.5")
    assert catch_up.retry_seconds() == 2.5
    monkeypatch.delenv(catch_up.RETRY_VARIABLE)
    assert catch_up.retry_seconds() == catch_up.DEFAULT_RETRY_SECONDS
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(catch_up.RETRY_VARIABLE, bad)
        with pytest.raises(ConfigError, match="BENCH_DB_RETRY_SECONDS"):
            catch_up.retry_seconds()


def test_a_version_15_database_is_upgraded_with_the_record_id_column_and_its_unique_index(tmp_path):
    from orchestrator.storage.db import Database, schema_version

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v15.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
        " VALUES ('before', 'now', 'finished', 1, 'h', 'm', '0', 'bench run')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 16
    assert "record_id" in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    indexes = {row[1]: row[2] for row in conn.execute("PRAGMA index_list(runs)")}
    assert indexes.get("runs_record") == 1  # unique
    assert conn.execute("SELECT name FROM sweeps").fetchall() == [("before",)]
    conn.close()


def test_resume_imports_only_its_own_sweeps_good_records(cli, write_matrix, workdir, caplog):
    """--resume reads the sweep's folder as outside input: a record of another sweep, or a bad one,
    is left where it is with a warning, and what the sweep finished is not run again."""
    folders = _swept(cli, write_matrix, workdir)
    here = str(workdir / "bench.db")
    before = _counts(here)
    other = {"command": "bench run --matrix elsewhere.yaml"}
    for name, digit, edit in (("9998-other", "8", other), ("9999-bad", "9", None)):
        folder = workdir / "bench-runs" / "sweep-1" / name
        shutil.copytree(folders[0], folder)
        document = json.loads((folder / RECORD_FILE).read_text())
        document["record_id"] = document["runs"]["record_id"] = digit * 32
        if edit:
            document["sweep"].update(edit)
        else:
            document["runs"]["outcome"] = ["ok"]
        (folder / RECORD_FILE).write_text(json.dumps(document))
    resumed = cli("run", "--matrix", "m.yaml", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "2 already finished" in resumed.output and "imported from their folders" not in resumed.output
    assert _counts(here) == {**before, "sweeps": 1}
    warnings = [r.getMessage() for r in caplog.records if r.name == "orchestrator.sweep.catch_up"]
    assert any("9998-other/record.json: a record of another sweep than 1" in w for w in warnings), warnings
    assert any("9999-bad/record.json: runs: outcome: ['ok'] is not a value" in w for w in warnings), warnings

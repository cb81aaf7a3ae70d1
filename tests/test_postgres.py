"""PostgreSQL as the results database, against a real server (tests/postgres_server.py): the schema
is the same on both backends, values survive the trip, every command works, two drivers write at
once while reports read, an old database is upgraded. Its failures: test_postgres_errors.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from orchestrator.launch.outcomes import OUTCOMES
from orchestrator.storage import postgres
from orchestrator.storage.db import Database, _statements, schema_version
from tests import dbs
from tests.conftest import bench_command

DATA = Path(__file__).resolve().parent / "data"


def bench(url: str, *args: str):
    return CliRunner().invoke(bench_cli, [*args, "--db", url], catch_exceptions=False)


def _shape(url: str) -> dict[str, dict]:
    """What each table is, in words both backends share."""
    kinds = {"INTEGER": "int", "BIGINT": "int", "REAL": "float", "DOUBLE_PRECISION": "float", "TEXT": "text"}
    engine = sa.create_engine(url)
    inspector = sa.inspect(engine)
    shape = {}
    for table in sorted(set(inspector.get_table_names()) - {postgres.VERSION_TABLE}):
        pk = inspector.get_pk_constraint(table)["constrained_columns"]
        cols = []
        for c in inspector.get_columns(table):
            default = (c["default"] or "").split("::")[0] or None
            numbered = default is not None and default.startswith("nextval(")
            # SQLite calls a primary key nullable; PostgreSQL numbers its own with a sequence.
            nullable = c["nullable"] and c["name"] not in pk
            cols.append((c["name"], kinds[type(c["type"]).__name__], nullable, None if numbered else default))
        fks = sorted(
            (tuple(f["constrained_columns"]), f["referred_table"]) for f in inspector.get_foreign_keys(table)
        )
        checks = len(inspector.get_check_constraints(table))
        indexes = sorted(
            (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)
        )
        shape[table] = {"columns": cols, "pk": pk, "fks": fks, "checks": checks, "indexes": indexes}
    engine.dispose()
    return shape


def test_both_backends_have_the_same_tables_and_columns(pg_server, tmp_path):
    sqlite_url = f"sqlite:///{tmp_path / 'bench.db'}"
    pg_url = pg_server.create_database()
    Database(sqlite_url, create=True).close()
    Database(pg_url, create=True).close()
    on_sqlite, on_postgres = _shape(sqlite_url), _shape(pg_url)
    assert set(on_sqlite) == {
        "sweeps",
        "runs",
        "epochs",
        "environments",
        "samples",
        "phases",
        "kernels",
        "replicas",
        "calibrations",
    }
    assert on_postgres == on_sqlite
    # SQLite numbers an INTEGER PRIMARY KEY itself (the rowid); PostgreSQL needs a sequence, only there.
    engine = sa.create_engine(pg_url)
    numbered = {
        (t, c["name"])
        for t in on_postgres
        for c in sa.inspect(engine).get_columns(t)
        if (c["default"] or "").startswith("nextval(")
    }
    engine.dispose()
    assert numbered == {("sweeps", "id"), ("runs", "id"), ("calibrations", "id")}
    assert on_postgres["runs"]["checks"] == 1 and on_postgres["runs"]["indexes"] == [
        ("runs_record", ("record_id",), True),  # version 16: a record imported twice is one row
        ("runs_sweep", ("sweep_id", "config_hash"), False),
    ]


def test_values_keep_their_width_and_precision(db_url, workdir, write_matrix):
    """64-bit integers, doubles to the last digit, booleans as 0/1, ids numbered by the database."""
    matrix = write_matrix(
        """
        name: widths
        settings: {framework: fault, fault: ok, dataset_size: 32, batch_size: 8, epochs: 1,
                   lr: 0.012345678901234567, memory_budget: 5GiB, ignore_sigterm: true}
        axes:
          seed: [1, 2]
        """
    )
    result = bench(db_url, "run", "--matrix", str(matrix))
    assert result.exit_code == 0, result.output
    runs = dbs.query(db_url, "SELECT id, lr, memory_budget, fault, config_json FROM runs ORDER BY id")
    assert [r["id"] for r in runs] == [1, 2]
    for run in runs:
        assert run["lr"] == json.loads(run["config_json"])["lr"] == 0.012345678901234567
        assert run["memory_budget"] == 5 * 2**30 and json.loads(run["fault"])["ignore_sigterm"] is True
    env = dbs.query(db_url, "SELECT memory_bytes FROM environments WHERE run_id = 1")[0]
    assert env["memory_bytes"] > 2**31  # this machine's memory: more than a 32-bit integer holds


def _sweep_matrix(name: str, seeds: list[int], extra: str = "") -> str:
    """Fault-worker runs holding threads and memory, sampled (so samples and phases are written),
    and one that crashes."""
    return (
        textwrap.dedent(
            f"""
        name: {name}
        settings: {{framework: fault, dataset_size: 32, batch_size: 8, epochs: 2, warmup_steps: 0,
                   sample_interval: 0.05}}
        axes:
          fault: [hold]
          hold_seconds: [0.3]
          hold_memory_mb: [20]
          seed: {seeds}
        include:
          - {{fault: segfault, after_steps: 2}}
        """
        ).lstrip()
        + extra
    )


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        bench_command(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def _sleeping_worker(runs_root: Path) -> int | None:
    """The pid of the `sleep` run's worker once it has started."""
    for events in runs_root.glob("sweep-*/*-fault-sleep-*/events.jsonl"):
        text = events.read_text()
        if text:
            return json.loads(text.splitlines()[0])["pid"]
    return None


@pytest.mark.slow
def test_two_drivers_write_at_once_while_a_report_reads(pg_server, tmp_path):
    """Both start on an empty database (one creates it, the other waits for it), write their sweeps
    side by side, and reports read mid-sweep: every run recorded, no error, no lock failure."""
    url = pg_server.create_database()
    # alpha ends with a run that sleeps until this test kills it: a report during the sweep is certain.
    sleeper = "  - {fault: sleep, seconds: 600}\n"
    (tmp_path / "alpha.yaml").write_text(_sweep_matrix("alpha", [1, 2, 3, 4], sleeper))
    (tmp_path / "beta.yaml").write_text(_sweep_matrix("beta", [5, 6, 7, 8]))
    drivers = [_start(tmp_path, "run", "--matrix", f"{name}.yaml", "--db", url) for name in ("alpha", "beta")]
    try:
        _wait_for(lambda: _sleeping_worker(tmp_path / "bench-runs") is not None)
        sweep = dbs.query(url, "SELECT id, status FROM sweeps WHERE name = 'alpha'")[0]
        before = dbs.query(url, "SELECT count(*) AS n FROM runs WHERE sweep_id = :s", s=sweep["id"])[0]["n"]
        during = subprocess.run(
            bench_command("report", "--sweep", str(sweep["id"]), "--db", url),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert during.returncode == 0, during.stderr
        assert f"sweep {sweep['id']} 'alpha' (running" in during.stdout
        assert f"{before} configurations" in during.stdout and before == 5
        os.kill(_sleeping_worker(tmp_path / "bench-runs"), signal.SIGKILL)
        results = [d.communicate(timeout=300) for d in drivers]
    finally:
        for d in drivers:
            if d.poll() is None:
                d.kill()
    for driver, (_out, err) in zip(drivers, results, strict=True):
        assert driver.returncode == 0, err
        assert "Traceback" not in err and "error" not in err.lower()
    sweeps = dbs.query(url, "SELECT id, name, status FROM sweeps ORDER BY name")
    assert [(s["name"], s["status"]) for s in sweeps] == [("alpha", "finished"), ("beta", "finished")]
    counts = dbs.query(
        url,
        "SELECT s.name, r.outcome, count(*) AS n, count(DISTINCT r.config_hash) AS configs"
        " FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
        " GROUP BY s.name, r.outcome ORDER BY s.name, r.outcome",
    )
    assert [(c["name"], c["outcome"], c["n"], c["configs"]) for c in counts] == [
        ("alpha", "crash", 2, 2),  # the segfault, and the sleeper this test killed
        ("alpha", "ok", 4, 4),
        ("beta", "crash", 1, 1),
        ("beta", "ok", 4, 4),
    ]
    # Every run's whole record is there: environment, epochs, samples for the sampled ones.
    missing = dbs.query(
        url,
        "SELECT r.id FROM runs r LEFT JOIN environments e ON e.run_id = r.id WHERE e.run_id IS NULL"
        " UNION SELECT r.id FROM runs r WHERE r.outcome = 'ok' AND"
        " (NOT EXISTS (SELECT 1 FROM epochs p WHERE p.run_id = r.id)"
        "  OR NOT EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id))",
    )
    assert missing == []
    for sweep, count in zip(sweeps, (6, 5), strict=True):
        after = bench(url, "report", "--sweep", str(sweep["id"]), "--format", "json")
        assert after.exit_code == 0, after.output
        assert len(json.loads(after.output)["runs"]) == count


def test_every_command_works_on_postgres(pg_server, workdir, write_matrix):
    url = pg_server.create_database()
    matrix = write_matrix(
        """
        name: every
        settings: {framework: fault, dataset_size: 64, batch_size: 8, epochs: 2, warmup_steps: 1,
                   sample_interval: 0.05}
        include:
          - {fault: ok, trace: kernels}
          - {fault: ok, seed: 1}
          - {fault: segfault, after_steps: 3}
        """
    )
    first = bench(url, "run", "--matrix", str(matrix), "--only", "fault=ok")
    assert first.exit_code == 0 and "2 ok" in first.output
    resumed = bench(url, "run", "--matrix", str(matrix), "--resume")
    assert resumed.exit_code == 0 and "2 already finished" in resumed.output
    assert bench(url, "rerun", "1").exit_code == 0
    trained = bench(
        url, "train", "--framework", "fault", "--fault", "ok", "--dataset-size", "64", "--batch-size", "8"
    )
    assert trained.exit_code == 0, trained.output
    sweeps = dbs.query(url, "SELECT id, kind, command FROM sweeps ORDER BY id")
    assert [s["kind"] for s in sweeps] == ["matrix", "rerun", "train"]
    # the URL's password is never recorded (the tests' URLs carry one)
    assert "bench-test-pw" in url and all("bench-test-pw" not in str(s) for s in sweeps)
    runs = dbs.query(url, "SELECT id, outcome, reason, reproduce FROM runs ORDER BY id")
    assert [r["outcome"] for r in runs] == ["ok", "ok", "crash", "ok", "ok"], runs
    assert runs[0]["reproduce"] == f"bench rerun 1 --db {url.replace(':' + 'bench-test-pw', '')}"

    results = json.loads(bench(url, "report", "--sweep", "1", "--format", "json").output)
    assert sorted(r["outcome"] for r in results["runs"]) == ["crash", "ok", "ok"]
    for args in (
        ["report", "--crashes", "--sweep", "1"],
        ["report", "--resources", "--sweep", "1"],
        ["report", "--table", "comparison", "--sweep", "all"],
        ["report", "--table", "batch", "--sweep", "all"],
        ["report", "--table", "accuracy", "--sweep", "all"],
        ["report", "--compare", "1", "3"],
        ["report", "--kernels", "--sweep", "1"],
        ["inspect", "1"],
        ["timeline", "1", "--format", "csv"],
    ):
        result = bench(url, *args)
        assert result.exit_code == 0, (args, result.output)
    assert "convolution" in bench(url, "report", "--kernels", "--sweep", "1").output
    assert "segfault" in bench(url, "report", "--crashes", "--sweep", "1").output.lower()
    html = bench(url, "report", "--html", str(workdir / "site"), "--sweep", "1")
    assert html.exit_code == 0 and (workdir / "site" / "index.html").stat().st_size > 0
    plot = bench(url, "inspect", "1", "--plot", str(workdir / "run1.png"))
    assert plot.exit_code == 0 and (workdir / "run1.png").stat().st_size > 0
    # the CSV timeline is every sample of the run, as stored
    samples = dbs.query(url, "SELECT count(*) AS n FROM samples WHERE run_id = 1")[0]["n"]
    assert len(bench(url, "timeline", "1", "--format", "csv").output.strip().splitlines()) == samples + 1


# Every older schema kept in tests/data (schema_vN.sql, as each version bump leaves one behind).
@pytest.mark.parametrize("old", sorted(p.name for p in DATA.glob("schema_v*.sql")))
def test_an_old_postgres_database_is_upgraded_and_keeps_what_it_had(pg_server, old):
    url, fresh = pg_server.create_database(), pg_server.create_database()
    statements = _statements((DATA / old).read_text())
    version = int(old.split("_v")[1].split(".")[0])
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        postgres.portable_metadata(statements).create_all(conn)
        postgres.set_version(conn, version)
        conn.execute(
            sa.text(
                "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version,"
                " command) VALUES ('s', 'now', 'finished', 1, 'h', 'm', '0', 'bench run')"
            )
        )
    engine.dispose()
    Database(fresh, create=True).close()

    def columns(db: str) -> dict[str, set[str]]:  # an added column goes last: compare as sets
        return {table: set(names) for table, names in dbs.columns(db).items()}

    assert columns(url) != columns(fresh)
    Database(url, create=False).close()
    assert columns(url) == columns(fresh)
    assert dbs.query(url, "SELECT version FROM schema_version") == [{"version": schema_version()}]
    # the outcome CHECK was replaced by the schema's, which lists every outcome bench records
    (check,) = dbs.query(
        url,
        "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
        "WHERE conrelid = 'runs'::regclass AND contype = 'c'",
    )
    assert all(f"'{name}'" in check["d"] for name in OUTCOMES), check["d"]
    assert dbs.query(url, "SELECT id, name, status FROM sweeps") == [
        {"id": 1, "name": "s", "status": "finished"}
    ]
    # the upgraded database takes new sweeps, numbered after the old one
    db = Database(url, create=False)
    with db.begin() as conn:
        new = db.insert(
            conn,
            db.sweeps,
            dict(
                name="n",
                started_at="t",
                status="running",
                total_configs=1,
                host="h",
                machine="m",
                bench_version="0",
                command="bench run",
            ),
        )
    db.close()
    assert new == 2


def test_a_newer_postgres_database_is_refused(pg_server):
    url = pg_server.create_database()
    Database(url, create=True).close()
    dbs.execute(url, "UPDATE schema_version SET version = :v", v=schema_version() + 1)
    result = bench(url, "report")
    assert result.exit_code == 1
    assert (
        f"schema version {schema_version() + 1}, but this bench expects {schema_version()}" in result.output
    )


def test_foreign_tables_without_a_version_are_not_taken_over(pg_server):
    url = pg_server.create_database()
    dbs.execute(url, "CREATE TABLE runs (id INTEGER)")
    result = bench(url, "report")
    assert result.exit_code == 1 and "no schema_version table" in result.output


def test_a_data_parallel_run_on_postgres(pg_server, workdir, write_matrix):
    """A run of two replicas (the fault worker's) stores its replica rows on PostgreSQL too, and the
    scaling table and bench inspect read them back."""
    url = pg_server.create_database()
    matrix = write_matrix(
        """
        name: replicated
        settings: {framework: fault, dataset_size: 40, batch_size: 4, epochs: 2, warmup_steps: 1}
        axes:
          replicas: [1, 2]
        """
    )
    result = bench(url, "run", "--matrix", str(matrix))
    assert result.exit_code == 0 and "2 ok" in result.output, result.output
    reps = dbs.query(
        url, "SELECT run_id, replica, outcome, run_folder FROM replicas ORDER BY run_id, replica"
    )
    assert [(r["replica"], r["outcome"], r["run_folder"]) for r in reps] == [
        (0, "ok", "."),
        (1, "ok", "replica-1"),
    ]
    table = json.loads(bench(url, "report", "--table", "scaling", "--format", "json").output)
    assert sorted(r["replica_count"] for r in table["rows"]) == [1, 2]
    assert "replica 1: ok" in bench(url, "inspect", str(reps[0]["run_id"])).output

"""PostgreSQL's failures, against a real server (tests/postgres_server.py): a URL that cannot be used
is one line naming the fix with exit 1 and nothing recorded lost; a server restarted mid-sweep is
reconnected to; one down when a run ends stops the sweep in one line, and --resume finishes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import dbs
from tests.conftest import bench_command
from tests.postgres_server import PASSWORD
from tests.test_postgres import _start, _wait_for, bench


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed


def test_connection_problems_are_one_line_naming_the_fix(pg_server, workdir, write_matrix):
    matrix = str(write_matrix("include:\n  - {framework: fault, fault: ok}\n"))
    recorded, empty = pg_server.create_database(), pg_server.create_database()
    assert bench(recorded, "run", "--matrix", matrix).exit_code == 0
    dbs.execute(pg_server.url("postgres"), "DROP ROLE IF EXISTS guest")
    dbs.execute(pg_server.url("postgres"), "CREATE ROLE guest LOGIN PASSWORD 'secret-pw'")
    guest = f"postgresql+psycopg://guest:secret-pw@127.0.0.1:{pg_server.port}/"
    before = dbs.query(recorded, "SELECT id, outcome FROM runs")
    cases = {
        f"postgresql+psycopg://bench:secret-pw@127.0.0.1:{_closed_port()}/bench": "refused the connection",
        pg_server.url("nosuchdb"): "no such database on the server: create it",
        recorded.replace(PASSWORD, "secret-pw"): "wrong user or password",
        pg_server.url("t1", password=None): "wrong user or password",
        f"postgresql+psycopg://nobody:secret-pw@127.0.0.1:{pg_server.port}/x": "wrong user or password",
        "postgresql+psycopg2://bench@127.0.0.1/bench": "through psycopg 3",
        # PostgreSQL 15 on: only a database's owner may create tables in it; nobody else may read
        guest + recorded.rsplit("/", 1)[1]: "the user may not do that here: make it the database's owner",
        "mysql://bench:secret-pw@127.0.0.1/bench": "or PostgreSQL (postgresql+psycopg://USER@HOST/NAME)",
    }
    for url, message in cases.items():
        for command in (["run", "--matrix", matrix], ["report"], ["inspect", "1"]):
            result = bench(url, *command)
            lines = result.output.strip().splitlines()
            assert result.exit_code == 1, (url, command, result.output)
            assert len(lines) == 1 and lines[0].startswith("error: --db ") and message in lines[0], lines
            assert "secret-pw" not in result.output
    result = bench(guest + empty.rsplit("/", 1)[1], "run", "--matrix", matrix)  # creating tables, not reading
    assert (
        result.exit_code == 1
        and "the user may not do that here: make it the database's owner" in result.output
    )
    assert [p.name for p in (workdir / "bench-runs").iterdir()] == ["sweep-1"]  # the recorded sweep's only
    assert dbs.query(recorded, "SELECT id, outcome FROM runs") == before


def test_without_psycopg_postgres_is_one_line_saying_how_to_install_it(pg_server, workdir):
    """psycopg hidden from a real bench process (a None entry in sys.modules fails its import)."""
    code = "import sys; sys.modules['psycopg'] = None; from orchestrator.cli.main import main; main()"
    url = pg_server.create_database()
    proc = subprocess.run(
        [sys.executable, "-c", code, "report", "--db", url], cwd=workdir, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: --db {url.replace(':' + PASSWORD, '')}: PostgreSQL needs the psycopg package: "
        "pip install 'psycopg[binary]' (bench's postgres extra: pip install -e '.[postgres]')"
    ]
    # SQLite needs no psycopg
    sqlite = subprocess.run(
        [sys.executable, "-c", code, "report", "--db", "x.db"], cwd=workdir, capture_output=True, text=True
    )
    assert sqlite.returncode == 1 and "no database at x.db" in sqlite.stderr


def _started_workers(runs_root: Path, sweep: str) -> int:
    return sum(1 for e in runs_root.glob(f"{sweep}/*/events.jsonl") if e.read_text())


@pytest.mark.slow
def test_a_restarted_server_is_reconnected_to_and_a_stopped_one_is_caught_up(
    pg_server, tmp_path, monkeypatch
):
    """Mid-sweep, between two runs' records: a restart costs nothing. A server still down past the
    retry bound when runs end leaves their records pending in their folders while the sweep goes on;
    it ends with one line saying where (exit 1), and --resume imports them, running none again."""
    url = pg_server.create_database()
    sleeps = "settings: {framework: fault, fault: sleep, seconds: 2, dataset_size: 32, batch_size: 8}\n"
    (tmp_path / "up.yaml").write_text(f"name: up\n{sleeps}axes:\n  seed: [1, 2, 3]\n")
    (tmp_path / "down.yaml").write_text(f"name: down\n{sleeps}axes:\n  seed: [4, 5, 6]\n")
    runs = tmp_path / "bench-runs"

    def recorded(sweep: str) -> int:
        return dbs.query(
            url,
            "SELECT count(*) AS n FROM runs r JOIN sweeps s ON s.id = r.sweep_id WHERE s.name = :n",
            n=sweep,
        )[0]["n"]

    driver = _start(tmp_path, "run", "--matrix", "up.yaml", "--db", url)
    _wait_for(lambda: _started_workers(runs, "sweep-1") >= 2)
    assert recorded("up") == 1
    pg_server.stop()
    pg_server.start()
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, err
    assert recorded("up") == 3

    monkeypatch.setenv("BENCH_DB_RETRY_SECONDS", "1")  # the bound, short: the server stays down past it
    driver = _start(tmp_path, "run", "--matrix", "down.yaml", "--db", url)
    _wait_for(lambda: _started_workers(runs, "sweep-2") >= 2)
    pg_server.stop()
    try:
        out, err = driver.communicate(timeout=120)
    finally:
        pg_server.start()
    assert driver.returncode == 1, err
    assert "Traceback" not in err and "record pending: the database is away" in err
    assert "3 ok" in out  # the sweep went on: every run ran, two of them held in memory and folder
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: 2 record(s) not in the database yet (--db "), err
    assert f"in {runs / 'sweep-2'}: `bench run --resume` or `bench import FOLDER` adds them" in last
    assert recorded("down") == 1  # the two runs that ended while the server was down have no row yet
    resumed = subprocess.run(
        bench_command("run", "--matrix", "down.yaml", "--resume", "--db", url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "sweep 2: 2 finished run(s) imported from their folders' records" in resumed.stderr
    assert "3 already finished" in resumed.stdout
    rows = dbs.query(url, "SELECT config_hash, outcome FROM runs WHERE sweep_id = 2 ORDER BY id")
    assert [r["outcome"] for r in rows] == ["ok"] * 3 and len({r["config_hash"] for r in rows}) == 3
    assert _started_workers(runs, "sweep-2") == 3  # none ran twice
    again = subprocess.run(
        bench_command("import", str(runs / "sweep-2"), "--db", url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "run folders: 0 imported, 3 already there, 0 refused" in again.stdout, again.stderr

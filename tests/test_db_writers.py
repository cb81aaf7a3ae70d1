"""Several `bench run`s writing one database at once (issue 45): four fault-worker sweeps started
together on one new SQLite file, and four on one new PostgreSQL database. Each ends with exit 0, and
each sweep holds every run its matrix asked for, once, with its whole record, and none of another
sweep's. Real processes, the real CLI, a real server on the loopback address."""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestrator.config.matrix import load_matrix
from orchestrator.storage import postgres
from orchestrator.storage.db import _statements
from tests import dbs
from tests.conftest import BACKENDS, bench_command, new_database

DATA = Path(__file__).resolve().parent / "data"

WRITERS = 4
SEEDS = 5  # ok runs a sweep, beside its one crash


def writer_matrix(folder: Path, index: int) -> Path:
    """Sampled fault-worker runs holding a little memory (so samples, phases and epochs are written:
    records of a few hundred rows), and one that crashes; seeds differ between the sweeps, so a run
    recorded under another sweep's id is seen."""
    seeds = [index * 100 + s for s in range(SEEDS)]
    path = folder / f"writer{index}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            name: writer{index}
            settings: {{framework: fault, dataset_size: 32, batch_size: 8, epochs: 2, warmup_steps: 0,
                       sample_interval: 0.05}}
            axes:
              fault: [hold]
              hold_seconds: [0.2]
              hold_memory_mb: [10]
              seed: {seeds}
            include:
              - {{fault: segfault, after_steps: 2, seed: {index * 100 + 99}}}
            """
        ).lstrip()
    )
    return path


def run_together(folder: Path, url: str, matrices: list[Path]) -> list[subprocess.CompletedProcess]:
    """Start every `bench run` before waiting on any: they create the database and write side by side."""
    procs = [
        subprocess.Popen(
            bench_command("run", "--matrix", str(m), "--db", url),
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in matrices
    ]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return done


def assert_every_run_once(url: str, matrices: list[Path]) -> None:
    """Per sweep: exactly the configurations its matrix asked for, each once, each in its sweep's
    folder, each with its environment row (and epochs where it ran ok)."""
    names = sorted(load_matrix(m).name for m in matrices)
    sweeps = [
        s for s in dbs.query(url, "SELECT id, name, status FROM sweeps ORDER BY id") if s["name"] != "old"
    ]
    assert sorted(s["name"] for s in sweeps) == names
    assert all(s["status"] == "finished" for s in sweeps), sweeps
    by_name = {s["name"]: s["id"] for s in sweeps}
    for path in matrices:
        m = load_matrix(path)
        sweep_id = by_name[m.name]
        rows = dbs.query(
            url, "SELECT id, config_hash, outcome, run_dir FROM runs WHERE sweep_id = :s", s=sweep_id
        )
        hashes = [r["config_hash"] for r in rows]
        assert sorted(hashes) == sorted(c.config_hash for c in m.configs), m.name  # none missing, none twice
        assert all(f"sweep-{sweep_id}" == Path(r["run_dir"]).parent.name for r in rows), m.name
        assert sorted(r["outcome"] for r in rows) == ["crash"] + ["ok"] * SEEDS, m.name
    incomplete = dbs.query(
        url,
        "SELECT r.id FROM runs r LEFT JOIN environments e ON e.run_id = r.id WHERE e.run_id IS NULL"
        " UNION SELECT r.id FROM runs r WHERE r.outcome = 'ok' AND"
        " (NOT EXISTS (SELECT 1 FROM epochs p WHERE p.run_id = r.id)"
        "  OR NOT EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.id))",
    )
    assert incomplete == []
    folders = dbs.query(url, "SELECT count(DISTINCT run_dir) AS n, count(*) AS runs FROM runs")[0]
    assert folders["n"] == folders["runs"] == WRITERS * (SEEDS + 1)


@pytest.fixture(params=BACKENDS)
def new_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return new_database(request, tmp_path)


OLD_SCHEMA = DATA / "schema_v14.sql"
OLD_SWEEP = (
    "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
    " VALUES ('old', 'then', 'finished', 1, 'h', 'm', '0', 'bench run')"
)


@pytest.fixture(params=BACKENDS)
def old_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of the schema before this one, holding one sweep of its own."""
    url = new_database(request, tmp_path)
    statements = _statements(OLD_SCHEMA.read_text())
    if request.param == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        conn.executescript(OLD_SCHEMA.read_text() + ";" + OLD_SWEEP)
        conn.close()
        return url
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        postgres.portable_metadata(statements).create_all(conn)
        postgres.set_version(conn, 14)
        conn.execute(sa.text(OLD_SWEEP))
    engine.dispose()
    return url


@pytest.mark.slow
def test_four_sweeps_write_one_new_database_at_once(new_db: str, tmp_path: Path):
    matrices = [writer_matrix(tmp_path, i) for i in range(WRITERS)]
    results = run_together(tmp_path, new_db, matrices)
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "error" not in result.stderr.lower(), result.stderr
    assert_every_run_once(new_db, matrices)
    if new_db.startswith("sqlite"):
        check = dbs.query(new_db, "PRAGMA integrity_check")
        assert [next(iter(r.values())) for r in check] == ["ok"]


@pytest.mark.slow
def test_four_sweeps_upgrade_an_older_database_once_and_write_it_at_once(old_db: str, tmp_path: Path):
    """The first to open the database upgrades it, under the lock (SQLite's write lock, PostgreSQL's
    advisory lock); the others wait, find it upgraded, and write their sweeps beside the old one."""
    matrices = [writer_matrix(tmp_path, i) for i in range(WRITERS)]
    results = run_together(tmp_path, old_db, matrices)
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "error" not in result.stderr.lower(), result.stderr
    assert_every_run_once(old_db, matrices)
    assert dbs.query(old_db, "SELECT name, status FROM sweeps WHERE id = 1") == [
        {"name": "old", "status": "finished"}
    ]

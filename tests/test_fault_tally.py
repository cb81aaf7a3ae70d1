"""The fault-injection benchmark's figure is its count (benchmarks/harness/fault_tally.py): a real
sweep counts nothing missing, duplicated or run twice, and a row taken away, a row recorded twice and
a run folder whose worker finished twice are each counted where they are."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from benchmarks.harness.fault_tally import count, short_matrix


@pytest.mark.slow
def test_the_count_sees_a_missing_a_duplicated_and_a_twice_run_record(workdir: Path, cli):
    matrix = short_matrix(workdir, "tally", 3, seconds=0.1)
    runs = workdir / "runs"
    db = workdir / "bench.db"
    result = cli("run", "--matrix", str(matrix), "--db", str(db), "--runs-dir", str(runs))
    assert result.exit_code == 0, result.output
    clean = count(str(db), matrix, runs)
    assert (clean.asked, clean.missing, clean.duplicated, clean.redone) == (3, 0, 0, 0)

    conn = sqlite3.connect(db)
    ids = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id")]
    # a copy without its record id: the unique index on it refuses a second row of one record,
    # and this planted duplicate stands for one recorded by some other way (a hand insert, an old bench)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] not in ("id", "record_id")]
    listed = ", ".join(columns)
    conn.execute(f"INSERT INTO runs ({listed}) SELECT {listed} FROM runs WHERE id = ?", (ids[0],))
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("DELETE FROM runs WHERE id = ?", (ids[1],))
    # An interrupted record is not a finished one: neither a duplicate nor a record of its own.
    conn.execute(f"INSERT INTO runs ({listed}) SELECT {listed} FROM runs WHERE id = ?", (ids[2],))
    conn.execute("UPDATE runs SET outcome = 'interrupted' WHERE id = (SELECT max(id) FROM runs)")
    conn.commit()
    conn.close()
    counted = count(str(db), matrix, runs)
    assert (counted.missing, counted.duplicated, counted.redone) == (1, 1, 0)

    first = sorted(runs.glob("sweep-1/*"))[0]
    shutil.copytree(first, first.with_name(first.name + "-a2"))
    assert count(str(db), matrix, runs).redone == 1

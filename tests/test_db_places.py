"""A database in a place bench cannot write (issue 45): on a read-only file system the commands that
read (report, inspect, timeline, export) work and say what they said before, byte for byte; `bench
run` is one line naming the file. A database on a full file system: `bench run` stops in one line,
no traceback, and what was recorded before stays; once there is room, --resume finishes the sweep.

Root ignores permissions, so a read-only place is a real one: a tmpfs mounted, written, then
remounted read-only; a full one is a small tmpfs. Where mounting is not permitted these skip, saying
so."""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import bench_command

MATRIX = """
name: places
settings: {framework: fault, dataset_size: 32, batch_size: 8, epochs: 2, warmup_steps: 0,
           sample_interval: 0.05}
axes:
  fault: [hold]
  hold_seconds: [0.2]
  seed: [1, 2, 3, 4, 5, 6]
"""


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=60)


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of that size mounted on folder for the block; skips where mounting is not permitted."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8): a read-only or full place cannot be made")
    folder.mkdir()
    made = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder))
    if made.returncode != 0:
        pytest.skip(f"mount is not permitted here ({made.stderr.strip()[:200]})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=60)


def bench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(bench_command(*args), cwd=cwd, capture_output=True, text=True, timeout=600)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.fixture
def recorded(workdir: Path) -> Path:
    """A database of one sweep of six sampled fault runs, made by a bench process that has ended."""
    (workdir / "m.yaml").write_text(MATRIX.lstrip())
    done = bench(workdir, "run", "--matrix", "m.yaml")
    assert done.returncode == 0, done.stderr
    return workdir / "bench.db"


READERS = (
    ("report",),
    ("report", "--format", "json"),
    ("report", "--resources"),
    ("inspect", "2"),
    ("timeline", "3"),
    ("export", "--out", "-"),
)


@pytest.mark.slow
@pytest.mark.parametrize("with_wal", [False, True], ids=["checkpointed", "wal-beside"])
def test_reports_read_a_database_on_a_read_only_file_system(recorded: Path, workdir: Path, with_wal: bool):
    expected = {args: bench(workdir, *args, "--db", str(recorded)) for args in READERS}
    with tmpfs(workdir / "ro", "64m") as place:
        copy = place / "bench.db"
        if with_wal:
            # The file as a writer left it open: its last commits still in the -wal beside it.
            writer = sqlite3.connect(recorded)
            writer.execute("PRAGMA wal_autocheckpoint=0")
            writer.execute("UPDATE sweeps SET name = name")
            writer.commit()
            shutil.copy(recorded, copy)
            shutil.copy(recorded.with_name("bench.db-wal"), place / "bench.db-wal")
            writer.close()
        else:
            shutil.copy(recorded, copy)
        assert _mount("-o", "remount,ro", str(place)).returncode == 0
        before = sorted(os.listdir(place))
        for args, wanted in expected.items():
            assert wanted.returncode == 0, wanted.stderr
            got = bench(workdir, *args, "--db", str(copy))
            assert (got.returncode, got.stderr) == (0, ""), (args, got.stderr)
            shown = got.stdout.replace(str(copy), str(recorded))  # `bench rerun N --db FILE` names it
            changed = difflib.unified_diff(wanted.stdout.splitlines(), shown.splitlines(), lineterm="")
            assert shown == wanted.stdout, (args, "\n".join(changed))
        assert sorted(os.listdir(place)) == before  # nothing made beside it (it could not be)

        line = one_error_line(bench(workdir, "run", "--matrix", "m.yaml", "--db", str(copy)))
        assert line.startswith(f"error: {copy}: read-only (on a read-only file system)"), line
        line = one_error_line(bench(workdir, "run", "--matrix", "m.yaml", "--db", str(place / "new.db")))
        assert line.startswith(f"error: {place / 'new.db'}: cannot be created (on a read-only"), line
        assert sorted(os.listdir(place)) == before


def _fill(place: Path, leave: int) -> Path:
    """Fill the file system, then free ``leave`` bytes of it."""
    filler = place / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def _by_config(db: Path, sweep_id: int) -> dict[str, list[str]]:
    conn = sqlite3.connect(db)
    try:
        found: dict[str, list[str]] = {}
        sql = "SELECT config_hash, outcome FROM runs WHERE sweep_id = ? ORDER BY id"
        for config_hash, outcome in conn.execute(sql, (sweep_id,)):
            found.setdefault(config_hash, []).append(outcome)
        return found
    finally:
        conn.close()


@pytest.mark.slow
def test_a_database_on_a_full_file_system_stops_the_run_in_one_line(workdir: Path):
    (workdir / "m.yaml").write_text(MATRIX.lstrip())
    with tmpfs(workdir / "small", "4m") as place:
        db = place / "bench.db"
        runs = workdir / "runs"  # the run folders on the roomy disk: only the database is short of room
        first = bench(workdir, "run", "--matrix", "m.yaml", "--db", str(db), "--runs-dir", str(runs))
        assert first.returncode == 0, first.stderr
        kept = _by_config(db, 1)
        filler = _fill(place, 96 * 1024)
        stopped = bench(workdir, "run", "--matrix", "m.yaml", "--db", str(db), "--runs-dir", str(runs))
        line = one_error_line(stopped)
        # the runs went on into their folders (the first record), and the database's refusal
        # left them pending: one line saying the file system is full, where the records wait
        assert line.startswith("error: "), line
        assert f"{db}: the file system is full" in line, line
        assert str(runs) in line, line
        filler.unlink()
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        assert _by_config(db, 1) == kept  # the earlier sweep, every row of it
        partial = _by_config(db, 2)
        assert sum(outcomes.count("ok") for outcomes in partial.values()) < 6  # the fill struck
        resumed = bench(
            workdir, "run", "--matrix", "m.yaml", "--db", str(db), "--runs-dir", str(runs), "--resume"
        )
        assert resumed.returncode == 0, resumed.stderr
        done = _by_config(db, 2)
        assert sorted(done) == sorted(kept)  # every configuration of the matrix
        assert all(outcomes.count("ok") == 1 for outcomes in done.values()), done  # none ran twice

"""A sweep's calibration (profiler/calibration.py, orchestrator/launch/calibration.py,
orchestrator/report/notes/calibration.py): the same fixed work timed before the first run and after the
last, recorded, and read back by the reports to say whether two sweeps' machine ran at the same
speed. The calibration process is real; the reports' cross-sweep verdicts are also tested over
rows written as another machine's bench would have left them (a shared database)."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from orchestrator.launch import calibration
from profiler.calibration import figure
from tests import dbs

MATRIX = """
name: calibrated
settings: {framework: fault, fault: ok}
axes:
  batch_size: [1]
"""


def test_a_calibration_is_three_positive_figures_in_about_a_second():
    figures = calibration.take()
    assert "error" not in figures, figures
    for key in calibration.FIGURES:
        assert figure(figures[key]) == figures[key]
    assert 0 < figures["seconds"] < 30  # docs/profiler.md has the measured time
    assert 0 <= figures["other_cpu_percent"] <= 100  # what else ran meanwhile
    assert "Mops/s" in calibration.describe(figures)


@pytest.mark.parametrize(
    "output,why",
    [
        ("", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"python_mops": 1, "matmul_gflops": 2}', "no usable memory_gbps"),
        ('{"python_mops": "fast", "matmul_gflops": 2, "memory_gbps": 3}', "no usable python_mops"),
        ('{"python_mops": true, "matmul_gflops": 2, "memory_gbps": 3}', "no usable python_mops"),
        ('{"python_mops": 1, "matmul_gflops": -2, "memory_gbps": 3}', "no usable matmul_gflops"),
        ('{"python_mops": 1, "matmul_gflops": NaN, "memory_gbps": 3}', "no usable matmul_gflops"),
        ('{"python_mops": 1, "matmul_gflops": 2, "memory_gbps": 1e300}', "no usable memory_gbps"),
        ("\x1b[2J" + "[" * 100_000, "not JSON"),
    ],
)
def test_an_unusable_output_is_an_error_with_why_never_a_crash(output, why):
    got = calibration.parse(output)
    assert set(got) == {"error"} and why in got["error"]
    assert "\x1b" not in got["error"]


def test_a_calibration_past_its_time_limit_is_an_error():
    assert "longer than" in calibration.take(timeout=0.001)["error"]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str, on: bool = True) -> tuple[str, str]:
    monkeypatch.setenv("BENCH_CALIBRATE", "1" if on else "0")
    (tmp_path / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(tmp_path / "m.yaml"), "--db", db, *extra])
    assert result.exit_code == 0, result.output
    return db, result.output


@pytest.mark.quiet  # real calibrations: beside another test they are left out
def test_a_sweep_is_calibrated_before_its_first_run_and_after_its_last(tmp_path, monkeypatch):
    db, output = _run(tmp_path, monkeypatch)
    rows = dbs.query(db, "SELECT * FROM calibrations ORDER BY id")
    assert [r["at"] for r in rows] == ["start", "end"] and {r["sweep_id"] for r in rows} == {1}
    runs = dbs.query(db, "SELECT started_at, ended_at FROM runs ORDER BY id")
    assert rows[0]["taken_at"] <= runs[0]["started_at"] and rows[1]["taken_at"] >= runs[-1]["ended_at"]
    for r in rows:
        assert r["error"] is None and r["python_mops"] > 0 and r["matmul_gflops"] > 0 and r["memory_gbps"] > 0
        assert r["machine"] == dbs.query(db, "SELECT machine FROM sweeps")[0]["machine"]
    assert "calibration at the start: python" in output and "calibration at the end: python" in output
    text = CliRunner().invoke(bench_cli, ["report", "--db", db]).output
    assert "calibration, sweep 1 (2 taken, one thread): python" in text


def test_no_calibrate_and_a_resume_with_nothing_to_run_take_none(tmp_path, monkeypatch):
    db, output = _run(tmp_path, monkeypatch, "--no-calibrate")
    assert "calibration" not in output and dbs.query(db, "SELECT * FROM calibrations") == []
    db, output = _run(tmp_path, monkeypatch, "--resume")
    assert "calibration" not in output and dbs.query(db, "SELECT * FROM calibrations") == []


def _calibrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figures: list[list[tuple[float, ...]]]
) -> str:
    """A database of len(figures) sweeps whose calibrations hold the given (python, matmul,
    memory) figures, as a bench elsewhere would have written them."""
    monkeypatch.setenv("BENCH_CALIBRATE", "0")
    (tmp_path / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    db = str(tmp_path / "r.db")
    for sweep, taken in enumerate(figures, start=1):
        result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(tmp_path / "m.yaml"), "--db", db])
        assert result.exit_code == 0, result.output
        for at, (python, matmul, memory) in zip(("start", "end", "start", "end"), taken, strict=False):
            dbs.execute(
                db,
                "INSERT INTO calibrations (sweep_id, at, taken_at, python_mops, matmul_gflops, memory_gbps) "
                "VALUES (:s, :at, '2026-11-26T00:00:00+00:00', :p, :m, :b)",
                s=sweep,
                at=at,
                p=python,
                m=matmul,
                b=memory,
            )
    return db


def _report(db: str, *args: str) -> str:
    result = CliRunner().invoke(bench_cli, ["report", *args, "--db", db], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


# The 2-vCPU machine's figures on two days whose ResNet50 steps were 11.1 s and 5.5 s are not on
# record (the calibration came after); these are of that shape: everything twice as fast.
SLOW, FAST = (9.0, 35.0, 9.0), (18.0, 70.0, 18.0)


def test_two_sweeps_at_different_speeds_are_told_apart(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[SLOW, SLOW], [FAST, FAST]])
    text = _report(db, "--table", "comparison", "--sweep", "all")
    assert (
        "! sweep 2 against sweep 1, calibration speed ×2.00 (python ×2.00, matmul ×2.00, memory ×2.00)"
        in text
    )
    assert "do not set their figures side by side" in text
    compare = _report(db, "--compare", "1", "2")
    assert "! sweep 2 against sweep 1" in compare
    notes = json.loads(_report(db, "--compare", "1", "2", "--format", "json"))["notes"]
    assert any(n.startswith("! sweep 2 against sweep 1") for n in notes)


def test_two_sweeps_at_the_same_speed_say_so(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[FAST, FAST], [(18.5, 68.0, 17.5), FAST]])
    text = _report(db, "--table", "comparison", "--sweep", "all")
    assert (
        "sweep 2 against sweep 1, calibration speed ×1.00 (python ×1.01, matmul ×0.99, memory ×0.99): "
        "the same speed" in text
    )
    assert "!" not in text.split("sweep 2 against sweep 1")[1].splitlines()[0]


def test_a_speed_change_within_a_sweep_is_flagged(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[FAST, SLOW]])
    text = _report(db)
    assert "calibration, sweep 1 (2 taken, one thread): python 9.0–18.0 Mops/s" in text
    assert "! the machine's speed changed within this sweep (speed 100 % apart)" in text
    (tmp_path / "b").mkdir()
    db = _calibrated(tmp_path / "b", monkeypatch, [[FAST, (17.5, 71.0, 18.2)]])
    assert "steady (speed within 35 %)" in _report(db)


def test_a_calibration_with_an_error_is_left_out(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[FAST], [SLOW]])
    dbs.execute(
        db,
        "INSERT INTO calibrations (sweep_id, at, taken_at, error) "
        "VALUES (2, 'end', 'now', 'it took longer than 60 s')",
    )
    dbs.execute(db, "UPDATE calibrations SET python_mops = NULL WHERE sweep_id = 2 AND at = 'start'")
    text = _report(db, "--table", "comparison", "--sweep", "all")
    assert "calibration, sweep 1 (1 taken" in text and "sweep 2" not in text.split("calibration, sweep 1")[1]


def test_a_calibration_row_of_the_wrong_type_is_the_one_line_database_error(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[FAST], [SLOW]])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE calibrations SET matmul_gflops = 'x\x1b[2J' WHERE sweep_id = 2")
    conn.commit()
    conn.close()
    result = CliRunner().invoke(bench_cli, ["report", "--table", "comparison", "--sweep", "all", "--db", db])
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "table calibrations: matmul_gflops: expected a number" in line and "\x1b" not in line


def test_a_version_10_database_is_upgraded_with_the_calibrations_table(tmp_path, monkeypatch):
    from orchestrator.storage.db import Database, schema_version

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v10.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
        " VALUES ('calibrated', 'now', 'finished', 1, 'h', 'm', '0', 'bench run')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 11
    assert conn.execute("SELECT count(*) FROM calibrations").fetchone()[0] == 0
    assert conn.execute("SELECT name FROM sweeps").fetchall() == [("calibrated",)]
    conn.close()
    # and a sweep resumed into it is calibrated there
    monkeypatch.setenv("BENCH_CALIBRATE", "1")
    (tmp_path / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    result = CliRunner().invoke(
        bench_cli, ["run", "--matrix", str(tmp_path / "m.yaml"), "--db", str(old), "--resume"]
    )
    assert result.exit_code == 0, result.output
    assert [r["at"] for r in dbs.query(str(old), "SELECT at FROM calibrations WHERE sweep_id = 1")] == [
        "start",
        "end",
    ]


def test_one_noisy_figure_alone_is_not_another_speed(tmp_path, monkeypatch):
    """The Python loop's figure moves by a third from one process to the next on the quiet machine
    (docs/performance.md): alone, it does not make a verdict; the speed (their geometric mean) does."""
    db = _calibrated(tmp_path, monkeypatch, [[FAST, FAST], [(12.0, 70.0, 18.0), (12.0, 70.0, 18.0)]])
    text = _report(db, "--compare", "1", "2")
    assert "calibration speed ×0.87 (python ×0.67, matmul ×1.00, memory ×1.00): the same speed" in text


def test_the_html_page_carries_the_calibration_notes(tmp_path, monkeypatch):
    db = _calibrated(tmp_path, monkeypatch, [[SLOW], [FAST]])
    _report(db, "--html", str(tmp_path / "site"), "--sweep", "all")
    page = next((tmp_path / "site").glob("*.html")).read_text()
    assert "! sweep 2 against sweep 1, calibration speed ×2.00" in page


def test_a_calibration_beside_other_load_is_said_and_left_out(tmp_path, monkeypatch):
    busy = {"python_mops": 10.0, "matmul_gflops": 50.0, "memory_gbps": 10.0, "other_cpu_percent": 48.0}
    assert "beside other load (48% of the CPUs): not the machine's speed, left out" in calibration.describe(
        busy
    )
    db = _calibrated(tmp_path, monkeypatch, [[FAST, FAST]])
    dbs.execute(db, "UPDATE calibrations SET python_mops = 9, other_cpu_percent = 48 WHERE at = 'end'")
    assert "calibration, sweep 1 (1 taken, one thread): python 18.0 Mops/s" in _report(db)


def test_a_stop_during_the_first_calibration_ends_the_sweep_interrupted(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, which bench turns into the same) while the start calibration runs: no
    run, no calibration row, the sweep `interrupted` and exit 130, as a stop during a run."""
    from orchestrator.sweep import session

    def stopped(timeout: float = 60.0) -> dict:
        raise KeyboardInterrupt

    monkeypatch.setattr(session.calibration, "take", stopped)
    monkeypatch.setenv("BENCH_CALIBRATE", "1")
    (tmp_path / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(tmp_path / "m.yaml"), "--db", db])
    assert result.exit_code == 130, result.output
    assert "calibration at the start: stopped (Ctrl-C)" in result.output
    assert dbs.query(db, "SELECT status FROM sweeps") == [{"status": "interrupted"}]
    assert dbs.query(db, "SELECT * FROM runs") == [] and dbs.query(db, "SELECT * FROM calibrations") == []


# --- bench calibrate: the check before resuming a sweep, or before setting a new one beside it ---


def _calibrate(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(bench_cli, ["calibrate", *args], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.quiet  # real calibrations: beside another test they are left out
def test_bench_calibrate_takes_real_calibrations_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, output = _calibrate(tmp_path, "--count", "2")
    assert code == 0, output
    lines = output.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "calibration 1/2",
        "calibration 2/2",
        "nothing to compare with",
    ]
    assert "Mops/s" in lines[0] and "GFLOP/s" in lines[1] and "bench.db" in lines[2]
    assert list(tmp_path.iterdir()) == []  # no database made


def _figures(*values: tuple[float, float, float], other: float = 0.0):
    """A stand-in for calibration.take: the figures given, one per call (bench calibrate's wiring;
    the real process is the test above's)."""
    queue = [
        {"python_mops": p, "matmul_gflops": m, "memory_gbps": b, "seconds": 1.0, "other_cpu_percent": other}
        for p, m, b in values
    ]

    def take(timeout: float = 60.0) -> dict:
        return queue.pop(0)

    return take


def test_bench_calibrate_says_whether_the_machine_runs_at_a_recorded_sweeps_speed(tmp_path, monkeypatch):
    from orchestrator.cli import calibrate

    db = _calibrated(tmp_path, monkeypatch, [[SLOW, SLOW], [FAST, FAST]])
    before = Path(db).read_bytes()
    monkeypatch.setattr(calibrate.take_calibration, "take", _figures(FAST, (17.0, 71.0, 18.5), FAST))
    code, output = _calibrate(tmp_path, "--db", db)
    assert code == 0, output
    assert output.strip().splitlines()[-1] == (
        "now against sweep 2 (2 taken), calibration speed ×1.00 (python ×1.00, matmul ×1.00, memory ×1.00): "
        "the same speed"
    )  # the last calibrated sweep, against the median of the three taken now
    monkeypatch.setattr(calibrate.take_calibration, "take", _figures(FAST))
    code, output = _calibrate(tmp_path, "--db", db, "--sweep", "1", "--count", "1")
    assert code == 0, output
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith(
            "! now against sweep 1 (2 taken), calibration speed ×2.00 (python ×2.00, matmul ×2.00, "
            "memory ×2.00): the machine ran at another speed"
        )
    )
    assert Path(db).read_bytes() == before  # nothing written


def test_bench_calibrate_leaves_out_a_busy_or_failed_calibration_and_says_when_none_is_left(
    tmp_path, monkeypatch
):
    from orchestrator.cli import calibrate

    db = _calibrated(tmp_path, monkeypatch, [[FAST]])
    busy = _figures(SLOW, SLOW, other=48.0)
    monkeypatch.setattr(calibrate.take_calibration, "take", busy)
    code, output = _calibrate(tmp_path, "--db", db, "--count", "2")
    assert code == 1 and "Traceback" not in output
    assert output.count("beside other load (48% of the CPUs)") == 2
    assert output.strip().splitlines()[-1] == (
        "error: no calibration of the 2 taken is usable (each had an error or ran beside other load): "
        "no verdict"
    )
    failed = iter(
        [
            {"error": "it took longer than 60 s\x1b[2J"},
            {"python_mops": 18.0, "matmul_gflops": 70.0, "memory_gbps": 18.0},
        ]
    )
    monkeypatch.setattr(calibrate.take_calibration, "take", lambda timeout=60.0: next(failed))
    code, output = _calibrate(tmp_path, "--db", db, "--count", "2")
    assert code == 0 and "\x1b" not in output
    assert "calibration 1/2: error: it took longer than 60 s" in output
    assert output.strip().splitlines()[-1].endswith("the same speed")


def test_bench_calibrate_against_a_sweep_without_calibrations_or_a_missing_database_is_one_line(
    tmp_path, monkeypatch
):
    from orchestrator.cli import calibrate

    db = _calibrated(tmp_path, monkeypatch, [[FAST], []])
    for args, message in [
        (["--db", db, "--sweep", "2"], f"error: {db}: sweep 2 has a usable calibration"),
        (["--db", db, "--sweep", "9"], f"error: {db}: sweep 9 has a usable calibration"),
        (["--db", str(tmp_path / "none.db"), "--sweep", "1"], "error: no database at"),
        (["--db", db, "--sweep", "x\x1b"], "error: "),
    ]:
        monkeypatch.setattr(calibrate.take_calibration, "take", _figures(FAST))
        code, output = _calibrate(tmp_path, "--count", "1", *args)
        assert code == 1 and "Traceback" not in output and "\x1b" not in output, output
        assert output.strip().splitlines()[-1].startswith(message), output
    dbs.execute(db, "DELETE FROM calibrations")
    monkeypatch.setattr(calibrate.take_calibration, "take", _figures(FAST))
    code, output = _calibrate(tmp_path, "--count", "1", "--db", db)
    assert (
        code == 1
        and output.strip().splitlines()[-1]
        == f"error: {db}: no sweep has a usable calibration (bench run takes one unless --no-calibrate)"
    )

"""Every outcome, driven through the fault worker and the real orchestrator, process boundary
and worker core; the sweep goes on after each failure and every run is a row with its evidence."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from tests.dbs import unfolded

pytestmark = pytest.mark.slow

FAULTS = """
name: faults
settings:
  dataset_size: 64
  batch_size: 8
  epochs: 2
  timeout: 4
include:
  - {framework: fault, fault: ok}
  - {framework: fault, fault: raise, after_steps: 5}
  - {framework: fault, fault: ok, seed: 1}
  - {framework: fault, fault: segfault, after_steps: 4}
  - {framework: fault, fault: abort}
  - {framework: fault, fault: exit, exit_code: 7, after_steps: 1}
  - {framework: fault, fault: exit, exit_code: 0}
  - {framework: fault, fault: hang, after_steps: 3}
  - {framework: fault, fault: hang, ignore_sigterm: true, timeout: 2}
  - {framework: fault, fault: oom}
  - {framework: fault, fault: garbage}
  - {framework: fault, fault: no_result}
  - {framework: fault, fault: sleep, seconds: 1.0, after_steps: 2}
  - {framework: fault, fault: unsupported}
  - {framework: fault, fault: unavailable}
  - {framework: fault, fault: ok, seed: 2}
"""


def runs(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [unfolded(dict(r)) for r in conn.execute("SELECT * FROM runs ORDER BY id")]
    conn.close()
    return rows


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def fault_sweep(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    path = tmp_path_factory.mktemp("faults")
    (path / "m.yaml").write_text(FAULTS)
    cwd = os.getcwd()
    os.chdir(path)
    try:
        result = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return runs(path / "bench.db")


def by_fault(rows: list[dict], fault: str, **match) -> dict:
    found = [r for r in rows if r["fault"] == fault and all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (fault, match)
    return found[0]


def test_one_row_per_configuration_in_order(fault_sweep):
    assert len(fault_sweep) == 16
    assert [r["outcome"] for r in fault_sweep][:3] == ["ok", "error", "ok"]
    assert fault_sweep[-1]["outcome"] == "ok"


def test_ok_has_epochs_and_timings(fault_sweep):
    row = by_fault(fault_sweep, "ok", seed=0)
    assert row["outcome"] == "ok" and row["exit_code"] == 0
    assert row["median_epoch_seconds"] > 0 and row["images_per_second"] > 0
    assert row["steps_per_epoch"] == 51 // 8
    db = Path(row["run_dir"]).parent.parent.parent / "bench.db"
    epochs = sqlite3.connect(db).execute("SELECT epoch FROM epochs WHERE run_id = ?", (row["id"],)).fetchall()
    assert sorted(e[0] for e in epochs) == [1, 2]


def test_raise_is_error_with_traceback(fault_sweep):
    row = by_fault(fault_sweep, "raise")
    assert row["outcome"] == "error"
    assert row["exception_type"] == "RuntimeError"
    assert "raised on purpose after 5 steps" in row["exception_message"]
    assert "fault.py" in row["traceback"]
    # 2 warm-up steps + 3 steps of epoch 1 completed before the fault struck
    assert (row["last_phase"], row["last_epoch"], row["last_step"]) == ("epoch", 1, 3)


def test_segfault_is_crash_with_signal_and_python_traceback(fault_sweep):
    row = by_fault(fault_sweep, "segfault")
    assert row["outcome"] == "crash"
    assert (row["signal_number"], row["signal_name"]) == (11, "SIGSEGV")
    assert "Fatal Python error: Segmentation fault" in row["traceback"]
    assert "_segfault" in row["traceback"]
    assert (row["last_epoch"], row["last_step"]) == (1, 2)


def test_abort_is_crash_sigabrt(fault_sweep):
    row = by_fault(fault_sweep, "abort")
    assert (row["outcome"], row["signal_name"]) == ("crash", "SIGABRT")
    assert row["last_phase"] == "import"


def test_exit_codes(fault_sweep):
    seven = by_fault(fault_sweep, "exit", exit_code_setting=7)
    assert (seven["outcome"], seven["exit_code"]) == ("error", 7)
    zero = by_fault(fault_sweep, "exit", exit_code_setting=0)
    assert zero["outcome"] == "invalid" and "no result" in zero["reason"]


def test_hang_times_out_and_its_children_die(fault_sweep):
    row = by_fault(fault_sweep, "hang", ignore_sigterm=None)
    assert row["outcome"] == "timeout"
    assert 4 <= row["wall_seconds"] < 4 + 6
    # SIGTERM makes faulthandler show where the run was stuck
    assert "_hang" in row["traceback"]
    events = [json.loads(line) for line in (Path(row["run_dir"]) / "events.jsonl").read_text().splitlines()]
    child = next(e["pid"] for e in events if e["event"] == "child")
    assert not pid_alive(child)


def test_hang_ignoring_sigterm_is_killed(fault_sweep):
    row = by_fault(fault_sweep, "hang", ignore_sigterm=1)
    assert row["outcome"] == "timeout"
    assert row["exit_code"] == -9  # TERM was ignored; KILL after the grace period
    assert row["wall_seconds"] >= 2 + 4


def test_oom_is_recorded_as_oom(fault_sweep):
    row = by_fault(fault_sweep, "oom")
    assert row["outcome"] == "oom"
    assert row["exception_type"] == "MemoryError"


def test_malformed_or_missing_result_is_invalid(fault_sweep):
    assert by_fault(fault_sweep, "garbage")["outcome"] == "invalid"
    assert "malformed" in by_fault(fault_sweep, "garbage")["reason"]
    assert by_fault(fault_sweep, "no_result")["outcome"] == "invalid"


def test_sleep_then_ok(fault_sweep):
    row = by_fault(fault_sweep, "sleep")
    assert row["outcome"] == "ok" and row["wall_seconds"] >= 1.0
    assert row["max_epoch_seconds"] >= 1.0  # it slept inside the timed epoch


def test_deliberate_unsupported_and_unavailable(fault_sweep):
    assert by_fault(fault_sweep, "unsupported")["outcome"] == "unsupported"
    row = by_fault(fault_sweep, "unavailable")
    assert row["outcome"] == "unavailable" and "on purpose" in row["reason"]


def test_every_row_has_evidence_and_a_way_back(fault_sweep):
    for row in fault_sweep:
        assert Path(row["run_dir"], "spec.json").exists()
        assert Path(row["run_dir"], "stderr.log").exists()
        assert row["reproduce"].startswith(f"bench rerun {row['id']}")
        assert "-m workers --spec spec.json" in row["worker_command"]
        assert row["last_event"] is not None


def test_missing_environment_is_unavailable_and_the_sweep_goes_on(write_matrix, cli, monkeypatch, workdir):
    monkeypatch.setenv("BENCH_PYTHON_PYTORCH", str(workdir / "no-such-python"))
    write_matrix("""
        include:
          - {framework: pytorch, model: small_cnn}
          - {framework: fault}
    """)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    rows = runs(workdir / "bench.db")
    assert [r["outcome"] for r in rows] == ["unavailable", "ok"]
    assert "no-such-python does not exist" in rows[0]["reason"]


def test_fail_on(write_matrix, cli, workdir):
    write_matrix("""
        include:
          - {framework: fault, fault: abort}
          - {framework: fault}
    """)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    result = cli("run", "--matrix", "m.yaml", "--fail-on", "crash,oom")
    assert result.exit_code == 1
    assert len(runs(workdir / "bench.db")) == 4


def test_report_and_crash_report(fault_sweep, tmp_path):
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    db = str(Path(fault_sweep[0]["run_dir"]).parent.parent.parent / "bench.db")
    out = CliRunner().invoke(cli, ["report", "--db", db, "--format", "json"]).output
    data = json.loads(out)
    assert len(data["runs"]) == 16
    crashes = CliRunner().invoke(cli, ["report", "--db", db, "--crashes"]).output
    assert "SIGSEGV" in crashes and "SIGABRT" in crashes
    assert "fault:ok" not in crashes
    md = CliRunner().invoke(cli, ["report", "--db", db, "--format", "markdown"]).output
    assert md.splitlines()[0].startswith("| run | framework |")
    csv_out = CliRunner().invoke(cli, ["report", "--db", db, "--format", "csv"]).output
    assert len(csv_out.strip().splitlines()) == 17


def test_inspect_shows_the_post_mortem(fault_sweep):
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    row = by_fault(fault_sweep, "segfault")
    db = str(Path(row["run_dir"]).parent.parent.parent / "bench.db")
    out = CliRunner().invoke(cli, ["inspect", str(row["id"]), "--db", db]).output
    for text in (
        "crash",
        "SIGSEGV",
        "epoch 1 after step 2",
        "Fatal Python error",
        row["run_dir"],
        f"bench rerun {row['id']}",
        "python_version",
    ):
        assert text in out, text


def test_rerun_runs_the_configuration_again(fault_sweep, tmp_path):
    from click.testing import CliRunner

    from orchestrator.cli.main import cli

    row = by_fault(fault_sweep, "raise")
    db = str(Path(row["run_dir"]).parent.parent.parent / "bench.db")
    started = time.time()
    result = CliRunner().invoke(cli, ["rerun", str(row["id"]), "--db", db])
    assert result.exit_code == 0, result.output
    assert "this time error" in result.output
    assert "raised on purpose" in result.output  # the worker's stderr, shown in the foreground
    new = runs(Path(db))[-1]
    assert new["config_hash"] == row["config_hash"] and new["sweep_id"] != row["sweep_id"]
    assert time.time() - started < 30

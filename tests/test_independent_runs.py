"""Independent runs of a configuration (`runs: N`, issue 41): N worker processes, each its own row,
in interleaved rounds shuffled by the sweep's recorded seed; --resume runs only the runs missing;
reports pool a configuration's runs as one cell."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.sweep import order

THREE = """
name: thrice
settings: {dataset_size: 32, batch_size: 8, epochs: 1, warmup_steps: 0, runs: 3}
axes:
  framework: [fault]
  seed: [1, 2]
"""


def query(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


def test_runs_is_not_part_of_a_configurations_identity():
    assert RunConfig(runs=5).config_hash == RunConfig().config_hash
    assert RunConfig(runs=5).to_dict()["runs"] == 5


def test_each_run_is_a_process_and_a_row_in_interleaved_rounds(cli, write_matrix, workdir):
    write_matrix(THREE)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    assert "sweep 1: 6 ok" in result.output
    sql = "SELECT config_hash, run_index, planned_runs, run_dir FROM runs ORDER BY id"
    rows = query(workdir / "bench.db", sql)
    assert len(rows) == 6 and {r[2] for r in rows} == {3}
    assert [r[1] for r in rows] == [0, 0, 1, 1, 2, 2]  # round k of both before round k+1 of either
    assert len({r[3] for r in rows}) == 6 and all(r[3].endswith(f"-run{r[1] + 1}") for r in rows)
    pids = {json.loads((Path(r[3]) / "events.jsonl").read_text().splitlines()[0])["pid"] for r in rows}
    assert len(pids) == 6  # six worker processes
    ((seed,),) = query(workdir / "bench.db", "SELECT order_seed FROM sweeps")
    configs = {h: h for h, *_ in rows}
    expected = order.interleaved(sorted(configs), lambda _c: 3, str, seed)
    # The recorded seed reproduces the order (the hashes stand in for the configurations: the
    # shuffle depends on the keys' order in the matrix, which sorted() need not keep; compare as
    # rounds).
    by_round = [sorted(h for h, k, *_ in rows if k == r) for r in range(3)]
    assert by_round == [sorted(s.config for s in expected if s.run == r) for r in range(3)]


def test_resume_runs_only_the_missing_runs(cli, write_matrix, workdir):
    write_matrix(THREE)
    assert cli("run", "--matrix", "m.yaml", "--only", "seed=1").exit_code == 0
    db = workdir / "bench.db"
    # A run that never finished (as a killed bench leaves it) counts as missing.
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET outcome = 'interrupted' WHERE run_index = 1")
    conn.commit()
    conn.close()
    dry = cli("run", "--matrix", "m.yaml", "--resume", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "2 of 3 runs finished" in dry.output and "6 runs in all (runs), 4 to run" in dry.output
    result = cli("run", "--matrix", "m.yaml", "--resume")
    assert result.exit_code == 0, result.output
    assert "4 ok" in result.output and "2 already finished" in result.output
    ok = query(db, "SELECT seed, run_index FROM runs WHERE outcome = 'ok' ORDER BY seed, run_index")
    assert ok == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]


def test_the_report_pools_a_configurations_runs_as_one_cell(cli, write_matrix, workdir):
    write_matrix(THREE)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    out = cli("report", "--table", "comparison", "--format", "json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["rows"]
    assert len(rows) == 2 and all(r["runs"] == 3 and r["ok_runs"] == 3 and r["n"] == 3 for r in rows)
    for r in rows:
        assert r["seconds_per_image_low"] <= r["seconds_per_image_median"] <= r["seconds_per_image_high"]


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many", "1001"])
def test_a_bad_runs_value_names_file_line_and_key(write_matrix, cli, value):
    write_matrix(THREE.replace("runs: 3", f"runs: {value}"))
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1
    assert "m.yaml:2: runs:" in result.output or "m.yaml, line 2" in result.output, result.output


def test_a_hostile_order_seed_in_a_shared_database_is_one_line(cli, write_matrix, workdir):
    write_matrix(THREE)
    assert cli("run", "--matrix", "m.yaml", "--only", "seed=1").exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    conn.execute("UPDATE sweeps SET order_seed = 'x\x1b[2J'")
    conn.commit()
    conn.close()
    before = query(workdir / "bench.db", "SELECT count(*) FROM runs")
    result = cli("run", "--matrix", "m.yaml", "--resume")
    assert result.exit_code == 1 and "order_seed: expected an integer" in result.output
    assert "\x1b" not in result.output
    assert query(workdir / "bench.db", "SELECT count(*) FROM runs") == before


FOUR = THREE.replace("runs: 3", "runs: 4").replace("seed: [1, 2]", "seed: [1]")


def _compare(cli, fmt: str = "json") -> dict:
    result = cli("report", "--compare", "1", "2", "--format", fmt)
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if fmt == "json" else {"text": result.output}


def test_compare_decides_on_runs_with_holm_and_says_what_it_could_detect(cli, write_matrix, workdir):
    write_matrix(FOUR)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    # The stored figures set (the report decides from the rows as stored; the fault worker's own
    # times are too noisy to be told apart reliably): every run of B slower than every run of A,
    # p = 2/C(8,4) = 0.029.
    conn = sqlite3.connect(workdir / "bench.db")
    for sweep, base in ((1, 0.010), (2, 0.020)):
        for k in range(4):
            spi = base + k / 1000
            conn.execute(
                "UPDATE runs SET seconds_per_image = ?, median_epoch_seconds = ? * steps_per_epoch * 8 "
                "WHERE sweep_id = ? AND run_index = ?",
                (spi, spi, sweep, k),
            )
    conn.commit()
    conn.close()
    (row,) = _compare(cli)["rows"]
    assert row["verdict"] == "slower" and row["n"] == "4"
    assert row["p_value"] == pytest.approx(2 / 70) and "Holm" in row["method"]
    assert 1.5 < row["ratio_low"] <= row["ratio_high"] < 2.4
    text = _compare(cli, "table")["text"]
    assert "Mann-Whitney" in text and "holm correction over 1 comparisons" in text.lower()


def test_compare_of_three_runs_a_side_cannot_call_a_difference(cli, write_matrix, workdir):
    write_matrix(THREE.replace("seed: [1, 2]", "seed: [1]"))
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    (row,) = _compare(cli)["rows"]
    assert row["verdict"] == "no difference detected at n=3" and row["detectable"] is None


def test_a_hostile_stored_figure_is_refused_in_one_line(cli, write_matrix, workdir):
    write_matrix(THREE)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    conn.execute("UPDATE runs SET seconds_per_image = -1 WHERE id = 2")
    conn.commit()
    conn.close()
    from click.testing import CliRunner

    from orchestrator.cli.main import cli as bench_cli

    result = CliRunner().invoke(bench_cli, ["report", "--table", "comparison"])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and result.output.startswith("error:"), result.output


def test_the_planner_says_how_many_runs_from_the_spread_of_earlier_runs(cli, write_matrix, workdir):
    write_matrix(THREE)
    fresh = cli("run", "--matrix", "m.yaml", "--dry-run", "--detect", "5%")
    assert fresh.exit_code == 0, fresh.output
    assert "unknown, no earlier cell of two runs or more" in fresh.output
    assert not (workdir / "bench.db").exists()  # a dry run creates no database
    assert cli("run", "--matrix", "m.yaml", "--only", "seed=1").exit_code == 0
    # 50 %: the fault worker's tiny runs may spread widely on a busy machine; the plan stays finite.
    planned = cli("run", "--matrix", "m.yaml", "--dry-run", "--detect", "50")
    assert planned.exit_code == 0, planned.output
    assert "runs needed" in planned.output and "over 1 cells of this configuration" in planned.output
    # seed=2 never ran: its plan comes from the same framework, model and device.
    assert "over 1 cells of fault small_cnn cpu" in planned.output
    table = [line for line in planned.output.splitlines() if re.match(r"\d+ +[0-9a-f]{16} ", line)]
    needed = [line.split()[-1] for line in table]
    assert len(needed) == 2 and all(n.isdigit() and int(n) >= 4 for n in needed), planned.output


@pytest.mark.parametrize("value", ["0", "x", "-5%", "nan"])
def test_a_bad_detect_is_one_line(cli, write_matrix, value):
    write_matrix(THREE)
    result = cli("run", "--matrix", "m.yaml", "--dry-run", "--detect", value)
    assert result.exit_code == 1 and "--detect" in result.output and result.output.count("\n") == 1


def test_the_batch_and_modes_tables_carry_the_interval_over_runs(cli, write_matrix, workdir):
    write_matrix(THREE)
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    for name in ("batch", "modes"):
        text = cli("report", "--table", name).output
        assert "ms/image 95 % over runs" in text and "(n=3)" in text, text
        (record, *_) = json.loads(cli("report", "--table", name, "--format", "json").output)["rows"]
        assert record["n"] == 3 and record["seconds_per_image_low"] <= record["seconds_per_image_high"]


def test_the_note_on_single_run_cells_names_a_few_and_counts_the_rest():
    from orchestrator.report.notes import ranking

    rows = []
    for model in ("small_cnn", "alexnet", "resnet50", "vgg16", "mobilenet_v2"):
        for framework in ("pytorch", "tensorflow"):
            row = RunConfig(framework=framework, model=model).to_dict()
            row.update(ok_runs=1, seconds_per_image_median=0.01, n=1, run_figures=[0.01])
            rows.append(row)
    notes = ranking.rank(rows, lambda r: r["model"])
    (note,) = notes
    named = note.split(" rest on ")[0]
    assert named.startswith("not ranked: ") and named.endswith("and 4 more cells") and named.count(", ") == 5
    assert all("rank" not in r for r in rows)


def test_a_plan_past_the_planners_limit_says_more_than_rather_than_failing():
    from orchestrator.cli.dry_run import listing
    from orchestrator.report.query import spread

    cells = spread.Cells({}, {}, [[0.01, 1.0], [0.02, 3.0]])  # a spread no run count can beat
    plan = spread.plan_lines([RunConfig()], cells, 0.01)
    assert plan[0] == [10_001]
    assert any(line.rstrip().endswith("> 10,000") for line in listing([RunConfig()], {}, plan))

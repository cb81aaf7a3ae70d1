"""`bench report --table modes` and the rule that no report pools runs of different execution modes
or precisions (issue 24).

The runs are written to a real SQLite file by bench's own recording code (recording.store_run),
from configurations loaded from a real matrix, with epoch times chosen to give known speed-ups;
what the worker records of what ran (schema 7's resolved_mode, compile_seconds, ...) is then set
in the rows, as a worker of this version leaves it, or left NULL, as a run recorded before schema 7
has it. The tables are read back through the real CLI.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from orchestrator.config.matrix import load_matrix
from orchestrator.launch.outcomes import Outcome
from orchestrator.launch.run_record import RunRecord, now
from orchestrator.storage.db import Database
from orchestrator.sweep import recording
from profiler.kernels import classify, data_type
from workers.execution import DEFAULT_MODES

MATRIX = """
name: modes
settings: {dataset_size: 120, batch_size: 32, image_size: 32, classes: 10, threads: 2, epochs: 3}
axes:
  framework: [pytorch, tensorflow, jax]
  mode: [eager, graph, compiled]
  precision: [fp32, bf16]
"""
# The frameworks' defaults (mode unset), fp32: how every sweep before issue 24 ran.
DEFAULTS = """
name: defaults
settings: {dataset_size: 120, batch_size: 32, image_size: 32, classes: 10, threads: 2, epochs: 3}
axes:
  framework: [pytorch, tensorflow]
"""
IMAGES = 96  # 3 steps of 32 an epoch
BATCH = 32
# ms per image trained, by framework, mode, precision: speed-ups are ratios of these.
MS = {
    ("pytorch", "eager", "fp32"): 2.0,
    ("pytorch", "graph", "fp32"): 1.6,
    ("pytorch", "compiled", "fp32"): 1.25,
    ("pytorch", "eager", "bf16"): 4.0,
    ("pytorch", "compiled", "bf16"): 2.5,
    ("tensorflow", "graph", "fp32"): 1.0,
    ("tensorflow", "compiled", "fp32"): 0.8,
    ("tensorflow", "graph", "bf16"): 3.0,
    ("tensorflow", "compiled", "bf16"): 2.0,
    ("tensorflow", "eager", "bf16"): 9.0,
    ("jax", "eager", "fp32"): 10.0,
    ("jax", "compiled", "fp32"): 1.0,
    ("jax", "eager", "bf16"): 12.0,
    ("jax", "compiled", "bf16"): 1.5,
}
UNSUPPORTED = "mode 'graph' is not available in JAX: jax.jit compiles with XLA, there is no graph without it"
# Cells that did not run ok: (outcome, reason).
FAILED = {
    ("pytorch", "graph", "bf16"): (
        "unsupported",
        "precision 'bf16' is not available in PyTorch graph mode: no kernel",
    ),
    ("jax", "graph", "fp32"): ("unsupported", UNSUPPORTED),
    ("jax", "graph", "bf16"): ("unsupported", UNSUPPORTED),
    # TensorFlow's eager fp32 failed: its other cells have no baseline, never another framework's.
    ("tensorflow", "eager", "fp32"): ("error", "RuntimeError: eager failed"),
}


def _record(config: Any, ms: float | None, failed: tuple[str, str] | None) -> RunRecord:
    epochs = []
    if ms is not None:
        seconds = ms * IMAGES / 1000
        for e in (1, 2, 3):  # three timed epochs, 1% apart: no samples mark
            s = seconds * (1 + 0.01 * (e - 2))
            epochs.append(
                {"repeat": 0, "epoch": e, "seconds": s, "steps": 3, "images": IMAGES}
                | {"images_per_second": IMAGES / s, "seconds_per_image": s / IMAGES}
            )
    outcome = Outcome("ok", result={"status": "ok"}) if failed is None else Outcome(failed[0], failed[1])
    return RunRecord(
        config=config,
        outcome=outcome,
        run_dir=Path("runs") / config.framework,
        started_at=now(),
        ended_at=now(),
        wall_seconds=1.0,
        worker_command="python -m workers --spec spec.json",
        epochs=epochs,
        events=[],
    )


def store(path: Path, matrix_text: str, ran: bool = True) -> int:
    """A sweep of the matrix; with `ran`, each run's row says what it ran, as schema 7's worker does
    (compile seconds for the graph and compiled modes); without, those columns stay NULL."""
    matrix = path.parent / f"m{len(list(path.parent.glob('m*.yaml')))}.yaml"
    matrix.write_text(matrix_text)
    configs = load_matrix(matrix).configs
    db = Database(str(path), create=True)
    sweep = recording.start_sweep(db, "modes", "run", len(configs), str(matrix), None)
    for c in configs:
        mode, precision = c.mode or DEFAULT_MODES[c.framework], c.precision or "fp32"
        key = (c.framework, mode, precision)
        run_id = recording.store_run(db, sweep, _record(c, MS.get(key, 1.0), FAILED.get(key)))
        if ran:
            compile_s = {"eager": 0.0, "graph": 1.5, "compiled": 12.0}[mode]
            sql(
                path,
                "UPDATE runs SET resolved_mode = ?, resolved_precision = ?, compile_seconds = ?, "
                "execution = ? WHERE id = ?",
                mode,
                precision,
                compile_s,
                json.dumps({"how": mode}),
                run_id,
            )
    recording.end_sweep(db, sweep, "completed")
    return sweep


def sql(path: Path, statement: str, *params: Any) -> None:
    conn = sqlite3.connect(path)
    conn.execute(statement, params)
    conn.commit()
    conn.close()


def bench(path: Path, *args: str) -> str:
    result = CliRunner().invoke(bench_cli, ["report", "--db", str(path), *args])
    assert result.exit_code == 0, result.output
    return result.output


def records(path: Path, *args: str) -> list[dict[str, Any]]:
    return json.loads(bench(path, *args, "--format", "json"))["rows"]


def cell(rows: list[dict[str, Any]], framework: str, mode: str, precision: str = "fp32") -> dict[str, Any]:
    (found,) = [
        r
        for r in rows
        if r["framework"] == framework and r["ran_mode"] == mode and r["ran_precision"] == precision
    ]
    return found


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "bench.db"
    store(path, MATRIX)
    return path


# --- the modes table --------------------------------------------------------------------------


def test_every_framework_mode_and_precision_is_one_row(db: Path):
    rows = records(db, "--table", "modes")
    assert len(rows) == 18  # 3 frameworks × 3 modes × 2 precisions, none pooled with another
    assert len({(r["framework"], r["ran_mode"], r["ran_precision"]) for r in rows}) == 18
    eager = cell(rows, "pytorch", "eager")
    assert eager["mode_label"] == "eager" and eager["precision_label"] == "fp32"
    assert eager["step_ms_median"] == pytest.approx(MS[("pytorch", "eager", "fp32")] * BATCH)


def test_the_speedup_is_against_the_same_frameworks_eager_fp32(db: Path):
    rows = records(db, "--table", "modes")
    compiled = cell(rows, "pytorch", "compiled")
    assert compiled["speedup_vs_eager_fp32"] == pytest.approx(2.0 / 1.25)
    assert compiled["baseline_config_hash"] == cell(rows, "pytorch", "eager")["config_hash"]
    assert cell(rows, "pytorch", "compiled", "bf16")["speedup_vs_eager_fp32"] == pytest.approx(2.0 / 2.5)
    assert cell(rows, "jax", "compiled")["speedup_vs_eager_fp32"] == pytest.approx(10.0)
    assert cell(rows, "pytorch", "eager")["speedup_vs_eager_fp32"] == pytest.approx(1.0)
    # TensorFlow's eager fp32 failed: no speed-up, never one against PyTorch's or JAX's eager.
    tensorflow = [r for r in rows if r["framework"] == "tensorflow"]
    assert len(tensorflow) == 6 and all(r["speedup_vs_eager_fp32"] is None for r in tensorflow)


def test_the_printed_table_shows_speedups_compile_seconds_and_reasons(db: Path):
    text = bench(db, "--table", "modes")
    lines = {
        (line.split()[0], line.split()[2], line.split()[3]): line
        for line in text.splitlines()
        if line.startswith(("pytorch", "jax", "tensorflow"))
    }
    assert "×1.60" in lines[("pytorch", "compiled", "fp32")]
    assert "baseline" in lines[("pytorch", "eager", "fp32")]
    assert "12" in lines[("pytorch", "compiled", "fp32")].split("×1.60")[1]  # its compile seconds
    assert "unsupported: mode 'graph' is not available in JAX" in lines[("jax", "graph", "fp32")]
    assert "error: RuntimeError: eager failed" in lines[("tensorflow", "eager", "fp32")]
    assert "×" not in lines[("tensorflow", "compiled", "fp32")]


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_the_modes_table_renders_in_every_format(db: Path, fmt: str):
    text = bench(db, "--table", "modes", "--format", fmt)
    assert "compiled" in text and "speed" in text


def test_where_selects_a_mode(db: Path):
    rows = records(db, "--table", "modes", "--where", "mode=compiled")
    assert {r["ran_mode"] for r in rows} == {"compiled"} and len(rows) == 6
    # one mode: compared with nothing in the selection, so no speed-up
    assert all(r["speedup_vs_eager_fp32"] is None for r in rows)


def test_where_selects_fp32_though_it_is_stored_as_null(db: Path):
    rows = records(db, "--table", "modes", "--where", "precision=fp32")
    assert {r["ran_precision"] for r in rows} == {"fp32"} and len(rows) == 9
    assert len(records(db, "--table", "modes", "--where", "precision=fp32,precision=bf16")) == 18


def test_a_disturbed_cell_is_marked_and_so_is_its_speedup(db: Path):
    sql(
        db,
        "UPDATE runs SET disturbed = 1, other_cpu_percent_mean = 55 WHERE framework = 'pytorch' "
        "AND mode = 'eager' AND precision IS NULL",
    )
    text = bench(db, "--table", "modes")
    line = next(x for x in text.splitlines() if x.startswith("pytorch") and " compiled " in x and "fp32" in x)
    assert "×1.60 !" in line
    assert "! disturbed" in text


# --- runs from before schema 7, defaults and labels ------------------------------------------------


def test_old_runs_show_their_frameworks_default_mode(tmp_path: Path):
    path = tmp_path / "bench.db"
    store(path, DEFAULTS, ran=False)  # resolved_mode NULL: recorded before schema 7
    rows = records(path, "--table", "modes")
    assert {r["framework"]: r["mode_label"] for r in rows} == {
        "pytorch": "eager (default)",
        "tensorflow": "graph (default)",
    }
    assert {r["precision_label"] for r in rows} == {"fp32"}
    assert cell(rows, "pytorch", "eager")["speedup_vs_eager_fp32"] == pytest.approx(1.0)  # unset is eager
    assert all(r["compile_seconds"] is None for r in rows)


def test_an_unset_mode_and_an_explicit_default_are_two_rows_labelled_the_same_mode(db: Path):
    store(db, DEFAULTS)
    rows = records(db, "--table", "modes", "--sweep", "all")
    pytorch_eager = [
        r
        for r in rows
        if r["framework"] == "pytorch" and r["ran_mode"] == "eager" and r["ran_precision"] == "fp32"
    ]
    assert sorted(r["mode_label"] for r in pytorch_eager) == ["eager", "eager (default)"]
    # the explicit one is the baseline
    assert all(
        r["baseline_config_hash"] == next(p["config_hash"] for p in pytorch_eager if p["mode"] == "eager")
        for r in pytorch_eager
    )


# --- the comparison table and --compare refuse to pool ----------------------------------------------


def test_the_comparison_table_says_which_mode_each_cell_ran_and_warns(tmp_path: Path):
    path = tmp_path / "bench.db"
    store(path, DEFAULTS, ran=False)
    text = bench(path, "--table", "comparison")
    assert "eager (default)" in text and "graph (default)" in text
    assert (
        "frameworks compared here ran in different modes (pytorch eager, tensorflow graph): not like" in text
    )
    assert "--table modes" in text and "docs/fairness.md#execution-modes-and-precision" in text


def test_the_comparison_table_keeps_every_mode_and_precision_apart(db: Path):
    rows = records(db, "--table", "comparison")
    assert len(rows) == 18
    text = bench(db, "--table", "comparison", "--format", "markdown")
    table = [line for line in text.splitlines() if line.startswith("| pytorch")]
    assert len(table) == 6  # a row per mode and precision
    assert "precision" in text
    # each mode compared with the same mode only: the frameworks ran alike, no note
    assert "ran in different" not in text


def test_one_configuration_that_ran_two_modes_is_never_pooled(tmp_path: Path):
    """The same configuration (an unset mode) in two sweeps whose runs resolved differently (a
    default changed between them): two cells, and --compare pairs neither with the other."""
    path = tmp_path / "bench.db"
    store(path, DEFAULTS)
    store(path, DEFAULTS)
    sql(path, "UPDATE runs SET resolved_mode = 'compiled' WHERE sweep_id = 2 AND framework = 'pytorch'")
    rows = records(path, "--table", "comparison", "--sweep", "all")
    pytorch = [r for r in rows if r["framework"] == "pytorch"]
    assert sorted(r["ran_mode"] for r in pytorch) == ["compiled", "eager"]
    assert all(r["runs"] == 1 for r in pytorch)
    tensorflow = [r for r in rows if r["framework"] == "tensorflow"]
    assert len(tensorflow) == 1 and tensorflow[0]["runs"] == 2  # pooled: it ran the same
    compared = records(path, "--compare", "1", "2")
    verdicts = sorted(r["verdict"] for r in compared if r["framework"] == "pytorch")
    assert verdicts == ["only in A", "only in B"]
    text = bench(path, "--compare", "1", "2")
    assert "compiled (asked" not in text and "compiled (default)" in text


def test_a_run_that_ran_another_mode_than_it_asked_says_so(db: Path):
    sql(
        db,
        "UPDATE runs SET resolved_mode = 'eager' WHERE framework = 'jax' AND mode = 'compiled' "
        "AND precision IS NULL",
    )
    rows = records(db, "--table", "modes")
    jax = sorted(r["mode_label"] for r in rows if r["framework"] == "jax" and r["ran_precision"] == "fp32")
    assert jax == ["eager", "eager (asked compiled)", "graph"]  # never pooled with the real eager
    assert {r["mode_label"] for r in rows if r["framework"] == "jax"} >= {"eager (asked compiled)"}


# --- hostile rows: a shared database is outside input ----------------------------------------------


# Each on its own run: a configured mode no bench knows, control characters in what ran and in the
# execution JSON, durations that are negative or infinite, a target reached 7 times, an empty mode.
HOSTILE = [
    "UPDATE runs SET mode = 'turbo' WHERE id = 1",
    "UPDATE runs SET resolved_mode = 'tur\x1b[31mbo' WHERE id = 2",
    "UPDATE runs SET resolved_precision = 'fp8\x07' || char(10) || 'x' WHERE id = 3",
    'UPDATE runs SET execution = \'{"how": "\x1b]0;pwned\x07"}\' WHERE id = 4',
    "UPDATE runs SET compile_seconds = -3, first_step_seconds = -1 WHERE id = 5",
    "UPDATE runs SET compile_seconds = 1e308 * 10 WHERE id = 8",
    "UPDATE runs SET target_accuracy = 0.5, target_reached = 7, target_seconds = -1, target_epoch = -2 "
    "WHERE id = 6",
    "UPDATE runs SET resolved_mode = '' WHERE id = 7",
]


@pytest.mark.parametrize(
    "args",
    [
        ("--table", "modes"),
        ("--table", "comparison"),
        ("--table", "batch"),
        ("--compare", "1", "1"),
        ("--kernels",),
        ("--resources",),
    ],
)
def test_hostile_values_in_the_new_columns_never_crash_nor_reach_the_terminal_raw(
    db: Path, args: tuple[str, ...]
):
    for change in HOSTILE:
        sql(db, change)
    for fmt in ("table", "markdown", "csv", "json"):
        text = bench(db, *args, "--format", fmt)
        assert "\x1b" not in text and "\x07" not in text
    rows = records(db, "--table", "modes")
    assert all(r["compile_seconds"] is None or r["compile_seconds"] >= 0 for r in rows)
    assert all(r["first_step_seconds"] is None or r["first_step_seconds"] >= 0 for r in rows)
    assert all(r["target_seconds"] is None or r["target_seconds"] >= 0 for r in rows)
    assert any("(asked turbo)" in r["mode_label"] for r in rows)
    assert any(r["mode_label"].startswith("unknown 'tur\\x1b") for r in rows)  # escaped, cut short


def test_an_unknown_mode_is_shown_as_unknown_and_is_no_baseline(db: Path):
    sql(
        db,
        "UPDATE runs SET resolved_mode = 'turbo' WHERE framework = 'pytorch' AND mode = 'eager' "
        "AND precision IS NULL",
    )
    rows = records(db, "--table", "modes")
    turbo = cell(rows, "pytorch", "turbo")
    assert turbo["mode_label"] == "unknown 'turbo' (asked eager)"
    assert turbo["speedup_vs_eager_fp32"] is None
    assert cell(rows, "pytorch", "compiled")["speedup_vs_eager_fp32"] is None  # its baseline is gone


# --- time to target -----------------------------------------------------------------------------


def test_time_to_target_is_seconds_and_epoch_not_reached_or_blank(db: Path):
    base = "UPDATE runs SET target_accuracy = 0.9, target_reached = ?, target_seconds = ?, target_epoch = ? "
    where = "WHERE framework = 'pytorch' AND precision IS NULL AND mode = ?"
    sql(db, base + where, 1, 12.4, 3, "eager")
    sql(db, base + where, 0, None, None, "compiled")
    text = bench(db, "--table", "modes")
    line = {tuple(x.split()[:4]): x for x in text.splitlines() if x.startswith("pytorch")}
    assert "12.4 s (epoch 3)" in line[("pytorch", "small_cnn", "eager", "fp32")]
    assert "not reached" in line[("pytorch", "small_cnn", "compiled", "fp32")]
    assert "time to target: training and evaluation wall seconds" in text
    rows = records(db, "--table", "modes")
    assert cell(rows, "pytorch", "graph")["target_seconds"] is None  # no target: blank


# --- precision evidence from kernel traces --------------------------------------------------------

# Real kernel and operator names: cuBLAS, cuBLASLt and cuDNN on a GPU; PyTorch's operators on a CPU.
NAMES = {
    "fp32": [("volta_sgemm_128x64_nn", 0.004), ("implicit_convolve_sgemm", 0.006), ("aten::relu", 0.001)],
    "bf16": [
        ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 0.003),
        ("aten::mkldnn_convolution", 0.001),  # a CPU operator: its name carries no type
        ("aten::add_", 0.002),
    ],
}


def test_the_kernels_report_shows_which_data_type_the_products_ran_in(db: Path):
    conn = sqlite3.connect(db)
    ids = {}
    for precision in ("fp32", "bf16"):
        clause = "IS NULL" if precision == "fp32" else "= 'bf16'"
        (run_id,) = conn.execute(
            f"SELECT id FROM runs WHERE framework = 'pytorch' AND mode = 'compiled' AND precision {clause}"
        ).fetchone()
        ids[precision] = run_id
        conn.execute("UPDATE runs SET trace = 'kernels', trace_status = 'ok' WHERE id = ?", (run_id,))
        for seq, (name, seconds) in enumerate(NAMES[precision]):
            cls, tile = classify(name)
            conn.execute(
                "INSERT INTO kernels (run_id, seq, backend, device, name, class, tile, calls, total_seconds) "
                "VALUES (?, ?, 'test', 'cuda', ?, ?, ?, 1, ?)",
                (run_id, seq, name, cls, tile, seconds),
            )
    conn.commit()
    conn.close()
    document = json.loads(bench(db, "--kernels", "--format", "json"))
    by_type = {row["data_type"]: row for row in document["data_types"]}
    (fp32_group,) = [g for g in by_type["fp32"] if "precision=fp32" in g]
    (bf16_group,) = [g for g in by_type["fp32"] if "precision=bf16" in g]
    assert by_type["fp32"][fp32_group]["share"] == pytest.approx(1.0)  # sgemm and the sgemm convolution
    assert by_type["bf16"][bf16_group]["share"] == pytest.approx(0.75)  # the bf16 GEMM, 3 of 4 ms
    assert by_type["unknown"][bf16_group]["share"] == pytest.approx(0.25)  # mkldnn_convolution: unknown
    assert by_type["bf16"][fp32_group]["seconds"] == 0
    text = bench(db, "--kernels")
    assert "GEMM and convolution time by the data type" in text


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("volta_sgemm_128x64_nn", "fp32"),
        ("maxwell_scudnn_128x64_relu_interior_nn", "fp32"),
        ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float>", "fp32"),
        ("void pointwise_mult_and_sum_complex<float2, 8, 4>(float2*, float2*, float2*, int)", "fp32"),
        ("void at::native::vectorized_elementwise_kernel<4, c10::Half, half2>", "fp16"),
        ("ampere_h16816gemm_128x128_ldg8_stages_32x5_nn", "fp16"),
        ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
        ("volta_fp16_s884gemm_fp16_128x64_ldg8_f2f_nn", "fp16"),
        ("cutlass_80_tensorop_f16_s16816gemm_relu_f16_64x64_64x4_nn_align8", "fp16"),
        ("void at::native::vectorized_elementwise_kernel<4, c10::Half>", "fp16"),
        ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "bf16"),
        ("void at::native::vectorized_elementwise_kernel<4, c10::BFloat16>", "bf16"),
        ("brg_conv_fwd:avx512_core_amx_bf16", "bf16"),
        ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "tf32"),
        (
            "cutlass3x_sm90_tensorop_s64x128x32gemm_e4m3_e4m3_f32_f32_e5m2_64x128x128_1x2x1_0_tnn_align16",
            "fp8",
        ),
        ("nvjet_tst_128x24_64x11_2x1_v_bz_TNT", "unknown"),  # cuBLASLt's Hopper names: no type read
        ("aten::addmm", "unknown"),
        ("aten::mkldnn_convolution", "unknown"),
        ("Conv2D", "unknown"),
        ("fusion.12", "unknown"),
        ("halfway_there", "unknown"),
    ],
)
def test_a_names_data_type_is_read_where_it_shows_and_unknown_elsewhere(name: str, dtype: str):
    assert data_type(name) == dtype


def test_no_real_cpu_operator_name_shows_a_type():
    """The 272 operator names the six frameworks' CPU profilers reported here (the kernel classes'
    fixture) carry no data type: a CPU run's products are `unknown`, as docs/kernels.md says."""
    names = json.loads((Path(__file__).parent / "data" / "operator_names.json").read_text())
    assert {data_type(e["name"]) for e in names["cpu"]} == {"unknown"}
    assert {data_type(e["name"]) for e in names["cuda"]} >= {"fp32", "fp16", "bf16", "fp8", "unknown"}


# --- the HTML page ----------------------------------------------------------------------------------


def test_the_html_page_draws_step_time_by_mode_and_precision(db: Path, tmp_path: Path):
    out = tmp_path / "page"
    result = CliRunner().invoke(bench_cli, ["report", "--db", str(db), "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    assert "Step time by execution mode and precision" in page
    (plot,) = [p for p in (out / "plots").glob("modes-*.png")]
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert "jax compiled bf16" in page  # a bar's label in the data kept beside the picture


def test_the_html_page_has_no_modes_figure_for_one_mode(tmp_path: Path):
    path = tmp_path / "bench.db"
    store(path, DEFAULTS.replace("[pytorch, tensorflow]", "[pytorch]"))
    out = tmp_path / "page"
    result = CliRunner().invoke(bench_cli, ["report", "--db", str(path), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "execution mode and precision" not in (out / "index.html").read_text()
    assert not list((out / "plots").glob("modes-*.png"))


def test_the_resources_comparisons_keep_modes_apart(tmp_path: Path):
    """--resources' threads comparison groups by framework, model, device and batch: runs of two
    modes would share its cells; the mode they ran joins the group where it varies."""
    path = tmp_path / "bench.db"
    store(path, MATRIX.replace("[pytorch, tensorflow, jax]", "[pytorch]").replace("[fp32, bf16]", "[fp32]"))
    store(path, MATRIX.replace("[pytorch, tensorflow, jax]", "[pytorch]").replace("[fp32, bf16]", "[fp32]"))
    # one sweep: sweep 2's runs moved into sweep 1 as the threads=1 runs of the same configurations
    moved = "threads = 1, sweep_id = 1, config_hash = config_hash || 't1'"
    sql(path, f"UPDATE runs SET {moved} WHERE sweep_id = 2")
    sql(path, "UPDATE runs SET samples_count = 10, cpu_percent_mean = 100 * threads + id")
    document = json.loads(bench(path, "--resources", "--sweep", "1", "--format", "json"))
    rows = document["comparisons"]["threads"]
    assert sorted({r["mode"] for r in rows}) == ["compiled", "eager", "graph"]
    assert all(r["runs"] == 1 for r in rows)  # one run a cell: never an eager and a compiled one


def test_kernel_groups_name_the_mode_only_where_one_framework_ran_several():
    """Each framework's default mode differs: the framework's name tells its group apart, and the
    six-framework kernels table keeps one plain column per framework. A framework that ran two
    modes gets them named, and its runs are never pooled."""
    from orchestrator.config.run_config import RunConfig
    from orchestrator.report.tables.kernels import _labels

    def run(id_: int, framework: str, mode: str) -> dict[str, object]:
        config = RunConfig(framework=framework, trace="kernels").to_dict()
        return {**config, "id": id_, "machine": "m", "ran_mode": mode, "ran_precision": "fp32"}

    plain = _labels([run(1, "pytorch", "eager"), run(2, "tensorflow", "graph"), run(3, "jax", "compiled")])
    assert plain == {1: "pytorch", 2: "tensorflow", 3: "jax"}
    named = _labels([run(1, "pytorch", "eager"), run(2, "pytorch", "compiled"), run(3, "jax", "compiled")])
    assert len(set(named.values())) == 3
    assert "mode=compiled" in named[2] and "mode=eager" in named[1]

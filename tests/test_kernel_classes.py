"""The kernel/operator classification on real names, the trace records' rows, nsys's export read
back, the `trace` setting, and the schema upgrade that added the kernels table. No framework."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.matrix import load_matrix
from orchestrator.config.run_config import LATE_FIELDS, RunConfig
from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database, schema_version
from profiler import kernels, nsys
from workers import trace
from workers.adapters import base

DATA = Path(__file__).parent / "data"
NAMES = json.loads((DATA / "operator_names.json").read_text())
CPU_FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax")


@pytest.mark.parametrize("entry", NAMES["cpu"], ids=lambda e: f"{e['framework']}:{e['name']}")
def test_every_operator_name_seen_here_keeps_its_class(entry):
    assert kernels.classify(entry["name"]) == (entry["class"], None)


@pytest.mark.parametrize("entry", NAMES["cuda"] + NAMES["issue_examples"], ids=lambda e: e["name"][:60])
def test_every_public_kernel_name_keeps_its_class_and_tile(entry):
    assert kernels.classify(entry["name"]) == (entry["class"], entry["tile"])


@pytest.mark.parametrize("entry", NAMES["cuda_here"], ids=lambda e: e["name"][:60])
def test_every_kernel_name_seen_on_the_gpu_keeps_its_class_and_tile(entry):
    assert kernels.classify(entry["name"]) == (entry["class"], entry["tile"])


def test_the_gpu_traces_leave_only_sorting_unclassified():
    """The first GPU check left seven names in "other" (cuDNN's FFT convolution, cuBLASLt's
    epilogue, adaptive pooling's gradient); now only the embedding backward's index sort (CUB's
    radix sort and scan set-up) is, being none of the classes. cuDNN's FFT convolution's complex
    GEMMs are convolution, not GEMM: VGG16's GEMM share on the H200 fell from 33 % to the fully
    connected layers' own (33 % to 14 %)."""
    other = [e["name"] for e in NAMES["cuda_here"] if e["class"] == "other"]
    assert other and all("cub::detail::" in name for name in other), other
    complex_gemms = [e for e in NAMES["cuda_here"] if "gemm_cf32" in e["name"]]
    assert complex_gemms and {e["class"] for e in complex_gemms} == {"convolution"}


def test_the_fixture_covers_every_framework_and_every_class():
    assert {e["framework"] for e in NAMES["cpu"]} == set(CPU_FRAMEWORKS)
    every = NAMES["cpu"] + NAMES["cuda"] + NAMES["issue_examples"]
    assert {e["class"] for e in every} == set(kernels.CLASSES)
    for framework in CPU_FRAMEWORKS:
        classes = {e["class"] for e in NAMES["cpu"] if e["framework"] == framework}
        assert {"gemm", "convolution", "elementwise", "pooling"} <= classes, framework
    assert NAMES["cuda"] and all(e["source"].startswith("https://github.com/") for e in NAMES["cuda"])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # The rule order is the point: each of these would fall into the next rule's class.
        ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int=512, bool=0, int=2>", "normalisation"),
        ("void cudnn::detail::implicit_convolve_sgemm<float, float, int=128>", "convolution"),
        ("volta_scudnn_128x128_stridedB_splitK_xregs_large_nn_v1", "convolution"),
        ("maxwell_sgemmBatched_128x128_raggedMn_tn", "batched gemm"),
        ("BiasAddGrad", "reduction"),
        ("Global_AddGradNode", "elementwise"),
        ("autograd::engine::evaluate_function: AddmmBackward0", "gemm"),
        ("aten::bmm", "batched gemm"),
        ("BatchMatMulV2", "batched gemm"),
        ("aten::view", "other"),
        ("something nobody has named yet", "other"),
    ],
)
def test_rule_order(name, expected):
    assert kernels.kernel_class(name) == expected


def test_rows_merge_names_and_their_shares_add_up_to_one():
    records = [
        {"name": "aten::mm", "calls": 2, "total_seconds": 0.3, "backend": "b", "device": "cpu"},
        {"name": "aten::mm", "calls": 1, "total_seconds": 0.1, "backend": "b", "device": "cpu"},
        {"name": "volta_sgemm_128x64_nn", "calls": 4, "total_seconds": 0.6, "backend": "b", "device": "cuda"},
    ]
    rows = kernels.rows(records)
    assert [(r["seq"], r["name"], r["calls"]) for r in rows] == [
        (0, "volta_sgemm_128x64_nn", 4),
        (1, "aten::mm", 3),
    ]
    assert rows[0]["tile"] == "128x64_nn" and rows[1]["tile"] is None
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[1]["total_seconds"] == pytest.approx(0.4)


def _nsys_export(path: Path) -> None:
    """A tiny export in the layout nsys documents (StringIds, NVTX_EVENTS, CUPTI_ACTIVITY_KIND_*);
    made by hand: no nsys report was available to copy."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, text TEXT, textId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, demangledName INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (copyKind INTEGER, start INTEGER, end INTEGER);
        INSERT INTO StringIds VALUES (1, 'volta_sgemm_128x64_nn'), (2, 'warmup_only_kernel');
        INSERT INTO NVTX_EVENTS VALUES (0, 100, 'warmup', NULL), (200, 1200, 'epoch 1', NULL),
            (250, 300, 'step 1', NULL);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 90, 2), (300, 700, 1), (800, 1000, 1);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1, 210, 250), (2, 1300, 1400);
        """
    )
    conn.commit()
    conn.close()


def test_nsys_records_keep_only_what_ran_inside_the_timed_epochs(tmp_path):
    export = tmp_path / "nsys-trace.sqlite"
    _nsys_export(export)
    found = {r["name"]: r for r in nsys.records(export)}
    assert set(found) == {"volta_sgemm_128x64_nn", "[CUDA memcpy HtoD]"}
    assert found["volta_sgemm_128x64_nn"]["calls"] == 2
    assert found["volta_sgemm_128x64_nn"]["total_seconds"] == pytest.approx(600e-9)
    assert nsys.command(["python", "-m", "workers"])[:2] == ["nsys", "profile"]


def test_trace_off_keeps_the_hash_of_configurations_recorded_before_it(tmp_path):
    assert "trace" in LATE_FIELDS
    path = tmp_path / "m.yaml"
    path.write_text("settings: {framework: pytorch}\naxes:\n  trace: [off, kernels]\n")
    off, on = load_matrix(path).configs
    assert off.trace is None and on.trace == "kernels"
    assert off.config_hash == RunConfig(framework="pytorch").config_hash != on.config_hash
    path.write_text("settings:\n  framework: pytorch\n  trace: everything\n")
    with pytest.raises(ConfigError, match=r"m\.yaml:3: trace: unknown trace 'everything'"):
        load_matrix(path)


def test_a_framework_without_a_profiler_is_unsupported_with_the_reason():
    config = {"framework": "nothing", "device": "cpu", "trace": "kernels"}
    adapter = base.Adapter(config)
    adapter.name = "nothing"
    with pytest.raises(base.Unsupported, match="nothing has no operator profiler"):
        trace.session_for(adapter, config)
    assert trace.session_for(adapter, {**config, "trace": None}) is None


def test_a_schema_3_database_gets_the_kernels_table_and_the_trace_columns(tmp_path):
    old = tmp_path / "v3.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v3.sql").read_text())
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    runs = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"trace", "trace_backend", "trace_status", "trace_seconds"} <= runs
    assert {r[1] for r in conn.execute("PRAGMA table_info(kernels)")} >= {"name", "class", "tile", "share"}
    conn.close()


# An excerpt of the HLO text JAX 0.10.2 compiled for small_cnn's training step here (lines cut short).
JAX_HLO = """
%fused_computation.19 (param_0.19: f32[8,32,32,50], param_1.19: f32[], param_2.1: f32[8,16,16,50]) {
  %param_0.19 = f32[8,32,32,50]{3,2,1,0} parameter(0)
  %param_1.19 = f32[] parameter(1)
  %reduce_window_max.1 = f32[8,16,16,50]{3,2,1,0} reduce-window(%param_0.19, %param_1.19)
  %param_2.1 = f32[8,16,16,50]{3,2,1,0} parameter(2)
  ROOT %multiply.36 = f32[8,16,16,50]{3,2,1,0} multiply(%reduce_window_max.1, %param_2.1)
}

%fused_computation.21 (param_0.21: f32[8,32,32,3], param_1.21: f32[3,3,3,50]) -> f32[8,32,32,50] {
  %param_0.21 = f32[8,32,32,3]{3,2,1,0} parameter(0)
  %param_1.21 = f32[3,3,3,50]{3,2,1,0} parameter(1)
  ROOT %conv_general_dilated.3 = f32[8,32,32,50]{3,2,1,0} convolution(%param_0.21, %param_1.21)
}

ENTRY %main.1 (state.1: f32[3,3,3,50], x.1: f32[8,32,32,3]) -> f32[8,32,32,50] {
  %ynn_fusion.21 = f32[8,32,32,50]{3,2,1,0} fusion(%x.1, %state.1), kind=kCustom, calls=%fused_computation.21
  %ynn_fusion.19 = f32[8,16,16,50]{3,2,1,0} fusion(%a, %b, %c), kind=kCustom, calls=%fused_computation.19
  ROOT %copy.193 = f32[8,32,32,50]{3,2,1,0} copy(%ynn_fusion.21)
}
"""


def test_jax_tracer_names_xlas_custom_fusions_from_the_compiled_hlo():
    from workers.adapters.jax import trace as jax_trace

    roots = jax_trace.custom_fusion_roots(JAX_HLO)
    # The max pool fused with dropout's scaling is named by its reduce-window, not its root multiply.
    assert roots == {"ynn_fusion.21": "convolution", "ynn_fusion.19": "reduce-window"}
    names = [jax_trace.record_name(op, roots) for op in ("ynn_fusion.21", "ynn_fusion.19", "copy.193")]
    assert names == ["ynn_fusion:convolution", "ynn_fusion:reduce-window", "copy"]
    assert [kernels.kernel_class(n) for n in names] == ["convolution", "pooling", "memory copy"]


def test_jax_tracer_counts_self_time_of_nested_thunks():
    from workers.adapters.jax import trace as jax_trace

    # (start, duration, name): a while loop of 100 ns holding two thunks of 30 and 20 ns, then a copy.
    events = [(0, 100, "while.1"), (10, 30, "add.1"), (50, 20, "xor.1"), (200, 5, "copy.1")]
    assert [(e[2], own) for e, own in jax_trace.self_times(events)] == [
        ("while.1", 50),
        ("add.1", 30),
        ("xor.1", 20),
        ("copy.1", 5),
    ]


def _planes(*planes):
    """Stand-ins for jax.profiler.ProfileData's planes: (name, [(line name, [(event, dur ns, stats)])])."""
    from types import SimpleNamespace as NS

    return [
        NS(
            name=name,
            lines=[
                NS(name=line, events=[NS(name=e, duration_ns=d, stats=list(s.items())) for e, d, s in events])
                for line, events in lines
            ],
        )
        for name, lines in planes
    ]


def test_jax_cuda_tracer_reads_kernels_copies_and_memsets_off_the_gpu_streams():
    """XLA's CUPTI collector's layout: a /device:GPU:N plane, one `Stream #N(...)` line a stream;
    its own kernels named after their HLO instruction, the libraries' by their own name."""
    from workers.adapters.jax import trace as jax_trace

    kernel = {"kernel_details": "regs:32 grid:80,1,1"}
    planes = _planes(
        (
            "/device:GPU:0",
            [
                (
                    "Stream #7(Kernel,MemcpyD2D)",
                    [
                        ("loop_add_fusion_3", 2000, {**kernel, "hlo_op": "loop_add_fusion.3"}),
                        ("nvjet_tst_128x64_64x4_1x2_h_bz_NNT", 9000, {**kernel, "hlo_op": "custom-call.2"}),
                        ("MemcpyD2D", 500, {"memcpy_details": "size:4096"}),
                        ("Memset", 100, {"memset_details": "num_bytes:64"}),
                        ("not a device event", 7000, {"correlation_id": 3}),
                    ],
                ),
                ("CUPTI overhead", [("Overhead", 900, kernel)]),
            ],
        ),
        ("/host:CPU", [("Host Threads/1", [("loop_add_fusion_3", 4000, kernel)])]),
    )
    got = list(jax_trace.device_events(planes))
    assert got == [
        ("loop_add_fusion", 2e-06),
        ("nvjet_tst_128x64_64x4_1x2_h_bz_NNT", 9e-06),
        ("MemcpyD2D", 5e-07),
        ("Memset", 1e-07),
    ]
    assert [kernels.kernel_class(n) for n, _ in got] == ["elementwise", "gemm", "memory copy", "memory copy"]
    assert jax_trace.kernel_name("loop_add_fusion_3", None) == "loop_add_fusion_3"


def test_jax_cuda_tracer_without_any_gpu_kernel_fails_its_trace_not_the_run(tmp_path, monkeypatch):
    """A profile with no GPU plane (XLA found no libcupti) leaves the trace `failed: ...`."""
    from workers.adapters.jax import trace as jax_trace

    tracer = jax_trace.CudaTracer("cannot import cupti", root=str(tmp_path))
    space = type("Space", (), {"planes": _planes(("/host:CPU", []))})
    monkeypatch.setattr(tracer, "_xspaces", lambda: [space])
    session = trace.Session(tracer)
    monkeypatch.chdir(tmp_path)
    got = session.finish()
    assert got["status"].startswith("failed: RuntimeError: no kernel on a /device:GPU plane")
    assert got["backend"] == "jax.profiler (CUPTI)" and got["device"] == "cuda"
    assert "CUPTI's Python binding not used: cannot import cupti" in got["notes"][0]

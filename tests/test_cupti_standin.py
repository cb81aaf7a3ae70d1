"""workers/cupti_trace.py, the CUPTI kernel trace, against a stand-in cupti-python (stand-in, not a GPU).

The tracer is driven as the shared runner drives it (trace.Session: start and stop around each
timed epoch, finish at the end) while tests/standins/cupti.py plays CUPTI; what it leaves
(kernels.json) is then read the orchestrator's way (launch/tracing.py, profiler/kernels.py) into
rows with their class, share and data type. The kernel names are CUPTI's kind: the mangled
symbols of C++ kernels, made by g++ 12 from declarations matching the names torch.profiler
recorded on the H200 (tests/data/operator_names.json's `cuda_here`; c++filt gives exactly those
names back), and extern "C" names as they are. The durations are made up.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from orchestrator.launch import tracing
from profiler import kernels
from tests.standins.cupti import (
    ActivityKind,
    ActivityMemcpyKind,
    StandInCupti,
    install,
    kernel,
    memcpy,
    memset,
)
from tests.standins.cupti import runtime_call as runtime
from workers import cupti_trace, trace
from workers.adapters import base
from workers.adapters.mxnet.adapter import Adapter as MxnetAdapter

DATA = Path(__file__).parent / "data"
MS = 1_000_000  # ns
CUDA_HERE = {e["name"]: e for e in json.loads((DATA / "operator_names.json").read_text())["cuda_here"]}
# Names as CUPTI gives them: C++ kernels' mangled symbols, an extern "C" kernel as written.
CONV = (
    "_Z23implicit_convolve_sgemmIffLi1024ELi5ELi5ELi3ELi3ELi3ELi1ELb0ELb0ELb1EEviiiPKT_iPS0_S2_"
    "18kernel_conv_paramsyiS0_S0_iS2_S2_bbii"
)
BN = "_ZN5cudnn24bn_fw_tr_1C11_singlereadIfLi512ELb1ELi1ELi2ELi0EEEvNS_18bn_fw_tr_1C11_argsIT_EE"
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
POOL = "_ZN2at6native12_GLOBAL__N_121max_pool_forward_nchwIfiEEviPKT_llliiiiiiiiiiPS3_Pl"
ATTENTION = (
    "_Z39fmha_cutlassF_f32_aligned_64x64_rf_sm80N22PyTorchMemEffAttention15AttentionKernelIfN7cutlass"
    "4arch4Sm80ELb1ELi64ELi64ELi64ELb1ELb1EE6ParamsE"
)
GEMM = next(
    name for name in CUDA_HERE if name.startswith("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8")
)
# Each name's demangled form, as torch.profiler recorded it on the H200.
RECORDED = {
    CONV: next(
        n for n in CUDA_HERE if n.startswith("void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3,")
    ),
    BN: "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
    FILL: next(
        n for n in CUDA_HERE if "vectorized_elementwise_kernel<4, at::native::FillFunctor<float>," in n
    ),
    POOL: next(n for n in CUDA_HERE if "max_pool_forward_nchw<float, int>" in n),
    ATTENTION: next(n for n in CUDA_HERE if n.startswith("fmha_cutlassF_f32_aligned_64x64_rf_sm80(")),
    GEMM: GEMM,
}


@pytest.fixture
def cupti(monkeypatch: pytest.MonkeyPatch) -> StandInCupti:
    monkeypatch.delenv(trace.NSYS_VARIABLE, raising=False)
    return install(monkeypatch, StandInCupti())


def traced(
    tmp_path, monkeypatch, cupti: StandInCupti, epochs: list[list], between: list | None = None
) -> dict:
    """Drive the tracer as the runner does: each epoch's records run between start() and stop(),
    ``between`` (warm-up, evaluation) outside them; returns kernels.json as the worker left it."""
    monkeypatch.chdir(tmp_path)
    session = trace.session_for(base.Adapter({}), {"trace": "kernels", "device": "cuda"})
    assert session is not None and session.tracer.backend == "cupti"
    cupti.run(*(between or []))  # warm-up: nothing enabled yet
    for records in epochs:
        session.start()
        cupti.run(*records)
        session.stop(0.5)
        cupti.run(*(between or []))  # evaluation, after stop(): disabled again
    session.finish()
    return json.loads((tmp_path / trace.KERNELS_FILE).read_text())


def test_a_cuda_run_gets_the_cupti_tracer_where_cupti_imports_and_the_reason_where_not(cupti, monkeypatch):
    """Any framework's cuda run: MXNet's adapter (imported without MXNet) has no GPU profiler of
    its own, so without CUPTI its traced cuda run is unsupported with both reasons."""
    config, mxnet = {"trace": "kernels", "device": "cuda"}, MxnetAdapter({})
    assert isinstance(trace.tracer_for(mxnet, config), cupti_trace.Tracer)
    assert ("register", None) in cupti.calls
    monkeypatch.setitem(sys.modules, "cupti", None)  # `import cupti` fails
    with pytest.raises(base.Unsupported) as refused:
        trace.tracer_for(mxnet, config)
    assert str(refused.value) == (
        "trace: kernels on cuda needs CUPTI (cannot import cupti (ModuleNotFoundError: import of cupti "
        "halted; None in sys.modules); pip install cupti-python in this environment); mxnet has no GPU "
        "profiler of its own that bench can read"
    )


def test_the_timed_epochs_kernels_are_named_timed_and_classified(tmp_path, monkeypatch, cupti):
    """Two timed epochs: each kernel's calls and device seconds summed over both (end - start, ns
    to s); warm-up and evaluation, run while tracing is off, are not in it; rows as the orchestrator
    stores them, each with its class, its share of the traced time, and its data type."""
    epoch = [
        kernel(CONV, 0, 6 * MS),
        kernel(BN, 6 * MS, 7 * MS),
        kernel(FILL, 7 * MS, 7 * MS + 250_000),
        kernel(POOL, 8 * MS, 8 * MS + 500_000),
        kernel(ATTENTION, 9 * MS, 11 * MS),
        kernel(GEMM, 11 * MS, 14 * MS),
        kernel(CONV, 14 * MS, 20 * MS),
    ]
    outside = [kernel(GEMM, 0, 50 * MS), kernel("_Z4evalv", 0, 9 * MS)]
    left = traced(tmp_path, monkeypatch, cupti, [epoch, epoch], between=outside)
    assert (left["backend"], left["device"], left["status"], left["epochs"]) == ("cupti", "cuda", "ok", 2)
    assert left["region_seconds"] == 1.0 and left["notes"] == []
    got = {r["name"]: (r["calls"], r["total_seconds"]) for r in left["records"]}
    assert got == {
        RECORDED[CONV]: (4, pytest.approx(0.024)),
        RECORDED[GEMM]: (2, pytest.approx(0.006)),
        RECORDED[ATTENTION]: (2, pytest.approx(0.004)),
        RECORDED[BN]: (2, pytest.approx(0.002)),
        RECORDED[POOL]: (2, pytest.approx(0.001)),
        RECORDED[FILL]: (2, pytest.approx(0.0005)),
    }
    assert left["records"][0]["name"] == RECORDED[CONV]  # longest first
    rows = {r["name"]: r for r in kernels.rows(tracing.records(left))}
    for name in RECORDED.values():  # the class and tile pinned on the H200's name, and fp32
        pinned = CUDA_HERE[name]
        assert (rows[name]["class"], rows[name]["tile"]) == (pinned["class"], pinned["tile"]), name
        assert kernels.data_type(name) == "fp32", name
        assert rows[name]["backend"] == "cupti" and rows[name]["device"] == "cuda"
    assert {r["class"] for r in rows.values()} == {
        "convolution",
        "normalisation",
        "elementwise",
        "pooling",
        "fused attention",
        "gemm",
    }
    assert rows[RECORDED[CONV]]["share"] == pytest.approx(0.024 / 0.0375)
    assert rows[RECORDED[GEMM]]["tile"] == "128x64x8_nn"


def test_the_mangled_names_would_lose_their_data_type(cupti):
    """Why the tracer demangles: the classes survive mangling, the data types do not (`float` is
    `f` in a mangled name), and issue 24's check reads the data type of bf16 and fp16 runs."""
    assert kernels.kernel_class(BN) == CUDA_HERE[RECORDED[BN]]["class"] == "normalisation"
    assert kernels.data_type(BN) == "unknown" != kernels.data_type(RECORDED[BN]) == "fp32"


def test_copies_and_memsets_are_named_as_nvprof_named_them_and_are_memory_copies(
    tmp_path, monkeypatch, cupti
):
    copies = [
        memcpy(ActivityMemcpyKind.HTOD, 0, 2 * MS, 64 << 20),
        memcpy(ActivityMemcpyKind.DTOH, 2 * MS, 3 * MS),
        memcpy(ActivityMemcpyKind.DTOD, 3 * MS, 4 * MS),
        memcpy(ActivityMemcpyKind.PTOP, 4 * MS, 5 * MS),
        memcpy(ActivityMemcpyKind.HTOA, 5 * MS, 6 * MS),
        memcpy(99, 6 * MS, 7 * MS),  # a kind this CUPTI does not name
        memset(7 * MS, 7 * MS + 100_000),
        memset(8 * MS, 8 * MS + 100_000),
        runtime(0, 9 * MS),  # not a kind bench enables: never delivered
    ]
    left = traced(tmp_path, monkeypatch, cupti, [copies])
    got = {r["name"]: (r["calls"], r["total_seconds"]) for r in left["records"]}
    assert got == {
        "[CUDA memcpy HtoD]": (1, pytest.approx(0.002)),
        "[CUDA memcpy DtoH]": (1, pytest.approx(0.001)),
        "[CUDA memcpy DtoD]": (1, pytest.approx(0.001)),
        "[CUDA memcpy PtoP]": (1, pytest.approx(0.001)),
        "[CUDA memcpy HTOA]": (1, pytest.approx(0.001)),
        "[CUDA memcpy 99]": (1, pytest.approx(0.001)),
        "[CUDA memset]": (2, pytest.approx(0.0002)),
    }
    assert {kernels.kernel_class(name) for name in got} == {kernels.MEMORY_COPY}


def test_start_enables_three_kinds_stop_forces_a_flush_and_disables_them(tmp_path, monkeypatch, cupti):
    """A buffer that fills mid-epoch is handed over and counted; stop() flushes the rest with
    CUPTI_ACTIVITY_FLAG_FLUSH_FORCED (1), then disables what start() enabled."""
    cupti.buffer_records = 2
    left = traced(tmp_path, monkeypatch, cupti, [[kernel(GEMM, 0, MS)] * 5])
    assert left["records"] == [{"name": GEMM, "calls": 5, "total_seconds": pytest.approx(0.005)}]
    kinds = sorted(int(k) for k in (ActivityKind.CONCURRENT_KERNEL, ActivityKind.MEMCPY, ActivityKind.MEMSET))
    assert sorted(k for call, k in cupti.calls if call == "enable") == kinds
    after_flush = cupti.calls[[c for c, _ in cupti.calls].index("flush") :]
    assert after_flush[0] == ("flush", 1) and sorted(k for _, k in after_flush[1:]) == kinds
    assert cupti.enabled == set()


def test_without_libstdcxx_the_names_stay_mangled_and_a_note_says_so(tmp_path, monkeypatch, cupti):
    monkeypatch.setattr(cupti_trace, "_demangler", lambda: None)
    left = traced(tmp_path, monkeypatch, cupti, [[kernel(BN, 0, MS), kernel(GEMM, MS, 2 * MS)]])
    assert {r["name"] for r in left["records"]} == {BN, GEMM}
    assert left["notes"] == ["kernel names left mangled: libstdc++'s __cxa_demangle could not be loaded"]


def test_a_name_the_demangler_cannot_read_is_kept_as_cupti_gave_it():
    demangle = cupti_trace._demangler()
    assert demangle is not None
    assert demangle("_Zgarbage") == "_Zgarbage" and demangle(GEMM) == GEMM
    assert {name: demangle(name) for name in RECORDED} == RECORDED

"""Every run records the settings its framework ran with (issue 13, docs/fairness.md).

Real runs through `bench run`, one tiny configuration per framework: the environments row must
carry the threads (threads_applied) and the switches that decide which kernels run (extra's
"settings": oneDNN/MKLDNN built and on, TensorFlow's oneDNN variable, Paddle's MKLDNN flags,
MXNet's engine). A second sweep turns oneDNN off (on for Paddle) through each framework's own
environment variable, and the record must follow: the settings are read from the framework,
not written down.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.slow, pytest.mark.framework]

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet", "paddle", "singa", "jax")
MATRIX = """
name: settings
settings: {{min_time: 0, min_steps: 1,
            model: small_cnn, dataset_size: 20, batch_size: 4, epochs: 1, warmup_steps: 1, image_size: 16,
           classes: 3, threads: 1, timeout: 600}}
axes: {{framework: [{frameworks}]}}
"""
# Each framework's own switch, the opposite of its default.
SWITCHED = {
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "MXNET_MKLDNN_ENABLED": "0",
    "FLAGS_use_mkldnn": "1",
    "BENCH_TORCH_MEMORY_FORMAT": "channels_last",
}


def sweep(folder: Path, frameworks: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Run the matrix in folder; each framework's run and environments row, JSON columns parsed."""
    from orchestrator.cli.main import cli

    (folder / "m.yaml").write_text(MATRIX.format(frameworks=", ".join(frameworks)))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        ran = CliRunner().invoke(cli, ["run", "--matrix", "m.yaml"], catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert ran.exit_code == 0, ran.output
    conn = sqlite3.connect(folder / "bench.db")
    conn.row_factory = sqlite3.Row
    query = (
        "SELECT r.framework, r.outcome, r.reason, e.threads_applied, e.extra FROM runs r "
        "JOIN environments e ON e.run_id = r.id"
    )
    rows = {r["framework"]: dict(r) for r in conn.execute(query)}
    conn.close()
    for row in rows.values():
        row["threads"] = json.loads(row["threads_applied"])
        row["settings"] = json.loads(row["extra"]).get("settings")
    return rows


@pytest.fixture(scope="module")
def defaults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    for name in SWITCHED:
        assert name not in os.environ, f"{name} is set in the test's environment"
    return sweep(tmp_path_factory.mktemp("settings"), FRAMEWORKS)


@pytest.fixture(scope="module")
def switched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    mp = pytest.MonkeyPatch()
    for name, value in SWITCHED.items():
        mp.setenv(name, value)
    try:
        frameworks = ("pytorch", "tensorflow", "mxnet", "paddle")
        return sweep(tmp_path_factory.mktemp("settings-switched"), frameworks)
    finally:
        mp.undo()


def ok(rows: dict[str, dict[str, Any]], framework: str) -> dict[str, Any]:
    row = rows[framework]
    assert row["outcome"] == "ok", row["reason"]
    assert row["settings"], f"no settings recorded: {row['extra']}"
    return row


def test_pytorch_records_threads_onednn_and_layout(defaults, switched):
    row = ok(defaults, "pytorch")
    assert row["threads"]["intra_op"] == 1 and row["threads"]["inter_op"] == 1
    settings = row["settings"]
    assert settings["mkldnn_available"] is True and settings["mkldnn_enabled"] is True
    # NCHW at 16 px (channels_last is the default from 64 px: docs/fairness.md); the variable
    # switches it, and the record follows.
    assert settings["memory_format"] == "contiguous_format"
    assert settings["BENCH_TORCH_MEMORY_FORMAT"] is None
    switched_to = ok(switched, "pytorch")["settings"]
    assert switched_to["memory_format"] == "channels_last"
    assert switched_to["BENCH_TORCH_MEMORY_FORMAT"] == "channels_last"


def _tensorflows_onednn_default() -> bool:
    """Whether TensorFlow enables oneDNN when TF_ENABLE_ONEDNN_OPTS is unset, by its rule on x86:
    the CPU has one of the features below (the flags /proc/cpuinfo lists)."""
    with open("/proc/cpuinfo") as info:
        flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    return bool({"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"} & set(flags))


def test_tensorflow_records_threads_and_onednn(defaults, switched):
    row = ok(defaults, "tensorflow")
    assert row["threads"]["intra_op"] == 1 and row["threads"]["inter_op"] == 1
    # Unset, TensorFlow turns oneDNN on only where the CPU has the features its kernels are for
    # (AVX512-VNNI, AVX512-BF16, AVX-VNNI, AMX): on one machine here, not on another.
    assert row["settings"]["TF_ENABLE_ONEDNN_OPTS"] is None
    assert row["settings"]["onednn_enabled"] is _tensorflows_onednn_default()
    assert row["settings"]["xla_jit"] is False
    off = ok(switched, "tensorflow")["settings"]
    assert off["TF_ENABLE_ONEDNN_OPTS"] == "0" and off["onednn_enabled"] is False


def test_mxnet_records_threads_mkldnn_and_engine(defaults, switched):
    row = ok(defaults, "mxnet")
    assert row["threads"]["intra_op"] == 1 and row["threads"]["inter_op"] == 1
    settings = row["settings"]
    assert settings["mkldnn_built"] is True and settings["mkldnn_enabled"] is True
    assert settings["engine"] == "ThreadedEnginePerDevice" and settings["blas"]
    off = ok(switched, "mxnet")["settings"]
    assert off["MXNET_MKLDNN_ENABLED"] == "0" and off["mkldnn_enabled"] is False


def test_paddle_records_threads_and_mkldnn_flags(defaults, switched):
    row = ok(defaults, "paddle")
    assert row["threads"]["intra_op"] == 1 and row["threads"]["paddle_num_threads_flag"] == 1
    settings = row["settings"]
    assert settings["FLAGS_use_mkldnn"] is False and settings["onednn_built"] is True
    assert settings["training_path"] == "eager"
    # Paddle reads FLAGS_* from the environment at import: the record is the flag's own value.
    assert ok(switched, "paddle")["settings"]["FLAGS_use_mkldnn"] is True


def test_singa_records_threads_and_build(defaults):
    row = ok(defaults, "singa")
    assert row["threads"]["openmp"] == 1 and row["threads"]["env"]["OMP_NUM_THREADS"] == "1"
    settings = row["settings"]
    assert settings["build_flags"]["USE_DNNL"] == 1 and "use_graph=True" in settings["training_path"]


def test_jax_records_threads_and_xla_settings(defaults):
    row = ok(defaults, "jax")
    assert row["threads"]["pjrt_nproc"] == "1" and row["threads"]["xla_intra_op"] >= 1
    settings = row["settings"]
    assert settings["backend"] == "cpu" and settings["enable_x64"] is False
    assert settings["memory_format"] == "NHWC" and "jit" in settings["execution"]
    assert settings["depthwise"] == "shifted"  # bench's default on the CPU (docs/fairness.md)

"""benchmarks/gpu/check.py on a machine without a GPU: it stops cleanly with "no CUDA device"
(a real process, the real PyTorch environment); its matrices are valid for bench's own loader; and
its checks, read from a database of real fault-worker runs, judge what is there (no GPU figures are
made up: without a GPU the checks that need one fail or say they were not run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu import modes, phases, report

REPO = Path(__file__).resolve().parent.parent

# Run as the GPU session runs it (docs/gpu.md), from the repository root.
CHECK = ("-m", "benchmarks.gpu.check")
GIB = 1 << 30


def gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *CHECK, *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )


@pytest.mark.framework
def test_without_a_gpu_it_stops_with_no_cuda_device(pytorch_python, tmp_path):
    out, work = tmp_path / "out" / "gpu-check.md", tmp_path / "work"
    done = gpu_check("--out", str(out), "--work", str(work), "--python", str(pytorch_python))
    assert done.returncode == 3, done.stderr
    line = done.stdout.strip()
    assert line.startswith("gpu_check: no CUDA device: torch ") and "CPU-only build" in line
    assert len(done.stdout.splitlines()) == 1 and done.stderr == ""
    assert out.read_text() == line + "\n"  # the report holds that line and nothing else
    assert not work.exists()  # nothing run, nothing registered


def test_a_missing_interpreter_or_phase_is_a_one_line_setup_error(tmp_path):
    out = tmp_path / "gpu-check.md"
    done = gpu_check("--out", str(out), "--python", str(tmp_path / "no-python"))
    assert done.returncode == 2
    assert done.stdout == f"gpu_check: no PyTorch interpreter at {tmp_path / 'no-python'}\n"
    done = gpu_check("--out", str(out), "--phases", "matrix,speed")
    phases_named = (
        "--phases: speed is not one of matrix, oom, kernels, overhead, modes, attention, transformers"
    )
    assert done.returncode == 2 and phases_named in done.stderr


@pytest.mark.framework
def test_missing_dependencies_without_their_wheels_are_one_line(pytorch_python, tmp_path):
    """The PyTorch environment lacks bench's own packages (click, SQLAlchemy, ...): real pip, no index."""
    wheels, work = tmp_path / "wheels", tmp_path / "work"
    wheels.mkdir()
    cmd = [str(pytorch_python), *CHECK, "--out", str(tmp_path / "r.md"), "--work", str(work)]
    done = subprocess.run(
        [*cmd, "--wheels", str(wheels)], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 2 and len(done.stdout.splitlines()) == 1
    assert done.stdout.startswith("gpu_check: installing ") and "SQLAlchemy" in done.stdout
    assert f"from {wheels} failed: ERROR: " in done.stdout
    assert (tmp_path / "r.md").read_text() == done.stdout
    done = subprocess.run(
        [*cmd, "--wheels", str(tmp_path / "none")], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stdout.endswith(f"and no wheel folder {tmp_path / 'none'} (benchmarks/gpu/wheels.sh)\n")


def test_its_matrices_are_what_the_issue_asks_and_bench_accepts_them(tmp_path):
    from orchestrator.config.matrix import load_matrix

    configs = load_matrix(phases.write_matrix(tmp_path / "m.yaml", phases.matrix_phase())).configs
    assert {(c.framework, c.device, c.image_size) for c in configs} == {("pytorch", "cuda", 224)}
    assert {c.model for c in configs if c.batch_size == 64} == set(phases.MODELS)
    assert sorted(c.batch_size for c in configs if c.model == "resnet50") == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        128,
        256,
        512,
    ]
    assert all(c.train_size >= 2 * c.batch_size for c in configs)
    oom = load_matrix(phases.write_matrix(tmp_path / "o.yaml", phases.oom_phase(80 * GIB))).configs
    assert [c.gpu_memory_budget for c in oom] == [GIB, None]
    assert oom[1].batch_size == 512 and oom[1].train_size >= 512  # 512 x 320 MiB = 2 x 80 GiB
    assert phases.oom_batch(141 * GIB) == 1024
    traced = load_matrix(phases.write_matrix(tmp_path / "k.yaml", phases.kernels_phase())).configs
    assert [(c.model, c.trace) for c in traced] == [("resnet50", "kernels"), ("vgg16", "kernels")]


def test_the_modes_and_attention_phases_are_valid_matrices(tmp_path):
    """Issue 24's and 25's GPU checks: PyTorch in every mode and precision (JAX's compiled ones
    where a JAX with CUDA is registered), the attention models in fp32 and bf16, traced once."""
    from orchestrator.config.matrix import load_matrix

    configs = load_matrix(phases.write_matrix(tmp_path / "m.yaml", modes.modes_phase(jax=True))).configs
    torch = {(c.mode, c.precision) for c in configs if c.framework == "pytorch"}
    assert torch == {("eager", None), ("eager", "tf32"), ("eager", "bf16"), ("eager", "fp16")} | {
        (m, p) for m in ("graph", "compiled") for p in (None, "bf16")
    }  # fp32 is stored as None
    assert {c.precision for c in configs if c.framework == "jax"} == {None, "tf32", "bf16", "fp16"}
    assert {c.device for c in configs} == {"cuda"} and all(c.train_size >= 2 * c.batch_size for c in configs)
    without = load_matrix(phases.write_matrix(tmp_path / "n.yaml", modes.modes_phase(jax=False))).configs
    assert {c.framework for c in without} == {"pytorch"}
    attention = load_matrix(phases.write_matrix(tmp_path / "a.yaml", modes.attention_phase())).configs
    assert {(c.model, c.precision, c.trace) for c in attention} == {
        ("vit_b16", None, None),
        ("vit_b16", "bf16", None),
        ("gpt2_small", None, None),
        ("gpt2_small", "bf16", None),
        ("vit_b16", None, "kernels"),
        ("gpt2_small", None, "kernels"),
    }
    assert {c.sequence_length for c in attention if c.model == "gpt2_small"} == {1024}


def test_the_transformers_phase_is_the_shipped_matrix_cuda_half(tmp_path):
    """The shipped matrix's own settings on cuda, in the frameworks the GPU machine has."""
    from orchestrator.config.matrix import load_matrix

    shipped = load_matrix(REPO / "matrices" / "transformers.yaml").configs
    for jax, frameworks in ((True, {"pytorch", "jax"}), (False, {"pytorch"})):
        path = phases.write_matrix(tmp_path / f"t{jax}.yaml", modes.transformers_phase(jax))
        configs = load_matrix(path).configs
        want = [c for c in shipped if c.device == "cuda" and c.framework in frameworks]
        assert len(configs) == len(want) == 6 * len(frameworks)
        assert {c.config_hash for c in configs} == {c.config_hash for c in want}


def _row(**over):
    row = {"id": 1, "framework": "pytorch", "model": "resnet50", "mode": "eager", "precision": "bf16"}
    row.update(outcome="ok", resolved_mode="eager", resolved_precision="bf16", images_per_second=10.0)
    row.update(compile_seconds=None, reason=None, execution='{"compute_dtypes": {"matmul": "bfloat16"}}')
    row.update(over)
    return row


def test_the_modes_check_wants_what_was_asked_for():
    assert modes.check_modes([_row()]).status == "PASS"
    # autocast that left the matrix products in float32 did not run in bf16
    fp32_inside = _row(execution='{"compute_dtypes": {"matmul": "float32"}}')
    assert modes.check_modes([fp32_inside]).status == "FAIL"
    assert modes.check_modes([_row(resolved_precision="fp32")]).status == "FAIL"
    refused = _row(outcome="unsupported", reason="tf32 needs an Ampere GPU", resolved_precision=None)
    assert modes.check_modes([refused]).status == "PASS"
    assert modes.check_modes([_row(outcome="error", reason="boom")]).status == "FAIL"
    assert modes.check_modes([]).status == "NOTE"


FAULT_SWEEPS = {
    "gpu-check-matrix": "  - {fault: sleep, seconds: 0.6}\n"
    "  - {fault: sleep, seconds: 0.6, batch_size: 16}\n",
    "gpu-check-oom": "  - {fault: oom}\n",
    # The fault worker's tracer: made-up records under real kernel and operator names.
    "gpu-check-kernels": "  - {fault: ok, trace: kernels, model: resnet50}\n"
    "  - {fault: ok, trace: kernels, model: vgg16}\n",
}


@pytest.mark.slow
def test_the_checks_read_real_runs_and_fail_what_needs_a_gpu(cli, write_matrix, workdir):
    for name, runs in FAULT_SWEEPS.items():
        text = (
            f"name: {name}\nsettings: {{framework: fault, dataset_size: 64, batch_size: 8}}\ninclude:\n{runs}"
        )
        assert cli("run", "--matrix", str(write_matrix(text, f"{name}.yaml"))).exit_code == 0
    kernels_report = cli("report", "--kernels", "--format", "markdown").output
    context = {"nvtx_library": "none", "kernels_report": kernels_report}
    found = {c.name: c for c in report.checks(workdir / "bench.db", workdir, context)}
    runs = found["every cuda run ok, images/s and epoch seconds"]
    assert runs.status == "PASS" and runs.summary == "2 of 2 runs ok"
    assert runs.details[2].startswith("| 1 | small_cnn | 8 | ok | ")  # figures as recorded
    memory = found["NVML per-process memory against torch.cuda.max_memory_reserved"]
    assert memory.status == "FAIL" and "lack NVML's peak or torch's" in memory.summary
    host_oom = found["oom at a batch too large for the card"]
    assert host_oom.status == "FAIL" and "does not name the device" in host_oom.summary
    assert "MemoryError" in "\n".join(host_oom.details)
    assert found["oom under gpu_memory_budget"].status == "NOTE"  # that sweep has no budget run
    energy = found["GPU energy per epoch and per image"]
    assert energy.status == "FAIL" and "no GPU energy counter: " in "\n".join(energy.details)
    assert found["NVTX ranges in the tracer's output"].status == "FAIL"
    kernels = found["trace: kernels on cuda, classified (resnet50, vgg16)"]
    assert kernels.status == "PASS" and kernels.summary == "every kernel name classified"
    assert kernels.details[0].startswith(
        "- run 4 resnet50: ok, backend fault (synthetic), trace ok; convolution 50.0%"
    )
    assert kernels_report.strip() and kernels_report.strip() in "\n".join(kernels.details)
    assert found["harness overhead against the bare loop (resnet50, 224 px, batch 64)"].status == "NOTE"
    page = report.markdown(list(found.values()), {"cuda": {"device": "none"}, "phases": []})
    assert page.startswith("# bench GPU check\n") and "- result: 2 PASS, 4 FAIL, 2 NOTE" in page


def test_unclassified_means_no_rule_matched_not_a_deliberate_other():
    from profiler import kernels as rules

    assert rules.rule_for("aten::view") == rules.OTHER  # bookkeeping, classified on purpose
    assert rules.rule_for("zz_made_up_name") is None and rules.kernel_class("zz_made_up_name") == rules.OTHER
    assert rules.rule_for("volta_sgemm_128x64_nn") == rules.GEMM


def test_a_phase_asked_for_that_left_no_sweep_fails(tmp_path):
    found = report.checks(tmp_path / "absent.db", tmp_path, {"phases": ["oom", "overhead"]})
    status = {c.name: c.status for c in found}
    assert status["oom under gpu_memory_budget"] == status["oom at a batch too large for the card"] == "FAIL"
    assert status["harness overhead against the bare loop (resnet50, 224 px, batch 64)"] == "FAIL"
    assert status["every cuda run ok, images/s and epoch seconds"] == "NOTE"  # matrix not asked for


def test_a_report_is_written_after_each_phase_and_phases_to_come_are_not_failures(tmp_path):
    """The first GPU run's call was cut off by its time limit before any report was written: the
    report is now rewritten after every phase, saying which phases are still to run."""
    import argparse

    out = tmp_path / "gpu-check.md"
    args = argparse.Namespace(
        phases=["oom", "overhead"], out=out, registered="BENCH_PYTHON_PYTORCH", nvtx="none"
    )
    cuda = {"python": sys.executable, "device": "none"}
    common = (args, {}, tmp_path / "commands.log", tmp_path / "absent.db", tmp_path, cuda, None)
    found = phases.write_report(*common, {"oom": 1.0}, 0.0, final=False)
    status = {c.name: c.status for c in found}
    assert status["oom under gpu_memory_budget"] == "FAIL"  # it ran and left nothing
    assert status["harness overhead against the bare loop (resnet50, 224 px, batch 64)"] == "NOTE"
    assert out.read_text().startswith("**Partial: phases still to run: overhead.**\n\n# bench GPU check\n")
    found = phases.write_report(*common, {"oom": 1.0, "overhead": 1.0}, 0.0, final=True)
    assert {c.name: c.status for c in found}[
        "harness overhead against the bare loop (resnet50, 224 px, batch 64)"
    ] == "FAIL"
    assert out.read_text().startswith("# bench GPU check\n")


def test_an_unsupported_traced_row_is_a_note_and_a_crash_a_failure(tmp_path):
    """The transformers phase's JAX rows without a GPU tracer end unsupported with the reason: the
    check says so (NOTE) and lists the reason; a crashed row fails it."""
    ok = _row(id=1, model="vit_b16", trace=None, tokens_per_second=None)
    unsupported = _row(
        id=2, framework="jax", model="vit_b16", trace="kernels", outcome="unsupported", tokens_per_second=None
    )
    unsupported["reason"] = "trace: kernels on cuda needs CUPTI\n\x1b[31m"
    check = modes.check_attention(tmp_path / "none.db", [ok, unsupported], "t", "transformers")
    assert check.status == "NOTE" and "runs [2] unsupported" in check.summary
    assert "(trace: kernels on cuda needs CUPTI " in check.details[1] and "\x1b" not in check.details[1]
    crashed = _row(id=3, model="gpt2_small", trace=None, outcome="crashed", tokens_per_second=None)
    check = modes.check_attention(tmp_path / "none.db", [ok, unsupported, crashed], "t", "transformers")
    assert check.status == "FAIL" and "[3]" in check.summary
    assert modes.check_attention(tmp_path / "none.db", [], "t", "transformers").status == "NOTE"

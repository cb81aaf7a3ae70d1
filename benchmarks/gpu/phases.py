"""The phases of benchmarks/gpu/check.py once CUDA is known to be there: matrices, runs, report.

Each phase runs `bench run` with a matrix of its own (sweep names gpu-check-<phase>) into one
database under --work, so a phase left out of this call is read from an earlier one's sweep there.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu import plan as planning
from benchmarks.gpu import report

REPO = Path(__file__).resolve().parents[2]
MODELS = ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16")
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BATCH = 64
IMAGE = 224
# Device memory a ResNet50 training step needs per image at 448 px, fp32, taken low on purpose
# (about a quarter of it at 224 px): the oom phase's batch asks for at least twice the card.
OOM_BYTES_PER_IMAGE_448 = 320 << 20
SETTINGS = {
    "framework": "pytorch",
    "device": "cuda",
    "image_size": IMAGE,
    "classes": 1000,
    "dataset": "synthetic",
    "optimizer": "sgd",
    "lr": 0.01,
    "momentum": 0.9,
    "warmup_steps": 5,
    "repeats": 1,
    "timeout": 300,
    "seed": 0,
}


def dataset_for(train: int, val_fraction: float = 0.2) -> int:
    """The dataset size whose training split holds at least ``train`` images."""
    size = math.ceil(train / (1 - val_fraction))
    while size - round(size * val_fraction) < train:
        size += 1
    return size


def matrix_phase() -> dict[str, Any]:
    runs = [{"model": m, "batch_size": BATCH, "epochs": 2, "dataset_size": dataset_for(1024)} for m in MODELS]
    for batch in SWEEP_BATCHES:
        if batch != BATCH:
            # At least two steps, and 256 images: enough samples per epoch for the energy figures.
            train = max(256, 2 * batch)
            runs.append(
                {"model": "resnet50", "batch_size": batch, "epochs": 1, "dataset_size": dataset_for(train)}
            )
    return {"name": "gpu-check-matrix", "settings": SETTINGS, "include": runs}


def oom_batch(total_memory: int) -> int:
    """A power of two at which ResNet50 at 448 px needs at least twice the card's memory."""
    batch = 1
    while batch * OOM_BYTES_PER_IMAGE_448 < 2 * total_memory:
        batch *= 2
    return batch


def oom_phase(total_memory: int) -> dict[str, Any]:
    batch = oom_batch(total_memory)
    runs = [
        {
            "model": "resnet50",
            "batch_size": BATCH,
            "gpu_memory_budget": "1GiB",
            "dataset_size": dataset_for(256),
        },
        {"model": "resnet50", "batch_size": batch, "image_size": 448, "dataset_size": dataset_for(batch)},
    ]
    return {
        "name": "gpu-check-oom",
        "settings": {**SETTINGS, "epochs": 1, "warmup_steps": 1},
        "include": runs,
    }


def kernels_phase() -> dict[str, Any]:
    runs = [{"model": m, "batch_size": BATCH, "trace": "kernels"} for m in ("resnet50", "vgg16")]
    return {
        "name": "gpu-check-kernels",
        "settings": {**SETTINGS, "epochs": 1, "dataset_size": dataset_for(1024)},
        "include": runs,
    }


def write_matrix(path: Path, matrix: dict[str, Any]) -> Path:
    # JSON is YAML: no PyYAML needed to write it.
    path.write_text(json.dumps(matrix, indent=1) + "\n")
    return path


def overhead(work: Path, env: dict[str, str], log: Path) -> None:
    """benchmarks/harness/overhead.py on cuda; its figures go to <work>/overhead.json."""
    (work / "overhead.json").unlink(missing_ok=True)  # an earlier call's figures are not this one's
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.harness.overhead",
        "--framework",
        "pytorch",
        "--device",
        "cuda",
    ]
    cmd += ["--model", "resnet50", "--image-size", str(IMAGE), "--batch-size", str(BATCH), "--threads", "0"]
    cmd += ["--steps", "40", "--warmup", "10", "--rounds", "2", "--paired-passes", "2", "--idle-wait", "5"]
    cmd += ["--save", str(work / "overhead.json")]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    (work / "overhead.txt").write_text(done.stdout + done.stderr)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}  (exit {done.returncode})\n{done.stdout}{done.stderr[-4000:]}\n")


def run_all(
    args: argparse.Namespace,
    env: dict[str, str],
    cuda: dict[str, Any],
) -> int:
    """Register the interpreter, run the phases asked for, write the report; the exit status."""
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    db, log = work / "gpu-check.db", work / "commands.log"
    registered = register(Path(cuda["python"]), env, log)
    args.registered = registered
    from benchmarks.gpu import modes

    jax = None
    if "modes" in args.phases or "transformers" in args.phases:
        jax = modes.register_jax(getattr(args, "jax_python", None), Path(cuda["python"]), env, log)
    matrices = {
        "matrix": matrix_phase,
        "oom": lambda: oom_phase(cuda["total_memory"]),
        "kernels": kernels_phase,
        "modes": lambda: modes.modes_phase(jax is not None),
        "attention": modes.attention_phase,
        "transformers": lambda: modes.transformers_phase(jax is not None),
    }
    started = time.monotonic()
    timings: dict[str, float] = {}
    for phase in list(args.phases):
        if not still_fits(args, phase):
            args.phases.remove(phase)  # not run: the report lists it for the next slot
            continue
        begun = time.monotonic()
        print(f"gpu_check: phase {phase}", flush=True)
        if phase == "overhead":
            overhead(work, env, log)
        else:
            path = write_matrix(work / f"{phase}.yaml", matrices[phase]())
            run_bench(
                env, log, "run", "--matrix", str(path), "--db", str(db), "--runs-dir", str(work / "runs")
            )
        timings[phase] = time.monotonic() - begun
        if phase != args.phases[-1]:  # a call cut off by its time limit still leaves a report
            write_report(args, env, log, db, work, cuda, jax, timings, started, final=False)
    checks = write_report(args, env, log, db, work, cuda, jax, timings, started, final=True)
    print(f"gpu_check: report {args.out}: " + report.tally(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def still_fits(args: argparse.Namespace, phase: str) -> bool:
    """A planned phase starts only if its estimate ends before the call's deadline (an earlier
    phase may have overrun its own estimate); --phases (no deadline) runs every phase it names."""
    deadline = getattr(args, "deadline", None)
    if deadline is None:
        return True
    left = deadline - time.monotonic()
    if args.estimates[phase] <= left:
        return True
    print(
        f"gpu_check: phase {phase} left for the next slot: {args.estimates[phase]:.0f} s estimated, "
        f"{max(left, 0):.0f} s of the budget left",
        flush=True,
    )
    return False


def write_report(
    args: argparse.Namespace,
    env: dict[str, str],
    log: Path,
    db: Path,
    work: Path,
    cuda: dict[str, Any],
    jax: str | None,
    timings: dict[str, float],
    started: float,
    final: bool,
) -> list[report.Check]:
    """Write --out from the database as it stands; the checks. Before the last phase has run
    (``final`` False), a phase still to come is not a failure: the report says it has not run."""
    from benchmarks.gpu import modes

    kernels_text = ""
    traced = report.latest_sweep(db, "gpu-check-kernels")
    if traced is not None:
        kernels_text = run_bench(
            env, log, "report", "--kernels", "--db", str(db), "--format", "markdown", "--sweep", str(traced)
        ).stdout
    done = [p for p in args.phases if p in timings]
    context = {
        "cuda": cuda,
        "registered": getattr(args, "registered", ""),
        "phases": done if not final else args.phases,
        "timings": timings,
        "wall_seconds": time.monotonic() - started,
        "kernels_report": kernels_text,
        "nvtx_library": getattr(args, "nvtx", None) or nvtx_library(Path(cuda["python"])),
    }
    args.nvtx = context["nvtx_library"]  # probed once
    context["jax"] = jax or "none (the modes phase ran PyTorch alone)"
    checks = report.checks(db, work, context) + modes.checks(db)
    for c in checks:  # as report.checks does for its own
        if c.missing in done:
            c.status, c.summary = "FAIL", f"phase {c.missing} ran but left no sweep (commands.log says why)"
    text = report.markdown(checks, context)
    if getattr(args, "plan_lines", None):
        text += "\n".join(["", "## This call's plan", "", *args.plan_lines]) + "\n"
    text += "\n".join(planning.next_slot(db, work)) + "\n"
    if not final:
        pending = [p for p in args.phases if p not in timings]
        text = f"**Partial: phases still to run: {', '.join(pending)}.**\n\n" + text if pending else text
    args.out.write_text(text)
    return checks


def run_bench(env: dict[str, str], log: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from orchestrator.cli.main import main; main()", *args]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    with open(log, "a") as f:
        f.write(f"$ bench {' '.join(args)}  (exit {done.returncode})\n{done.stdout}{done.stderr[-4000:]}\n")
    return done


def register(python: Path, env: dict[str, str], log: Path) -> str:
    """Make `python` bench's pytorch environment: `bench env use` where this bench has it."""
    if re.search(r"^\s+use\s", run_bench(env, log, "env", "--help").stdout, re.M):
        done = run_bench(env, log, "env", "use", "pytorch", "--python", str(python))
        if done.returncode == 0:
            return f"`bench env use pytorch --python {python}`"
        how = f"`bench env use` refused ({(done.stderr or done.stdout).strip()[-200:]}); "
    else:
        how = "this bench has no `bench env use`; "
    env["BENCH_PYTHON_PYTORCH"] = str(python)
    return how + f"BENCH_PYTHON_PYTORCH={python}"


def nvtx_library(python: Path) -> str:
    """Where the worker's NVTX ranges go: the library workers/nvtx.py loads in that interpreter."""
    code = (
        "from workers import nvtx; m = nvtx.marks_for({'device': 'cuda', 'framework': 'pytorch'}); "
        "print(getattr(m, 'source', 'none'))"
    )
    done = subprocess.run([str(python), "-c", code], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() or f"probe failed: {done.stderr.strip()[-200:]}"

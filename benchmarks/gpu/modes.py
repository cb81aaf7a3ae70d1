"""The GPU check's phases for execution modes, precision and the attention models (issues 24, 25;
benchmarks/gpu/check.py, docs/gpu.md): their matrices and their checks.

    modes      PyTorch ResNet50 at 224 px, batch 64: eager in fp32, tf32, bf16 and fp16 (autocast,
               GradScaler), graph (aot_eager) and compiled (inductor) in fp32 and bf16; JAX's
               compiled ResNet50 in fp32, tf32, bf16 and fp16 where a JAX with CUDA is registered
    attention  PyTorch ViT-B/16 (batch 64) and GPT-2 small (1,024 tokens, batch 8) in fp32 and bf16,
               and each once traced (`trace: kernels`): flash or memory-efficient attention kernels
               classed as fused attention, beside the GEMMs and batched GEMMs
    transformers  matrices/transformers.yaml's cuda rows (ResNet50, ViT-B/16, GPT-2 small, each
               untraced and traced) in PyTorch, and in JAX where a JAX with CUDA is registered: the
               shipped matrix's own settings, the figures docs/performance.md sets beside the CPU's

Sizes are small (an epoch or two of a few steps) so that both fit the device's time budget beside
the other phases; the figures are a check, not a study.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.gpu import phases, report
from orchestrator.text.terminal import safe_line

MODES_RUNS = [
    *({"mode": "eager", "precision": p} for p in ("fp32", "tf32", "bf16", "fp16")),
    *({"mode": m, "precision": p} for m in ("graph", "compiled") for p in ("fp32", "bf16")),
]
JAX_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
ATTENTION_MODELS = ("vit_b16", "gpt2_small", "vit_tiny", "gpt_tiny")


def modes_phase(jax: bool) -> dict[str, Any]:
    # JAX first: its runs are the shorter ones (no inductor), so a call cut off by its time limit
    # still brings back every JAX precision.
    runs: list[dict[str, Any]] = []
    if jax:
        runs += [
            {"framework": "jax", "model": "resnet50", "mode": "compiled", "precision": p}
            for p in JAX_PRECISIONS
        ]
    runs += [{"model": "resnet50", **r} for r in MODES_RUNS]
    settings = {**phases.SETTINGS, "batch_size": phases.BATCH, "epochs": 2, "min_time": 0, "min_steps": 1}
    return {
        "name": "gpu-check-modes",
        "settings": {**settings, "dataset_size": phases.dataset_for(256)},
        "include": runs,
    }


def attention_phase() -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for precision in ("fp32", "bf16"):
        runs.append({"model": "vit_b16", "batch_size": phases.BATCH, "precision": precision})
        runs.append({"model": "gpt2_small", "batch_size": 8, "sequence_length": 1024, "precision": precision})
    runs += [{**r, "trace": "kernels"} for r in runs[:2]]
    settings = {
        **phases.SETTINGS,
        "epochs": 2,
        "min_time": 0,
        "min_steps": 1,
        "dataset_size": phases.dataset_for(128),
    }
    return {"name": "gpu-check-attention", "settings": settings, "include": runs}


def transformers_phase(jax: bool) -> dict[str, Any]:
    """The shipped matrix's cuda half, as shipped but for the frameworks the GPU machine has."""
    import yaml

    matrix = yaml.safe_load((phases.REPO / "matrices" / "transformers.yaml").read_text())
    matrix["name"] = "gpu-check-transformers"
    matrix["axes"]["framework"] = ["pytorch", "jax"] if jax else ["pytorch"]
    matrix["axes"]["device"] = ["cuda"]
    matrix.pop("include", None)
    return matrix


def _execution(run: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(run.get("execution") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def check_modes(runs: list[dict[str, Any]]) -> report.Check:
    name = "modes and precisions on cuda (PyTorch, JAX): each ran as asked, or says why not"
    if not runs:
        return report.not_run(name, "modes")
    rows, wrong = [], []
    for r in runs:
        asked, ran = r.get("precision") or "fp32", r.get("resolved_precision")
        dtypes = _execution(r).get("compute_dtypes") or {}
        rows.append(
            [
                r["id"],
                r["framework"],
                r.get("mode") or "default",
                asked,
                r["outcome"],
                r.get("resolved_mode"),
                ran,
                json.dumps(dtypes, sort_keys=True)[:80],
                report.fig(r["images_per_second"]),
                report.fig(r.get("compile_seconds"), 3),
                (r["reason"] or "")[:100],
            ]
        )
        if r["outcome"] == "unsupported" and r["reason"]:
            continue  # an honest refusal names what is missing
        half = {"bf16": "bfloat16", "fp16": "float16"}.get(asked)
        matmul = str(dtypes.get("matmul") or dtypes.get("conv") or "")
        if (
            r["outcome"] != "ok"
            or ran != asked
            or (half and r["framework"] == "pytorch" and half not in matmul)
        ):
            wrong.append(r["id"])
    header = [
        "run",
        "framework",
        "mode",
        "precision",
        "outcome",
        "ran mode",
        "ran precision",
        "compute dtypes",
        "images/s",
        "compile s",
        "reason",
    ]
    details = report.table(header, rows)
    if wrong:
        return report.Check(name, "FAIL", f"runs {wrong} did not run as asked (or failed)", details)
    return report.Check(
        name, "PASS", f"{len(runs)} runs: each ok as asked, or unsupported with a reason", details
    )


def check_attention(
    db: Path,
    runs: list[dict[str, Any]],
    name: str = "attention models on cuda: runs ok, fused attention kernels in the trace",
    phase: str = "attention",
) -> report.Check:
    if not runs:
        return report.not_run(name, phase)
    lines, failed, unsupported, unclassified = [], [], [], []
    for r in runs:
        line = (
            f"- run {r['id']} {r['framework']} {r['model']} {r.get('precision') or 'fp32'}: {r['outcome']}, "
            f"{report.fig(r['images_per_second'])} samples/s, "
            f"{report.fig(r.get('tokens_per_second'))} tokens/s"
        )
        if r["outcome"] == "unsupported":  # a reason instead of a figure: said, not failed
            unsupported.append(r["id"])
            line += f" ({' '.join(str(r.get('reason') or 'no reason given').split())[:200]})"
        elif r["outcome"] != "ok":
            failed.append(r["id"])
        elif r.get("trace") == "kernels":
            shares, other = report.kernel_classes(db, r["id"])
            line += "; " + ", ".join(f"{c} {s:.1%}" for c, s in sorted(shares.items(), key=lambda x: -x[1]))
            if other:  # each needs a rule in profiler/kernels.py and a test pinned on it
                unclassified.append(r["id"])
                line += "; unclassified: " + ", ".join(n[:100] for n in other[:10])
            # PyTorch's attention is scaled_dot_product_attention: on cuda a flash or
            # memory-efficient kernel. Other frameworks' attention may be plain matrix products.
            fused = r["framework"] == "pytorch" and r["model"] in ATTENTION_MODELS
            if fused and not shares.get("fused attention"):
                failed.append(r["id"])
                line += " (no fused attention kernel)"
        lines.append(safe_line(line))  # names, reasons and outcomes are database rows
    if failed:
        return report.Check(name, "FAIL", f"runs {failed} failed or showed no fused attention kernel", lines)
    if unsupported or unclassified:
        said = [f"runs {unsupported} unsupported, with the reason"] if unsupported else []
        said += [f"runs {unclassified} have kernel names no rule classifies"] if unclassified else []
        return report.Check(
            name,
            "NOTE",
            f"{len(runs) - len(unsupported)} runs ok; " + "; ".join(said),
            lines,
        )
    return report.Check(
        name, "PASS", f"{len(runs)} runs ok; PyTorch's traced attention ran fused attention kernels", lines
    )


def checks(db: Path) -> list[report.Check]:
    return [
        check_modes(report.sweep_runs(db, "gpu-check-modes")),
        check_attention(db, report.sweep_runs(db, "gpu-check-attention")),
        check_attention(
            db,
            report.sweep_runs(db, "gpu-check-transformers"),
            "matrices/transformers.yaml on cuda: every row ok, PyTorch's traced attention fused",
            "transformers",
        ),
    ]


JAX_PROBE = "import jax; print(jax.__version__, jax.default_backend())"


def register_jax(given: str | None, pytorch: Path, env: dict[str, str], log: Path) -> str | None:
    """A JAX with CUDA for the modes phase: --jax-python, else PyTorch's interpreter where it has
    one (the GPU machine's Python may hold both), registered as bench's jax environment; None (and
    the phase runs PyTorch alone) where there is none."""
    import subprocess

    python = Path(given) if given else pytorch
    done = subprocess.run(
        [str(python), "-c", JAX_PROBE], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    words = done.stdout.split()
    with open(log, "a") as f:
        f.write(
            f"$ {python} -c {JAX_PROBE!r}  (exit {done.returncode})\n{done.stdout}{done.stderr[-1000:]}\n"
        )
    if done.returncode != 0 or len(words) < 2 or words[1] != "gpu":
        return None
    registered = phases.run_bench(env, log, "env", "use", "jax", "--python", str(python))
    if registered.returncode != 0:
        env["BENCH_PYTHON_JAX"] = str(python)
    return f"jax {words[0]} at {python}"

"""`bench models`: build each model for real in each framework's environment and count its
trainable parameters, one isolated process per framework and model (a crash is an outcome)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.launch.execute import launch
from orchestrator.provision import envs
from workers import models

PROBE_TIMEOUT = 600.0


def probe_one(
    framework: str, model: str, classes: int, image_size: int, env_root: str | None, workdir: Path
) -> dict[str, Any]:
    arch = models.build_arch(model, classes, image_size)
    row: dict[str, Any] = {
        "framework": framework,
        "model": model,
        "reference": models.infer(arch)["parameters"],
        # a batch of 2: [2, classes], or a language model's next token at every position [2, L, vocab]
        "expected_output": [2, *arch["output"]],
    }
    python, where = envs.python_for(framework, env_root)
    if python is None:
        return {**row, "outcome": "unavailable", "reason": where}
    return {**row, **probe_with(python, framework, model, classes, image_size, workdir)}


def probe_with(
    python: Path, framework: str, model: str, classes: int, image_size: int, workdir: Path
) -> dict[str, Any]:
    """Build one model with this interpreter's worker: outcome, parameters, what the framework said."""
    config = RunConfig(
        framework=framework, model=model, classes=classes, image_size=image_size, timeout=PROBE_TIMEOUT
    )
    run_dir = workdir / f"{framework}-{model}"
    # The sequence every run goes through, less what a build-and-count has no use for: the sampler
    # (the trace and the CPU pinning are off in a default configuration already).
    rec = launch(config, run_dir, lambda: (python, ""), task="probe", sample=False)
    outcome = rec.outcome
    result = outcome.result or {}
    reason = outcome.reason if outcome.outcome != "ok" else None
    if outcome.exception_type and reason:
        reason = f"{outcome.exception_type}: {outcome.exception_message}"
    info = result.get("info") or {}
    return {
        "outcome": outcome.outcome,
        "parameters": result.get("parameter_count"),
        "output_shape": result.get("output_shape"),
        "framework_version": info.get("framework_version"),
        "python_version": result.get("python_version"),
        "build": info.get("build"),
        "cuda_version": info.get("cuda_version"),
        "reason": reason,
    }


def probe_all(
    frameworks: Iterable[str],
    model_names: Iterable[str],
    classes: int,
    image_size: int,
    env_root: str | None,
    echo: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-models-") as tmp:
        for framework in frameworks:
            for model in model_names:
                row = probe_one(framework, model, classes, image_size, env_root, Path(tmp))
                if echo:
                    echo(f"{framework}/{model}: {row['outcome']} {row.get('parameters') or ''}".rstrip())
                rows.append(row)
    return rows

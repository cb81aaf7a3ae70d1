"""`bench env use`: check an interpreter the user already has before it becomes a framework's environment.

The check is the real thing, once: the interpreter runs bench's worker (standard library, Python 3.6+),
which imports the framework and builds a small model with it; what the framework says of itself
(version, cpu or cuda build, CUDA version) is kept with the registration.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.errors import ConfigError, EnvironmentSetupError
from orchestrator.provision.short_run import run_short

CHECK_MODEL = "small_cnn"  # the smallest model of the one definition, at 32 px and 10 classes
MIN_PYTHON = (3, 6)  # the worker core's floor (Singa's interpreter)


# Runs bench's worker under an interpreter and counts a model's parameters: launch/probe.py's
# probe_with, handed in by the CLI, since starting a worker is launch's part, not provision's.
BuildCheck = Callable[[Path, str, str, int, int, Path], dict[str, Any]]


def check(framework: str, python: str, build: BuildCheck) -> dict[str, Any]:
    """The registration entry for a working interpreter; EnvironmentSetupError saying why not."""
    if framework not in FRAMEWORKS or framework == "fault":
        known = ", ".join(f for f in FRAMEWORKS if f != "fault")
        raise ConfigError(f"bench env use: unknown framework {framework!r} (known: {known})")
    # absolute(), not resolve(): a venv's python is a symlink whose target is another environment.
    path = Path(python).expanduser().absolute()
    where = f"bench env use {framework}: --python {python}"
    if not path.is_file():
        raise EnvironmentSetupError(f"{where}: no such file")
    if not os.access(path, os.X_OK):
        raise EnvironmentSetupError(f"{where}: not executable")
    version = _python_version(path, where)
    built = _build_check(path, framework, build)
    if built["outcome"] != "ok":
        raise EnvironmentSetupError(
            f"{where}: cannot run bench's {framework} worker ({built['outcome']}): {built['reason']}"
        )
    if built["parameters"] != built["reference"]:
        raise EnvironmentSetupError(
            f"{where}: {framework} {built['framework_version']} builds {CHECK_MODEL} with "
            f"{built['parameters']} trainable parameters, not the {built['reference']} of its definition"
        )
    return {
        "python": str(path),
        "python_version": version,
        "framework_version": built["framework_version"],
        "build": built["build"],
        "cuda_version": built["cuda_version"],
        "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def describe(entry: dict[str, Any]) -> str:
    build = entry.get("build") or "unknown"
    text = f"python {entry.get('python_version')}, {entry.get('framework_version')}, {build} build"
    return text + (f", CUDA {entry['cuda_version']}" if entry.get("cuda_version") else "")


def _python_version(path: Path, where: str) -> str:
    code = "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"
    try:
        proc = run_short([str(path), "-c", code], timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentSetupError(f"{where}: does not run ({exc})") from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise EnvironmentSetupError(f"{where}: does not run as Python: {last[0]}")
    version = proc.stdout.strip()
    try:
        numbers = tuple(int(n) for n in version.split("."))
    except ValueError:
        raise EnvironmentSetupError(f"{where}: does not run as Python (printed {version[:40]!r})") from None
    if numbers[:2] < MIN_PYTHON:
        raise EnvironmentSetupError(f"{where}: Python {version}; bench's worker needs 3.6 or newer")
    return version


def _build_check(path: Path, framework: str, build: BuildCheck) -> dict[str, Any]:
    from workers import models

    reference = models.infer(models.build_arch(CHECK_MODEL, 10, 32))["parameters"]
    with tempfile.TemporaryDirectory(prefix="bench-env-use-") as tmp:
        row = build(path, framework, CHECK_MODEL, 10, 32, Path(tmp))
    return {**row, "reference": reference}

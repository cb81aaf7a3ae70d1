"""Running a check script in a framework's own environment: the frameworks never enter pytest."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.provision import envs

REPO = Path(__file__).resolve().parent.parent


def framework_python(framework: str) -> Path:
    """The framework environment's interpreter; the test fails (never skips) without it."""
    python, why = envs.python_for(framework)
    if python is None:
        pytest.fail(f"the {framework} environment is missing: {why}")
    return python


def run_driver(
    python: Path, script: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run a script with the framework's interpreter, the repository importable; it must exit 0."""
    return run_in_repo([str(python), str(script), *args], env, timeout)


def run_module(
    python: Path, module: str, *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m module`` (a benchmark: benchmarks.inside.bare_pytorch_loop, ...) with the
    framework's interpreter, as the benchmarks launch it; it must exit 0."""
    return run_in_repo([str(python), "-m", module, *args], None, timeout)


def run_in_repo(
    cmd: list[str], env: Mapping[str, str] | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        env={**(os.environ if env is None else env), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def drive(
    python: Path,
    folder: Path,
    script: str,
    checks: list[list[Any]],
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> tuple[dict[str, Any], str]:
    """Run a driver script (tests/driver_checks.py) in the framework's environment.

    Returns the checks' results by name, and the driver's stderr.
    """
    path, out = folder / "driver.py", folder / f"results-{checks[0][0]}.json"
    path.write_text(script)
    proc = run_driver(python, path, str(out), json.dumps(checks), env=env, timeout=timeout)
    return json.loads(out.read_text()), proc.stderr


def checked(results: Mapping[str, Any]) -> Callable[[str], Any]:
    """result(name): that check's value; a check that raised in the driver fails the calling test."""

    def result(name: str) -> Any:
        value = results[name]
        if isinstance(value, dict) and "driver_error" in value:
            pytest.fail(value["driver_error"])
        return value

    return result

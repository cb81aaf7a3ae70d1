"""Running a check script in a framework's own environment: the frameworks never enter pytest."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from orchestrator import envs

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
    proc = subprocess.run(
        [str(python), str(script), *args],
        cwd=REPO,
        env={**(os.environ if env is None else env), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc

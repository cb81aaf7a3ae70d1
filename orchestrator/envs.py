"""Framework environments: one virtual environment per framework, made from pinned requirements.

The orchestrator only ever runs these interpreters; it never imports what is installed in them.
Where an environment lives, in order: ``BENCH_PYTHON_<FRAMEWORK>`` (an interpreter to use as is),
else ``<env dir>/<framework>/bin/python`` with the env dir from ``--env-dir``, ``BENCH_ENV_DIR``,
or ``$XDG_CACHE_HOME/bench/envs`` (``~/.cache/bench/envs``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import EnvironmentSetupError

log = logging.getLogger(__name__)

REQUIREMENTS_DIR = Path(__file__).resolve().parent.parent / "envs"
MARKER = "bench-env.json"
# The distribution whose version identifies each framework (read without importing it).
DISTRIBUTIONS = {"pytorch": "torch"}


def env_dir(override: str | Path | None = None) -> Path:
    if override:
        return Path(override)
    if os.environ.get("BENCH_ENV_DIR"):
        return Path(os.environ["BENCH_ENV_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / "envs"


def requirements_file(framework: str) -> Path:
    return REQUIREMENTS_DIR / f"{framework}.txt"


@dataclass(frozen=True)
class EnvStatus:
    framework: str
    status: str  # ok | unavailable
    python: str | None
    reason: str | None
    location: str | None
    python_version: str | None = None
    framework_version: str | None = None


def python_for(framework: str, root: str | Path | None = None) -> tuple[Path | None, str]:
    """The interpreter that runs this framework's worker, or None and the reason why not."""
    override = os.environ.get(f"BENCH_PYTHON_{framework.upper()}")
    if override:
        path = Path(override)
        if path.exists():
            return path, f"BENCH_PYTHON_{framework.upper()}"
        return None, f"BENCH_PYTHON_{framework.upper()}={override} does not exist"
    if framework == "fault":
        # The fault worker is standard library only: the orchestrator's own interpreter runs it.
        return Path(sys.executable), "the orchestrator's interpreter"
    python = env_dir(root) / framework / "bin" / "python"
    if python.exists():
        return python, str(python.parent.parent)
    return None, (
        f"no {framework} environment at {python.parent.parent}: "
        f"run `bench env setup {framework}` (or set BENCH_PYTHON_{framework.upper()})"
    )


def _probe(python: Path, framework: str) -> tuple[str | None, str | None, str | None]:
    """Python and framework versions of an interpreter, read from package metadata (no import)."""
    dist = DISTRIBUTIONS.get(framework)
    code = (
        "import json, platform\n"
        "from importlib import metadata\n"
        "v = None\n"
        f"try: v = metadata.version({dist!r})\n"
        "except Exception: pass\n"
        "print(json.dumps([platform.python_version(), v]))\n"
    )
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        py, version = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, None, f"{python} does not run: {exc}"
    if dist and version is None:
        return py, None, f"{dist} is not installed in {python}: run `bench env setup {framework}`"
    return py, version, None


def status(framework: str, root: str | Path | None = None) -> EnvStatus:
    python, where = python_for(framework, root)
    if python is None:
        return EnvStatus(framework, "unavailable", None, where, None)
    py, version, problem = _probe(python, framework)
    if framework == "fault":
        version = "fault"
    state = "unavailable" if problem else "ok"
    return EnvStatus(framework, state, str(python), problem, where, py, version)


def _requirements_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def setup(framework: str, root: str | Path | None = None, echo=log.info) -> Path:
    """Create or update the framework's environment; a no-op when it is already up to date."""
    reqs = requirements_file(framework)
    if not reqs.exists():
        raise EnvironmentSetupError(f"{framework}: no pinned requirements at {reqs}")
    target = env_dir(root) / framework
    marker = target / MARKER
    wanted = _requirements_hash(reqs)
    if marker.exists() and json.loads(marker.read_text()).get("requirements_hash") == wanted:
        echo(f"{framework}: up to date at {target}")
        return target / "bin" / "python"
    echo(f"{framework}: creating {target} from {reqs.name}")
    _check_call([sys.executable, "-m", "venv", "--clear", str(target)], framework)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    _check_call([*pip, "--disable-pip-version-check", "-r", str(reqs)], framework)
    marker.write_text(json.dumps({"requirements_hash": wanted, "requirements": reqs.name}))
    echo(f"{framework}: ready")
    return target / "bin" / "python"


def _check_call(cmd: list[str], framework: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise EnvironmentSetupError(
            f"{framework}: `{' '.join(cmd[:4])} ...` failed with exit {proc.returncode}: {tail[0]}"
        )

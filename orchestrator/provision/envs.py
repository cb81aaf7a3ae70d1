"""Framework environments: one virtual environment per framework, made from pinned requirements,
or an existing interpreter the user registered (``bench env use``); and one per other release a
matrix's ``version`` names, ``<env dir>/<framework>@<version>/``, from ``envs/<framework>@<version>.txt``.

The orchestrator only ever runs these interpreters; it never imports what is installed in them.
Where an environment lives, in order: ``BENCH_PYTHON_<FRAMEWORK>`` (an interpreter to use as is),
else an interpreter registered with ``bench env use`` (``<env dir>/external.json``), else
``<env dir>/<framework>/bin/python``; the env dir comes from ``--env-dir``, ``BENCH_ENV_DIR``, or
``$XDG_CACHE_HOME/bench/envs`` (``~/.cache/bench/envs``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator import shipped
from orchestrator.config import pins
from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.errors import ConfigError, EnvironmentSetupError
from orchestrator.provision.short_run import run_short
from workers import frameworks, releases

log = logging.getLogger(__name__)

MARKER = "bench-env.json"
# Interpreters registered with `bench env use`, per env dir: {framework: {python, versions, build}}.
EXTERNAL_FILE = "external.json"
EXTERNAL = "external (bench env use)"
# What a framework name must look like before any folder or variable name is made from it.
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
REGISTRY_LIMIT = 1 << 20  # bytes: external.json holds a few entries of a few hundred bytes
ENTRY_KEYS = frozenset(
    {"python", "python_version", "framework_version", "build", "cuda_version", "registered_at"}
)
# The distribution whose version identifies each framework (read without importing it), and the
# frameworks whose only wheels need another Python than the orchestrator's (workers/frameworks.py).
DISTRIBUTIONS = {f.name: f.distribution for f in frameworks.FRAMEWORKS if f.distribution}
PYTHON_SERIES = {f.name: f.python_series for f in frameworks.FRAMEWORKS if f.python_series}
# The newest pip each old series can run. Needed because a package index may list pip releases
# without their Requires-Python, and the venv's own pip (18.1 on 3.6) cannot read manylinux2014.
PIP_FOR_SERIES = {"3.6": "pip<22"}


def env_dir(override: str | Path | None = None) -> Path:
    if override:
        return Path(override)
    if os.environ.get("BENCH_ENV_DIR"):
        return Path(os.environ["BENCH_ENV_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / "envs"


VARIANTS = ("auto", "cpu", "cuda")


def requirements_file(framework: str, variant: str = "cpu") -> Path:
    """envs/<framework>.txt (CPU builds) or envs/<framework>-cuda.txt (GPU builds)."""
    return shipped.path("envs") / (f"{framework}.txt" if variant == "cpu" else f"{framework}-{variant}.txt")


def choose_variant(framework: str, requested: str = "auto", has_gpu: bool | None = None) -> str:
    """The build to install: GPU builds on a machine with an NVIDIA GPU where the framework has one."""
    if requested != "auto":
        return requested
    if has_gpu is None:
        from orchestrator.provision import hostinfo

        has_gpu = hostinfo.machine()["gpu_name"] is not None
    return "cuda" if has_gpu and requirements_file(framework, "cuda").exists() else "cpu"


@dataclass(frozen=True)
class EnvStatus:
    framework: str
    status: str  # ok | unavailable
    python: str | None
    reason: str | None
    location: str | None
    python_version: str | None = None
    framework_version: str | None = None
    # From the environment's marker (bench env setup wrote it); None for an interpreter bench did
    # not create (BENCH_PYTHON_<FRAMEWORK>, the fault worker).
    build: str | None = None  # cpu | cuda: the requirements file it was created from
    up_to_date: bool | None = None  # False: that file has changed since; bench env setup updates it
    release: str | None = None  # the release it is for, other than the pinned one (<framework>@<release>)


def check_name(framework: object) -> str:
    """A framework name that may become a folder or a variable name; ConfigError for any other.

    Defence in depth: configurations are validated where they are read (matrix, database rows),
    but no path or environment variable is ever made from a name that is not one bench knows.
    """
    if not isinstance(framework, str) or not NAME.fullmatch(framework) or framework not in FRAMEWORKS:
        known = ", ".join(FRAMEWORKS)
        raise ConfigError(f"framework {framework!r}: not one bench knows (known: {known})")
    return framework


def folder_name(framework: str, version: str | None = None) -> str:
    """An environment's folder under the env dir: the framework's for its pinned release (today's
    name), `<framework>@<version>` for another."""
    check_name(framework)
    if pins.is_pinned(framework, version):
        return framework
    if releases.shape_problem(version):  # defence: a folder name is made from it
        raise ConfigError(f"version {version!r}: {releases.shape_problem(version)}")
    return f"{framework}@{version}"


def python_for(
    framework: str, root: str | Path | None = None, version: str | None = None
) -> tuple[Path | None, str]:
    """The interpreter that runs this framework's worker (of that release, where one is asked
    for), or None and the reason why not."""
    check_name(framework)
    name = folder_name(framework, version)
    if name != framework:
        # Another release than the pinned one is always bench's own environment of it: the
        # overrides and registrations below stand for the framework's default environment.
        python = env_dir(root) / name / "bin" / "python"
        if python.exists():
            return python, str(python.parent.parent)
        return None, (
            f"no {framework} {version} environment at {python.parent.parent}: "
            f"run `bench env setup {framework} --version {version}`"
        )
    override = os.environ.get(f"BENCH_PYTHON_{framework.upper()}")
    if override:
        path = Path(override)
        if path.exists():
            return path, f"BENCH_PYTHON_{framework.upper()}"
        return None, f"BENCH_PYTHON_{framework.upper()}={override} does not exist"
    if framework == "fault":
        # The fault worker is standard library only: the orchestrator's own interpreter runs it.
        return Path(sys.executable), "the orchestrator's interpreter"
    external = registered(root).get(framework)
    if external:
        path = Path(external["python"])
        if path.exists():
            return path, EXTERNAL
        return None, (
            f"the {framework} interpreter registered with `bench env use` ({path}) no longer exists: "
            f"register another (`bench env use {framework} --python PATH`) or `bench env forget {framework}`"
        )
    python = env_dir(root) / framework / "bin" / "python"
    if python.exists():
        return python, str(python.parent.parent)
    return None, (
        f"no {framework} environment at {python.parent.parent}: "
        f"run `bench env setup {framework}`, or use an interpreter you have: "
        f"`bench env use {framework} --python PATH`"
    )


def _versions(
    python: Path, framework: str, release: str | None = None
) -> tuple[str | None, str | None, str | None]:
    """Python and framework versions of an interpreter, read from package metadata (no import)."""
    dist = DISTRIBUTIONS.get(framework)
    # importlib.metadata is 3.8+; Python 3.6 (Singa) has pkg_resources instead.
    code = (
        "import json, platform\n"
        "v = None\n"
        "try:\n"
        "    from importlib import metadata\n"
        f"    v = metadata.version({dist!r})\n"
        "except ImportError:\n"
        "    try:\n"
        "        import pkg_resources\n"
        f"        v = pkg_resources.get_distribution({dist!r}).version\n"
        "    except Exception:\n"
        "        pass\n"
        "except Exception:\n"
        "    pass\n"
        "print(json.dumps([platform.python_version(), v]))\n"
    )
    try:
        ran = run_short([str(python), "-c", code], timeout=60)
        if ran.returncode != 0:
            last = (ran.stderr or ran.stdout).strip().splitlines()[-1:] or [f"exit {ran.returncode}"]
            return None, None, f"{python} does not run: {last[0][:200]}"
        py, version = json.loads(ran.stdout)
        if not isinstance(py, str) or not (version is None or isinstance(version, str)):
            raise ValueError(f"printed {ran.stdout[:80]!r}")
    except (OSError, subprocess.SubprocessError, ValueError, RecursionError) as exc:
        return None, None, f"{python} does not run: {str(exc)[:200]}"
    if dist and version is None:
        again = f" --version {release}" if release else ""
        return py, None, f"{dist} is not installed in {python}: run `bench env setup {framework}{again}`"
    return py, version, None


def status(framework: str, root: str | Path | None = None, release: str | None = None) -> EnvStatus:
    """The framework's environment (of that release, where one is named): whether it runs, and
    what is installed there."""
    python, where = python_for(framework, root, release)
    release = None if pins.is_pinned(framework, release) else release
    if where == EXTERNAL and python is not None:
        return _external_status(framework, python, registered(root)[framework])
    if python is None:
        base, why = base_python(framework)
        reason = where if base else f"{where}; {why}"
        return EnvStatus(framework, "unavailable", None, reason, None, release=release)
    py, version, problem = _versions(python, framework, release)
    if framework == "fault":
        version = "fault"
    state = "unavailable" if problem else "ok"
    build, current = _marker_state(framework, python, release)
    return EnvStatus(framework, state, str(python), problem, where, py, version, build, current, release)


def _external_status(framework: str, python: Path, entry: dict) -> EnvStatus:
    """A registered interpreter: still runs? Its versions and build are those read at registration."""
    version = _version_of(python)
    problem = None if version else f"the registered interpreter {python} does not run any more"
    return EnvStatus(
        framework,
        "unavailable" if problem else "ok",
        str(python),
        problem,
        "external",
        version or entry.get("python_version"),
        entry.get("framework_version"),
        entry.get("build"),
        None,
    )


def registered(root: str | Path | None = None) -> dict[str, dict]:
    """The interpreters registered with `bench env use`, by framework; every entry checked.

    The file is outside input (anyone may edit it): an entry that is not what `bench env use` writes
    is one line naming the file and the key, never a path made from it.
    """
    path = env_dir(root) / EXTERNAL_FILE
    fix = "remove it (or the entry) and register again"
    try:
        with open(path, "rb") as f:
            raw = f.read(REGISTRY_LIMIT + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise EnvironmentSetupError(f"{path}: unreadable ({exc.strerror or exc}); {fix}") from None
    if len(raw) > REGISTRY_LIMIT:
        raise EnvironmentSetupError(f"{path}: larger than {REGISTRY_LIMIT} bytes; {fix}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        detail = exc if isinstance(exc, ValueError) else "nested too deep"
        raise EnvironmentSetupError(f"{path}: not JSON ({detail}); {fix}") from None
    if not isinstance(data, dict):
        raise EnvironmentSetupError(f"{path}: expected a JSON object, got {type(data).__name__}; {fix}")
    for name, entry in data.items():
        problem = _entry_problem(name, entry)
        if problem:
            raise EnvironmentSetupError(f"{path}: {name!r}: {problem}; {fix}")
    return data


def _entry_problem(name: str, entry: object) -> str | None:
    if not NAME.fullmatch(name) or name not in FRAMEWORKS or name == "fault":
        return "not a framework bench can register"
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    python = entry.get("python")
    if not isinstance(python, str) or "\0" in python or not Path(python).is_absolute():
        return f"python: expected an absolute path, got {python!r}"
    for key, value in entry.items():
        if key not in ENTRY_KEYS:
            return f"{key!r}: unknown key"
        if value is not None and not isinstance(value, str):
            return f"{key}: expected text, got {value!r}"
    return None


def register(framework: str, entry: dict, root: str | Path | None = None) -> Path:
    """Record an interpreter as this framework's environment (written whole, then renamed)."""
    folder = env_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    table = {**registered(root), framework: entry}
    path = folder / EXTERNAL_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def forget(framework: str, root: str | Path | None = None) -> dict | None:
    """Drop a registration; returns what was registered (None if nothing was)."""
    table = registered(root)
    entry = table.pop(framework, None)
    if entry is not None:
        path = env_dir(root) / EXTERNAL_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    return entry


def _marker_state(framework: str, python: Path, release: str | None = None) -> tuple[str | None, bool | None]:
    """(build, up to date) from the marker beside the interpreter's environment, if bench made it."""
    try:
        marker = json.loads((python.parent.parent / MARKER).read_text())
    except (OSError, ValueError):
        return None, None
    # a release's one pin set is whichever build its wheels are (PyTorch 2.4.1's is CUDA's)
    released = pins.pin_file(framework, release) if release else None
    files = {pins.build_of(released): released} if released is not None and released.exists() else {}
    for build in ("cpu", "cuda"):
        reqs = files.get(build) or requirements_file(framework, build)
        if isinstance(marker, dict) and marker.get("requirements") == reqs.name:
            return build, reqs.exists() and marker.get("requirements_hash") == requirements_hash(reqs)
    return None, None


def _version_of(python: Path) -> str | None:
    try:
        out = run_short([str(python), "-c", "import platform; print(platform.python_version())"], 30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()[:40] if out.returncode == 0 else None


def _pyenv_versions() -> list[Path]:
    pyenv = shutil.which("pyenv")
    root = os.environ.get("PYENV_ROOT")
    if not root and pyenv:
        try:
            root = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            root = None
    if not root:
        root = str(Path.home() / ".pyenv")
    return sorted(Path(root, "versions").glob("*/bin/python3"), reverse=True)


def base_python(
    framework: str, override: str | None = None, series: str | None = None
) -> tuple[Path | None, str]:
    """The interpreter a framework's environment is created from, or None and how to get one.

    Frameworks that need another Python series (Singa: 3.6; a release whose pin set names one:
    ``series``) look, in order, at --python / BENCH_PYTHON<series> (e.g. BENCH_PYTHON36), pyenv's
    installs of that series, then python<series> on PATH.
    """
    series = series or PYTHON_SERIES.get(framework)
    if series is None:
        return Path(sys.executable), "the orchestrator's interpreter"
    variable = "BENCH_PYTHON" + series.replace(".", "")
    candidates: list[tuple[Path, str]] = []
    named = override or os.environ.get(variable)
    if named:
        candidates.append((Path(named), f"--python / {variable}"))
    candidates += [(p, "pyenv") for p in _pyenv_versions() if p.parent.parent.name.startswith(series + ".")]
    on_path = shutil.which(f"python{series}")
    if on_path:
        candidates.append((Path(on_path), "PATH"))
    for path, source in candidates:
        version = _version_of(path)
        if version and version.startswith(series + "."):
            return path, f"Python {version} from {source} ({path})"
        if source.startswith("--python"):
            return None, f"{variable}/--python {path} is not a Python {series} interpreter"
    return None, (
        f"{framework} needs Python {series}, and none was found (looked at {variable}, pyenv's "
        f"{series}.x installs, python{series} on PATH): install one, e.g. `pyenv install {series}.15`, "
        f"or name it with {variable}=/path/to/python{series}"
    )


def requirements_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

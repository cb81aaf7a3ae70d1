"""Making and removing framework environments: `bench env setup` (a virtual environment from a pin
set, pip installing it) and `bench env remove`, and the disk each environment takes.

An environment bench makes holds a marker (envs.MARKER) naming the pin set it was made from; only
such a folder is ever removed, and only under the env dir. A setup that fails leaves nothing
half-made: a folder it created is removed again, so the next setup starts clean.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from orchestrator.config import pins
from orchestrator.errors import ConfigError, EnvironmentSetupError
from orchestrator.provision import envs
from workers import releases

log = logging.getLogger(__name__)


def setup(
    framework: str,
    root: str | Path | None = None,
    echo: Callable[[str], None] = log.info,
    python: str | None = None,
    variant: str = "auto",
    version: str | None = None,
) -> Path:
    """Create or update the framework's environment (of that release, where one is named); a no-op
    when it is already up to date."""
    name = envs.folder_name(framework, version)
    reqs, series = _pin_set(framework, version, variant)
    base, where = envs.base_python(framework, python, series)
    if base is None:
        raise EnvironmentSetupError(where)
    target = envs.env_dir(root) / name
    marker = target / envs.MARKER
    wanted = envs.requirements_hash(reqs)
    if marker.exists() and json.loads(marker.read_text()).get("requirements_hash") == wanted:
        echo(f"{name}: up to date at {target}")
        return target / "bin" / "python"
    echo(f"{name}: creating {target} from {reqs.name}")
    fresh = not target.exists()
    try:
        _install(framework, base, target, reqs, series)
    except BaseException:
        if fresh and target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)  # nothing half-made: the next setup starts clean
        raise
    marker.write_text(json.dumps({"requirements_hash": wanted, "requirements": reqs.name, "base": str(base)}))
    echo(f"{name}: ready")
    return target / "bin" / "python"


def _pin_set(framework: str, version: str | None, variant: str) -> tuple[Path, str | None]:
    """The pin set to install, and the Python series it names; EnvironmentSetupError where there is
    none (a release the adapter does not serve, or one nobody has resolved yet)."""
    if pins.is_pinned(framework, version):
        reqs = envs.requirements_file(framework, envs.choose_variant(framework, variant))
        if not reqs.exists():
            raise EnvironmentSetupError(f"{framework}: no pinned requirements at {reqs}")
        return reqs, None
    assert version is not None  # is_pinned says so
    refused = releases.unsupported(framework, version)
    if refused:
        raise EnvironmentSetupError(refused)
    if variant == "cuda":
        raise EnvironmentSetupError(
            f"{framework} {version}: only the pinned release has a GPU pin set (envs/{framework}-cuda.txt)"
        )
    missing = pins.missing(framework, version)
    if missing:
        raise EnvironmentSetupError(missing)
    reqs = pins.pin_file(framework, version)
    return reqs, pins.python_series(reqs)


def _install(framework: str, base: Path, target: Path, reqs: Path, series: str | None) -> None:
    _check_call([str(base), "-m", "venv", "--clear", str(target)], framework)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # The venv's own pip may predate the wheels' tags (Python 3.6 ships pip 18): upgrade it first.
    series = series or envs.PYTHON_SERIES.get(framework, "")
    _check_call([*pip, "--upgrade", envs.PIP_FOR_SERIES.get(series, "pip")], framework)
    _check_call([*pip, "-r", str(reqs)], framework)


def _check_call(cmd: list[str], framework: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise EnvironmentSetupError(
            f"{framework}: `{' '.join(cmd[:4])} ...` failed with exit {proc.returncode}: {tail[0]}"
        )


def disk_bytes(folder: Path) -> int | None:
    """The bytes a folder's files take on disk (allocated blocks, as `du` counts them; links not
    followed, a file linked twice counted once); None where the folder does not exist."""
    if not folder.is_dir():
        return None
    seen: set[tuple[int, int]] = set()
    total = 0
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(here, name))
            except OSError:
                continue  # removed meanwhile
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def made_here(root: str | Path | None = None) -> list[tuple[str, str]]:
    """The environments of other releases than the pinned ones under the env dir, as (framework,
    release), in framework then release order."""
    folder = envs.env_dir(root)
    found = []
    for path in folder.glob("*@*") if folder.is_dir() else []:
        framework, _, release = path.name.partition("@")
        if framework in envs.DISTRIBUTIONS and not releases.shape_problem(release):
            found.append((framework, release))
    return sorted(found, key=lambda f: (f[0], releases.key(f[1])))


def remove(framework: str, root: str | Path | None = None, version: str | None = None) -> tuple[Path, int]:
    """Delete an environment bench made; returns its folder and the bytes freed. An interpreter
    registered with `bench env use` is never deleted (it is the user's): that is refused."""
    name = envs.folder_name(framework, version)
    if name == framework:
        entry = envs.registered(root).get(framework)
        if entry is not None:
            raise ConfigError(
                f"bench env remove {framework}: its environment is {entry['python']}, registered with "
                f"`bench env use`, which bench did not make and does not delete; `bench env forget "
                f"{framework}` stops using it"
            )
    target = envs.env_dir(root) / name
    if target.is_symlink() or not target.is_dir():
        raise ConfigError(f"bench env remove {name.replace('@', ' --version ')}: no environment at {target}")
    if not (target / envs.MARKER).is_file():
        raise ConfigError(
            f"bench env remove: {target} was not made by bench env setup (no {envs.MARKER}); left as is"
        )
    size = disk_bytes(target) or 0
    shutil.rmtree(target)
    return target, size

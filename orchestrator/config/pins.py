"""The pin sets bench ships (`envs/`): each framework's pinned release, and the other releases a
matrix's `version` may name.

`envs/<framework>.txt` pins the framework's default release (no `version`, or that very one);
`envs/<framework>@<version>.txt` pins another, resolved once with pip and committed like the
default ones. A pin set may name the Python series its wheels need in a header line
(`# python: 3.10`), found at `bench env setup` as Singa's 3.6 is. Read here, below provision,
because a matrix naming a release without a pin set is refused when it is read.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from orchestrator import shipped
from workers import frameworks, releases

SERIES_LINE = re.compile(r"#\s*python:\s*(3\.[0-9]{1,2})\s*$")


def folder() -> Path:
    return shipped.path("envs")


@cache
def pinned_release(framework: str) -> str | None:
    """The release envs/<framework>.txt pins (its distribution's `==` or `===` line), or None."""
    info = frameworks.BY_NAME.get(framework)
    path = folder() / f"{framework}.txt"
    if info is None or info.distribution is None or not path.exists():
        return None
    wanted = re.compile(rf"{re.escape(info.distribution)}\s*===?\s*([^\s;#]+)", re.I)
    for line in path.read_text().splitlines():
        match = wanted.match(line.strip())
        if match:
            return match.group(1)
    return None


def is_pinned(framework: str, version: str | None) -> bool:
    """Whether a run of this release uses the framework's default environment."""
    if version is None:
        return True
    pinned = pinned_release(framework)
    return pinned is not None and releases.same_release(version, pinned)


def pin_file(framework: str, version: str | None) -> Path:
    """The pin set of a release (CPU builds): the default one for the pinned release."""
    if is_pinned(framework, version):
        return folder() / f"{framework}.txt"
    if releases.shape_problem(version):  # defence: a file name is made from it
        raise ValueError(f"not a release: {version!r}")
    return folder() / f"{framework}@{version}.txt"


def released_pins(framework: str) -> list[str]:
    """The releases other than the pinned one that have a pin set, oldest first."""
    found = [p.name[len(framework) + 1 : -4] for p in folder().glob(f"{framework}@*.txt")]
    return sorted((v for v in found if not releases.shape_problem(v)), key=releases.key)


def missing(framework: str, version: str) -> str | None:
    """Why a release cannot be set up (no pin set), with how to add one; None where it can."""
    path = pin_file(framework, version)
    if path.exists():
        return None
    others = ", ".join([pinned_release(framework) or "?", *released_pins(framework)])
    return (
        f"{framework} {version} has no pin set (envs/{path.name}; pinned here: {others}): resolve one "
        f"with pip in a fresh environment and commit its `pip freeze` there (docs/frameworks.md, "
        f'"Framework versions")'
    )


def build_of(path: Path) -> str:
    """ "cuda" where a pin set brings CUDA's runtime wheels (`nvidia-*`: PyTorch's releases other
    than the pinned one have only CUDA builds on the registry), else "cpu"."""
    for line in path.read_text().splitlines():
        if line.strip().lower().startswith("nvidia-"):
            return "cuda"
    return "cpu"


def python_series(path: Path) -> str | None:
    """The Python series a pin set names in its header (`# python: 3.10`), or None."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        match = SERIES_LINE.match(line)
        if match:
            return match.group(1)
    return None

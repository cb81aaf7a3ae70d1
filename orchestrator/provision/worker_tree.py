"""The folder a worker's PYTHONPATH names: bench's `workers` package and nothing else.

The worker runs in a framework's interpreter, which must see nothing of bench's own environment:
the folder that holds bench's `workers` is site-packages in an installed bench (its numpy, PyYAML,
... would shadow the framework environment's) and the repository in a checkout (orchestrator,
profiler, tests). So the package is copied into a folder of its own, once for each content of it,
`$XDG_CACHE_HOME/bench/workers/<digest>/workers` (~/.cache): a new bench, or an edited worker in a
checkout, gets a new folder, and an unchanged one reuses it. The copy is made in a temporary folder
and renamed into place, so a worker never sees half of one; where the cache cannot be written, a
private temporary folder of this process serves instead. Copies unused for a month are removed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from orchestrator.errors import BenchError

log = logging.getLogger(__name__)

PACKAGE = "workers"
DIGEST_CHARS = 16
SKIPPED = ("__pycache__", "*.pyc")
COMPLETE = ".complete"  # written last in a copy: a folder without it is not used; touched at each use
UNUSED_DAYS = 30  # a copy no bench has used for this long is removed when a new one is made


def package_dir() -> Path:
    """bench's own `workers` package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BenchError("bench's workers package cannot be found; reinstall bench")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def _files(package: Path) -> list[Path]:
    return sorted(
        p
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(package).parts and p.suffix != ".pyc"
    )


def digest(package: Path) -> str:
    """What the package holds, as a short hex digest: each file's path and bytes."""
    h = hashlib.sha256()
    for p in _files(package):
        data = p.read_bytes()
        h.update(f"{p.relative_to(package).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:DIGEST_CHARS]


def cache_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / PACKAGE


def _copy_into(parent: Path, package: Path) -> Path:
    """A fresh folder under ``parent`` holding a complete copy of ``package``."""
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=parent))
    shutil.copytree(package, staging / PACKAGE, ignore=shutil.ignore_patterns(*SKIPPED))
    (staging / COMPLETE).write_text("")
    return staging


def _usable(folder: Path) -> bool:
    try:
        info = folder.lstat()
    except OSError:
        return False
    return folder.is_dir() and info.st_uid == os.getuid() and (folder / COMPLETE).is_file()


def _touch(folder: Path) -> None:
    try:
        os.utime(folder / COMPLETE)
    except OSError:
        pass


def _prune(root: Path, keep: Path) -> None:
    """Remove the copies no bench has used for UNUSED_DAYS, and partial ones as old (a bench
    killed while copying); a running bench touched its copy when it started using it."""
    limit = time.time() - UNUSED_DAYS * 86400
    for folder in root.iterdir():
        marker = folder / COMPLETE if (folder / COMPLETE).exists() else folder
        try:
            unused = folder != keep and not folder.is_symlink() and marker.stat().st_mtime < limit
        except OSError:
            continue
        if unused and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


@functools.cache
def materialise(root: Path | None = None) -> Path:
    """The folder to put on a worker's PYTHONPATH (``root``: the cache folder, by default
    cache_root()); made once for each content of the package."""
    package = package_dir()
    root = root or cache_root()
    target = root / digest(package)
    if _usable(target):
        _touch(target)
        return target
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = _copy_into(root, package)
        if _usable(target):  # another bench made it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
            _touch(target)
            return target
        if target.is_dir() and not target.is_symlink() and target.stat().st_uid == os.getuid():
            # Incomplete, and it can never become complete: copies are renamed into place whole.
            shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:  # another bench made it meanwhile: use theirs
            shutil.rmtree(staging, ignore_errors=True)
        if _usable(target):
            _prune(root, keep=target)
            return target
        raise OSError(f"{target} is not a complete copy of this user's")
    except OSError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="bench-workers-"))
        log.warning("the worker tree cannot be kept in %s (%s); using %s", root, exc, fallback)
        return _copy_into(fallback, package)

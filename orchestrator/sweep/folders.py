"""Where run folders go: the root of them all, a sweep's folder in it, a run's folder in that.

    <root>/sweep-<sweep id>/<index>-<label>-<hash>[-a<n>][-retry<n>]/

The root is beside the SQLite file (bench-runs/), or --runs-dir; a folder is never reused, so a
run's evidence is never another's. Here rather than in launch: the root depends on the database's
URL (storage), which launch may not import; the CLI and the sweep both may import this.
"""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError
from orchestrator.storage.db import normalise_url

SQLITE_PREFIX = "sqlite:///"


def runs_root(db_url: str, runs_dir: str | None) -> Path:
    """Run folders go beside the SQLite file unless --runs-dir says otherwise; the folder is made
    here, before anything is recorded, so a path that cannot hold run folders is one line."""
    url = normalise_url(db_url)
    if runs_dir:
        root, what = Path(runs_dir), f"--runs-dir {runs_dir}"
    elif url.startswith(SQLITE_PREFIX) and len(url) > len(SQLITE_PREFIX):
        root, what = Path(url[len(SQLITE_PREFIX) :]).parent / "bench-runs", "the run folders"
    else:
        root, what = Path("bench-runs"), "the run folders"
    try:
        root = root.resolve()
        if root.exists() and not root.is_dir():
            raise ConfigError(f"{what}: {root} is not a folder")
        root.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"{what}: cannot make run folders in {root}: {why}") from None
    return root


def sweep_folder(root: Path, sweep_id: int) -> Path:
    """A sweep's folder; a resumed sweep's runs join its earlier ones there."""
    return root / f"sweep-{sweep_id}"


def run_folder(sweep_dir: Path, index: int, config: RunConfig, run: int = 0) -> Path:
    """A new folder for the index-th run of a sweep: its configuration's label made a safe name,
    which of the configuration's runs it is where it asks for several (``-run2``), and an attempt
    number where one exists already (a resumed sweep runs an index again)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", config.label()).strip("-")
    which = f"-run{run + 1}" if config.runs > 1 else ""
    base = sweep_dir / f"{index:04d}-{slug}-{config.config_hash[:8]}{which}"
    path, attempt = base, 1
    while path.exists():
        attempt += 1
        path = base.with_name(f"{base.name}-a{attempt}")
    return path


def retry_folder(run_dir: Path, attempt: int) -> Path:
    """The folder of a disturbed run's attempt-th retry (--retry-disturbed), beside the first."""
    return run_dir.with_name(f"{run_dir.name}-retry{attempt}")

"""Where run folders go (orchestrator/sweep/folders.py): fast, no worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError
from orchestrator.sweep.folders import retry_folder, run_folder, runs_root, sweep_folder


def test_the_root_is_beside_the_sqlite_file_unless_runs_dir_says_otherwise(tmp_path):
    assert runs_root(str(tmp_path / "r.db"), None) == (tmp_path / "bench-runs").resolve()
    assert runs_root(f"sqlite:///{tmp_path}/r.db", str(tmp_path / "else")) == (tmp_path / "else").resolve()
    assert (tmp_path / "bench-runs").is_dir() and (tmp_path / "else").is_dir()


def test_a_root_that_is_a_file_is_one_line_naming_the_option(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match=r"^--runs-dir .*/f: .*/f is not a folder$"):
        runs_root(str(tmp_path / "r.db"), str(tmp_path / "f"))


def test_a_run_folder_is_never_reused_and_a_retry_sits_beside_it(tmp_path):
    config = RunConfig(framework="fault", fault="sleep")
    sweep = sweep_folder(tmp_path, 7)
    first = run_folder(sweep, 3, config)
    assert first.parent == tmp_path / "sweep-7"
    assert first.name.startswith("0003-") and first.name.endswith(config.config_hash[:8])
    assert "/" not in first.name and " " not in first.name
    first.mkdir(parents=True)
    again = run_folder(sweep, 3, config)
    assert again.name == f"{first.name}-a2"
    assert retry_folder(first, 1) == Path(f"{first}-retry1")

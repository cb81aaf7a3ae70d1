"""The worker's PYTHONPATH folder (orchestrator/provision/worker_tree.py): a copy of the workers
package alone, made once for each content, never half made; and the shipped files and the
recorded commit of a checkout (tests/test_installed.py has the installed side)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orchestrator import shipped
from orchestrator.config.run_config import RunConfig
from orchestrator.launch.lifecycle import worker_env
from orchestrator.provision import hostinfo, worker_tree

REPO = Path(__file__).resolve().parent.parent
make = worker_tree.materialise.__wrapped__  # without the per-process cache


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "src" / "workers"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "runner.py").write_text("STEP = 1\n")
    (folder / "__pycache__" / "runner.cpython-311.pyc").write_bytes(b"stale")
    monkeypatch.setattr(worker_tree, "package_dir", lambda: folder)
    return folder


def test_the_copy_holds_the_package_alone_and_is_reused(package, tmp_path):
    first = make(tmp_path / "cache")
    assert first.parent == tmp_path / "cache"
    assert sorted(p.name for p in first.iterdir()) == [".complete", "workers"]
    assert sorted(p.name for p in (first / "workers").iterdir()) == ["__init__.py", "runner.py"]
    assert make(tmp_path / "cache") == first
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]  # no partial copy left


def test_an_edited_package_gets_a_new_copy(package, tmp_path):
    first = make(tmp_path / "cache")
    (package / "runner.py").write_text("STEP = 2\n")
    second = make(tmp_path / "cache")
    assert second != first
    assert (second / "workers" / "runner.py").read_text() == "STEP = 2\n"
    assert (first / "workers" / "runner.py").read_text() == "STEP = 1\n"


def test_a_copy_never_finished_is_not_used(package, tmp_path):
    half = tmp_path / "cache" / worker_tree.digest(package)
    (half / "workers").mkdir(parents=True)  # a bench killed while copying, before the rename
    folder = make(tmp_path / "cache")
    assert folder == half  # replaced by a complete copy
    assert (folder / ".complete").is_file()
    assert (folder / "workers" / "runner.py").read_text() == "STEP = 1\n"


def test_an_unwritable_cache_gives_a_private_temporary_folder(package, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    folder = make(blocker / "cache")
    assert not folder.is_relative_to(blocker)
    assert (folder / "workers" / "runner.py").is_file()
    assert "cannot be kept" in caplog.text


def test_the_worker_path_is_the_copy_not_the_repository():
    env, _ = worker_env(RunConfig(framework="fault"))
    folder = Path(env["PYTHONPATH"])
    assert folder != REPO and not folder.is_relative_to(REPO)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == ["workers"]
    assert worker_tree.digest(folder / "workers") == worker_tree.digest(REPO / "workers")


def test_a_checkout_reads_the_root_files_and_records_its_commit():
    assert shipped.path("schema.sql") == REPO / "schema.sql"
    assert shipped.path("envs") == REPO / "envs"
    commit = hostinfo.git_commit()
    assert commit is not None and not commit.startswith("bench ")


def test_a_bench_outside_a_checkout_records_its_version(tmp_path, monkeypatch):
    # A git repository that merely holds an installed bench's site-packages is not bench's checkout.
    (tmp_path / ".git").mkdir()
    monkeypatch.setattr(hostinfo, "REPO_ROOT", tmp_path)
    hostinfo.git_commit.cache_clear()
    try:
        assert hostinfo.git_commit() == f"bench {hostinfo.bench_version()} (installed)"
    finally:
        hostinfo.git_commit.cache_clear()


def test_copies_unused_for_a_month_go_when_a_new_one_is_made(package, tmp_path):
    old = make(tmp_path / "cache")
    recent = tmp_path / "cache" / "recent"
    (recent / "workers").mkdir(parents=True)
    (recent / worker_tree.COMPLETE).write_text("")
    month = time.time() - (worker_tree.UNUSED_DAYS + 1) * 86400
    os.utime(old / worker_tree.COMPLETE, (month, month))
    partial = tmp_path / "cache" / ".partial-x"
    partial.mkdir()
    os.utime(partial, (month, month))
    (package / "runner.py").write_text("STEP = 3\n")
    new = make(tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([new.name, "recent"])


def test_a_copy_in_use_is_touched_so_it_is_kept(package, tmp_path):
    folder = make(tmp_path / "cache")
    month = time.time() - (worker_tree.UNUSED_DAYS + 1) * 86400
    os.utime(folder / worker_tree.COMPLETE, (month, month))
    assert make(tmp_path / "cache") == folder
    assert (folder / worker_tree.COMPLETE).stat().st_mtime > time.time() - 60

"""The CLI's contract: help with an example everywhere, one-line errors with exit 1 and no
traceback, a database left exactly as it was, and the schema-version refusal."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess

import click
import pytest

from orchestrator.cli.main import cli as bench_cli
from orchestrator.storage.db import schema_version
from tests.conftest import bench_command


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    yield prefix
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


@pytest.mark.parametrize("path", list(all_commands(bench_cli)), ids=" ".join)
def test_every_command_has_help_with_an_example(cli, path):
    result = cli(*path, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output, path


def snapshot(db) -> str:
    conn = sqlite3.connect(db)
    dump = "\n".join(conn.iterdump())
    conn.close()
    return hashlib.sha256(dump.encode()).hexdigest()


@pytest.fixture
def recorded(write_matrix, cli, workdir):
    """A database holding one finished sweep."""
    write_matrix("include:\n  - {framework: fault}\n", name="good.yaml")
    assert cli("run", "--matrix", "good.yaml").exit_code == 0
    return workdir / "bench.db"


BAD = {
    "settings:\n  batch_size: -4\n": "m.yaml:2: batch_size: expected a positive integer, got -4",
    "axes:\n  framework: [pytorch]\n  model: [resnet51]\n": "m.yaml:3: model: unknown model 'resnet51'",
    "setings:\n  epochs: 1\n": "m.yaml:1: setings: unknown key (did you mean settings?)",
    "axes:\n  batch_size: []\n": "m.yaml:2: batch_size:",
    "axes:\n  framework: [tensorflw]\n": "m.yaml:2: framework: unknown framework 'tensorflw'",
    "axes:\n  device: [tpu]\n": "m.yaml:2: device: unknown device 'tpu'",
    "axes:\n  optimizer: [lbfgs]\n": "m.yaml:2: optimizer: unknown optimizer 'lbfgs'",
}


@pytest.mark.parametrize("text,message", list(BAD.items()))
def test_bad_matrix_is_one_line_exit_1_and_the_database_is_untouched(recorded, write_matrix, text, message):
    before = snapshot(recorded)
    write_matrix(text)
    proc = subprocess.run(
        bench_command("run", "--matrix", "m.yaml"), capture_output=True, text=True, cwd=recorded.parent
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: " + message), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert snapshot(recorded) == before


def test_bad_matrix_creates_no_database(write_matrix, workdir):
    write_matrix("settings:\n  epochs: 0\n")
    proc = subprocess.run(
        bench_command("run", "--matrix", "m.yaml"), capture_output=True, text=True, cwd=workdir
    )
    assert proc.returncode == 1 and "m.yaml:2: epochs:" in proc.stderr
    assert not (workdir / "bench.db").exists()


def test_dry_run_lists_and_runs_nothing(write_matrix, cli, workdir):
    write_matrix("""
        axes:
          framework: [fault]
          fault: [ok, raise]
          seed: [1, 2]
        exclude:
          - {fault: raise, seed: 2}
    """)
    result = cli("run", "--matrix", "m.yaml", "--dry-run")
    assert result.exit_code == 0
    assert "3 configurations, 3 to run" in result.output
    assert not (workdir / "bench.db").exists() and not (workdir / "bench-runs").exists()


def test_only_selects_and_rejects(write_matrix, cli, workdir):
    write_matrix("axes:\n  framework: [fault]\n  fault: [ok, raise]\n")
    result = cli("run", "--matrix", "m.yaml", "--only", "fault=raise")
    assert result.exit_code == 0 and "1 error" in result.output
    bad = cli("run", "--matrix", "m.yaml", "--only", "flavour=raise")
    assert bad.exit_code == 1 and "--only" in bad.output


def test_schema_version_refusal(recorded, cli):
    conn = sqlite3.connect(recorded)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = snapshot(recorded)
    for args in (("report",), ("run", "--matrix", "good.yaml"), ("inspect", "1")):
        result = cli(*args)
        assert result.exit_code == 1
        assert f"schema version 99, but this bench expects {schema_version()}" in result.output
    assert snapshot(recorded) == before


def test_report_without_database(cli, workdir):
    result = cli("report")
    assert result.exit_code == 1 and "no database at bench.db" in result.output
    assert not (workdir / "bench.db").exists()


def test_unknown_run(recorded, cli):
    result = cli("inspect", "999")
    assert result.exit_code == 1 and "no run 999" in result.output


def test_env_list_reports_status(cli, workdir, monkeypatch):
    monkeypatch.setenv("BENCH_ENV_DIR", str(workdir / "envs"))
    monkeypatch.delenv("BENCH_PYTHON_PYTORCH", raising=False)
    result = cli("env", "list")
    assert result.exit_code == 0
    assert "pytorch    unavailable" in result.output and "bench env setup pytorch" in result.output
    assert "fault      ok" in result.output

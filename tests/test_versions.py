"""Framework releases as an axis (`version`): the setting, the pin sets, one environment per release,
what the adapters serve, and runs that record and check the release (docs/frameworks.md,
"Framework versions").

The fast tests need no framework. The slow ones make (once, then reuse) the second JAX environment
in the shared env dir, as .ci/run does, and run a real matrix across both JAX releases.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from orchestrator.config import matrix, pins
from orchestrator.config.run_config import LATE_FIELDS, RunConfig
from orchestrator.errors import ConfigError, EnvironmentSetupError
from orchestrator.provision import env_build, envs
from workers import releases

OLD_JAX = "0.4.30"  # envs/jax@0.4.30.txt
TOO_OLD_JAX = "0.4.13"  # below what the JAX adapter serves (its attention models fail)
NO_PIN_JAX = "0.5.0"  # served by the adapter, but nobody has resolved its pins


def _load(workdir: Path, text: str) -> matrix.Matrix:
    path = workdir / "m.yaml"
    path.write_text(text)
    return matrix.load_matrix(path)


def test_version_is_an_axis_and_leaves_earlier_hashes_alone(workdir):
    loaded = _load(
        workdir,
        f'name: v\naxes:\n  framework: [jax]\n  version: ["{OLD_JAX}", "0.10.2"]\n',
    )
    assert [c.version for c in loaded.configs] == [OLD_JAX, "0.10.2"]
    assert loaded.configs[0].label().startswith(f"jax@{OLD_JAX}/")
    # Unset, it stays out of the hash: the configurations of earlier sweeps keep their identity.
    assert "version" in LATE_FIELDS
    plain = _load(workdir, "name: v\naxes:\n  framework: [jax]\n").configs[0]
    assert plain.version is None and plain.config_hash == RunConfig(framework="jax").config_hash
    assert len({c.config_hash for c in [*loaded.configs, plain]}) == 3


@pytest.mark.parametrize(
    "value, says",
    [
        ("2.10", 'expected a release as text, got the number 2.1: quote it ("2.10")'),
        ('"0.4.30; rm -rf /"', "expected a release such as"),
        ('"../jax"', "expected a release such as"),
    ],
)
def test_a_release_of_the_wrong_shape_is_refused_with_file_line_and_key(workdir, value, says):
    with pytest.raises(ConfigError) as caught:
        _load(workdir, f"name: v\nsettings:\n  framework: jax\n  version: {value}\n")
    message = str(caught.value)
    assert message.startswith(f"{workdir / 'm.yaml'}:4: version: ") and says in message
    assert "\n" not in message


def test_releases_order_as_pep_440_does():
    written = ["3.0.0.post1", "3.0.0", "3.0.0rc1", "3.0.0a1", "3.0.0.dev1", "2.10", "2.9.1", "2.9"]
    assert sorted(written, key=releases.key) == list(reversed(written))
    assert releases.key("2.0") == releases.key("2.0.0") == releases.key("2.0.0+cpu")
    assert releases.same_release("2.13.0", "2.13.0+cpu") and not releases.same_release("2.13.0+cpu", "2.13.0")


def test_each_adapter_serves_its_pinned_release_and_says_why_not_older_ones():
    for framework, support in releases.SUPPORT.items():
        pinned = pins.pinned_release(framework)
        assert pinned is not None and releases.unsupported(framework, pinned) is None, framework
        older = releases.unsupported(framework, "0.1")
        assert older and f"({support.oldest} and later)" in older and support.older in older
    assert "fluid" in releases.unsupported("paddle", "1.8.5")
    assert "tf.compat.v1 sessions" in releases.unsupported("tensorflow", "1.4.0")
    assert "MXNet 2" in releases.unsupported("mxnet", "2.0.0")
    assert releases.unsupported("jax", OLD_JAX) is None and releases.unsupported("fault", "1.0") is None


def test_a_served_release_without_a_pin_set_is_refused_before_anything_runs(cli, workdir):
    path = workdir / "m.yaml"
    path.write_text(f'name: v\naxes:\n  framework: [jax]\n  version: ["{NO_PIN_JAX}"]\n')
    result = cli("run", "--matrix", str(path))
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert f"m.yaml:4: version: jax {NO_PIN_JAX} has no pin set (envs/jax@{NO_PIN_JAX}.txt" in line
    assert "pip freeze" in line and OLD_JAX in line
    assert not (workdir / "bench.db").exists() and not (workdir / "bench-runs").exists()


def test_bench_train_refuses_a_release_without_a_pin_set_too(cli, workdir):
    result = cli("train", "--framework", "jax", "--version", NO_PIN_JAX)
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert f"--version: jax {NO_PIN_JAX} has no pin set" in line
    assert not (workdir / "bench.db").exists()


def test_the_fault_worker_takes_no_version(workdir):
    with pytest.raises(ConfigError, match="the fault worker has no releases"):
        _load(workdir, 'name: v\nsettings:\n  framework: fault\n  version: "1.0"\n')


@pytest.mark.parametrize(
    "release, says",
    [
        (NO_PIN_JAX, f"jax {NO_PIN_JAX} has no pin set (envs/jax@{NO_PIN_JAX}.txt"),
        (TOO_OLD_JAX, f"jax {TOO_OLD_JAX} is older than the releases bench's jax adapter serves"),
    ],
)
def test_env_setup_refuses_a_release_it_cannot_make_in_one_line(cli, tmp_path, release, says):
    result = cli("env", "setup", "jax", "--version", release, "--env-dir", str(tmp_path))
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert says in line
    assert list(tmp_path.iterdir()) == []


def test_env_setup_takes_one_framework_with_a_version(cli, tmp_path):
    result = cli("env", "setup", "jax", "mxnet", "--version", OLD_JAX, "--env-dir", str(tmp_path))
    assert result.exit_code != 0 and "name one framework" in result.output


def _fake_env(folder: Path, payload: int) -> None:
    """A folder as bench env setup leaves one: the marker, an interpreter (the orchestrator's own,
    which has no JAX), and a file of known size."""
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    (folder / envs.MARKER).write_text(json.dumps({"requirements": f"{folder.name}.txt"}))
    (folder / "payload").write_bytes(b"x" * payload)


def test_env_list_shows_each_release_and_its_size_and_remove_frees_it(cli, tmp_path):
    _fake_env(tmp_path / f"jax@{OLD_JAX}", 3 << 20)
    listed = json.loads(cli("env", "list", "--env-dir", str(tmp_path), "--format", "json").output)
    (row,) = [r for r in listed if r["release"] == OLD_JAX]
    assert row["framework"] == "jax" and row["status"] == "unavailable"
    assert (
        "jax is not installed" in row["reason"]
        and f"bench env setup jax --version {OLD_JAX}" in row["reason"]
    )
    assert row["disk_bytes"] >= 3 << 20
    table = cli("env", "list", "--env-dir", str(tmp_path)).output
    assert f"jax@{OLD_JAX}" in table

    result = cli("env", "remove", "jax", "--version", OLD_JAX, "--env-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"removed jax@{OLD_JAX} (") and line.endswith(" freed")
    assert "MiB" in line and not (tmp_path / f"jax@{OLD_JAX}").exists()

    result = cli("env", "remove", "jax", "--version", OLD_JAX, "--env-dir", str(tmp_path))
    assert result.exit_code != 0 and "no environment at" in result.output
    # Its pin set is still listed: what `bench env setup` can make again.
    listed = json.loads(cli("env", "list", "--env-dir", str(tmp_path), "--format", "json").output)
    (row,) = [r for r in listed if r["release"] == OLD_JAX]
    assert row["status"] == "unavailable" and row["disk_bytes"] is None
    assert f"bench env setup jax --version {OLD_JAX}" in row["reason"]


def test_remove_leaves_what_bench_did_not_make(cli, tmp_path):
    envs.register("jax", {"python": sys.executable}, tmp_path)
    result = cli("env", "remove", "jax", "--env-dir", str(tmp_path))
    assert result.exit_code != 0
    (line,) = result.output.strip().splitlines()
    assert "registered with `bench env use`" in line and "bench env forget jax" in line
    assert Path(sys.executable).exists()

    (tmp_path / "mxnet").mkdir()
    (tmp_path / "mxnet" / "keep").write_text("mine")
    result = cli("env", "remove", "mxnet", "--env-dir", str(tmp_path))
    assert result.exit_code != 0 and "was not made by bench env setup" in result.output
    assert (tmp_path / "mxnet" / "keep").exists()


@pytest.mark.slow
def test_a_release_pip_cannot_find_is_refused_in_one_line_and_nothing_is_left(tmp_path, monkeypatch):
    """A pin set naming a release the registry does not have: pip's resolution refuses it, and the
    folder the setup had begun is gone (the next setup starts clean)."""
    folder = tmp_path / "pins"
    folder.mkdir()
    shutil.copy(pins.folder() / "jax.txt", folder / "jax.txt")
    (folder / "jax@0.10.99.txt").write_text("jax==0.10.99\n")
    monkeypatch.setattr(pins, "folder", lambda: folder)
    with pytest.raises(EnvironmentSetupError) as caught:
        env_build.setup("jax", tmp_path / "envs", version="0.10.99")
    message = str(caught.value)
    assert "\n" not in message and "jax==0.10.99" in message, message
    assert list((tmp_path / "envs").iterdir()) == []


# -- real runs across two JAX releases -------------------------------------------------------------


@pytest.fixture(scope="session")
def old_jax() -> Path:
    """The second JAX environment, made in the shared env dir once (as .ci/run makes it) and reused."""
    return env_build.setup("jax", version=OLD_JAX, echo=lambda line: None)


MATRIX = f"""
name: jax-releases
settings: {{min_time: 0, min_steps: 1, dataset_size: 40, batch_size: 8, epochs: 1, warmup_steps: 1,
           image_size: 32, classes: 3, model: small_cnn, threads: 1, timeout: 600}}
axes:
  framework: [jax]
  version: ["{OLD_JAX}", "0.10.2", "{TOO_OLD_JAX}"]
"""


def _runs(db: Path) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    query = (
        "SELECT r.version, r.outcome, r.reason, r.images_per_second, r.parameter_count, "
        "e.framework_version, e.python_executable FROM runs r LEFT JOIN environments e ON e.run_id = r.id "
        "ORDER BY r.id"
    )
    return [dict(r) for r in conn.execute(query)]


@pytest.mark.slow
@pytest.mark.framework
def test_a_matrix_runs_across_two_jax_releases(cli, workdir, old_jax):
    path = workdir / "m.yaml"
    path.write_text(MATRIX)
    result = cli("run", "--matrix", str(path))
    assert result.exit_code == 0, result.output
    runs = {r["version"]: r for r in _runs(workdir / "bench.db")}
    assert sorted(runs, key=releases.key) == [TOO_OLD_JAX, OLD_JAX, "0.10.2"]
    old, new, too_old = runs[OLD_JAX], runs["0.10.2"], runs[TOO_OLD_JAX]
    for run in (old, new):
        assert run["outcome"] == "ok", run["reason"]
        assert run["framework_version"] == run["version"] and run["images_per_second"] > 0
    assert old["parameter_count"] == new["parameter_count"]
    assert old["python_executable"] == str(old_jax)
    assert too_old["outcome"] == "unsupported"
    assert f"jax {TOO_OLD_JAX} is older than the releases bench's jax adapter serves" in too_old["reason"]
    # The report's side reads what these runs recorded: one configuration, a row per release, the
    # newer one set against the older (one run each: too few for a verdict, and said so).
    table = cli("report", "--table", "versions", "--format", "json", "--where", "framework=jax")
    assert table.exit_code == 0, table.output
    rows = [r for r in json.loads(table.output)["rows"] if r["framework_version"] in (OLD_JAX, "0.10.2")]
    assert [r["framework_version"] for r in rows] == [OLD_JAX, "0.10.2"]
    assert rows[0]["change"] == "first release" and rows[1]["change"] == "fewer than 2 ok runs: no verdict"
    # (n is not asserted: it counts the runs no other load disturbed, and the suite's own load may.)
    compared = cli("report", "--compare", f"version:{OLD_JAX}", "version:0.10.2")
    assert compared.exit_code == 0, compared.output
    assert "small_cnn" in compared.output


@pytest.mark.slow
@pytest.mark.framework
def test_a_run_whose_installed_release_differs_from_the_asked_one_says_so(
    cli, workdir, monkeypatch, tmp_path
):
    """The environment of jax@0.4.30 that holds another JAX (here: the pinned one's folder under
    that name): the worker reads the installed release before it imports anything, and the run is
    `unavailable` naming both, the release found recorded."""
    pinned, _ = envs.python_for("jax")
    assert pinned is not None, "the jax environment is missing: bench env setup jax"
    folder = tmp_path / "envs"
    folder.mkdir()
    (folder / f"jax@{OLD_JAX}").symlink_to(pinned.parent.parent, target_is_directory=True)
    monkeypatch.setenv("BENCH_ENV_DIR", str(folder))
    path = workdir / "m.yaml"
    path.write_text(MATRIX.replace(f', "0.10.2", "{TOO_OLD_JAX}"', ""))
    result = cli("run", "--matrix", str(path))
    assert result.exit_code == 0, result.output
    (run,) = _runs(workdir / "bench.db")
    assert run["outcome"] == "unavailable"
    installed = pins.pinned_release("jax")
    assert f"asked for jax {OLD_JAX}, but this environment has jax {installed} installed" in run["reason"]
    assert f"bench env setup jax --version {OLD_JAX}" in run["reason"]
    assert run["framework_version"] == installed


def test_a_version_14_database_is_upgraded_with_the_version_column(tmp_path):
    from orchestrator.storage.db import Database, schema_version

    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v14.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
        " VALUES ('before', 'now', 'finished', 1, 'h', 'm', '0', 'bench run')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 15
    assert "version" in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
    assert conn.execute("SELECT name FROM sweeps").fetchall() == [("before",)]
    conn.close()


def test_the_worker_refuses_an_installed_release_outside_the_range_before_the_import():
    """What the worker reads before it imports its framework: the installed release from package
    metadata. pip stands in for a framework here (a real distribution, released above 2): as MXNet,
    which its adapter serves below 2, it is refused; asked for another release, it says both."""
    from importlib import metadata

    pip = metadata.version("pip")
    outcome, reason, found = releases.refusal("mxnet", "pip", None)
    assert (outcome, found) == ("unsupported", pip)
    assert f"mxnet {pip} is newer than the releases bench's mxnet adapter serves (before 2)" in reason
    outcome, reason, found = releases.refusal("mxnet", "pip", "1.9.1")
    assert (
        outcome == "unavailable" and f"asked for mxnet 1.9.1, but this environment has mxnet {pip}" in reason
    )
    assert releases.refusal("jax", "no-such-distribution", "0.4.30") == (None, None, None)


def test_a_pin_set_names_the_python_series_its_wheels_need(tmp_path, monkeypatch):
    """`# python: 3.6` in a pin set's header: the setup looks for that Python as it does for Singa's,
    and says how to get one where there is none (nothing made meanwhile)."""
    folder = tmp_path / "pins"
    folder.mkdir()
    shutil.copy(pins.folder() / "jax.txt", folder / "jax.txt")
    (folder / "jax@0.4.99.txt").write_text(
        "# A release whose wheels need Python 3.6.\n# python: 3.6\njax==0.4.99\n"
    )
    monkeypatch.setattr(pins, "folder", lambda: folder)
    assert pins.python_series(folder / "jax@0.4.99.txt") == "3.6"
    monkeypatch.delenv("BENCH_PYTHON36", raising=False)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentSetupError) as caught:
        env_build.setup("jax", tmp_path / "envs", version="0.4.99")
    assert "jax needs Python 3.6, and none was found" in str(caught.value)
    assert not (tmp_path / "envs").exists()


@pytest.mark.slow
@pytest.mark.framework
def test_an_era_difference_is_unsupported_with_its_reason(cli, workdir, monkeypatch, old_jax):
    """jax.nn.dot_product_attention arrived in 0.4.31 (workers/releases.py's JAX era): on 0.4.30 the
    switch to it is `unsupported`, saying so, where 0.10.2 runs it."""
    monkeypatch.setenv("BENCH_JAX_ATTENTION", "jax.nn")
    path = workdir / "m.yaml"
    path.write_text(
        MATRIX.replace(f', "{TOO_OLD_JAX}"', "").replace(
            "model: small_cnn", "model: gpt_tiny, sequence_length: 8"
        )
    )
    result = cli("run", "--matrix", str(path))
    assert result.exit_code == 0, result.output
    runs = {r["version"]: r for r in _runs(workdir / "bench.db")}
    assert runs["0.10.2"]["outcome"] == "ok", runs["0.10.2"]["reason"]
    assert runs[OLD_JAX]["outcome"] == "unsupported"
    assert f"jax {OLD_JAX} has no jax.nn.dot_product_attention (0.4.31 brought it)" in runs[OLD_JAX]["reason"]


def test_a_release_pin_set_with_cuda_wheels_is_a_cuda_build():
    # PyTorch's releases other than the pinned one exist on the registry only as CUDA builds
    # (their pin sets carry the nvidia-* wheels): `bench env list` must not call them cpu builds.
    from orchestrator.config import pins

    assert pins.build_of(pins.pin_file("pytorch", "2.4.1")) == "cuda"
    assert pins.build_of(pins.pin_file("jax", "0.4.30")) == "cpu"
    assert pins.build_of(pins.pin_file("pytorch", None)) == "cpu"

"""`bench report --table …`, `--where`, several `--sweep`, the machine rule and `--compare`, over real
sweeps of the fault worker (it has epochs and timings, no accuracy); the batch and accuracy tables
over one tiny real PyTorch sweep."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from orchestrator.report.tables.compare import MIN_EPOCHS, NO_VERDICT, verdict
from orchestrator.text.formats import number
from tests import dbs, machine_lock
from tests.conftest import BACKENDS, new_database

pytestmark = pytest.mark.slow

# The fault worker strikes after 40 steps: a 64-image dataset (6 steps an epoch) never gets there,
# a 256-image one (25 an epoch) does, in its second epoch. So the dataset size decides the outcome
# and both rows share every other setting; ResNet50 at 256 images is left out (never run).
MATRIX = """
name: tables
settings:
  framework: fault
  fault: segfault
  after_steps: 40
  batch_size: 8
  epochs: 3
axes:
  model: [small_cnn, resnet50]
  device: [cpu, cuda]
  dataset_size: [64, 256]
exclude:
  - {model: resnet50, dataset_size: 256}
"""
EXTRA = "include:\n  - {framework: fault, fault: ok, dataset_size: 96, epochs: 3}\n"
OTHER_MACHINE = "Other CPU x64, 512 GiB [0badc0de]"


def bench(db: str | Path, *args: str):
    return CliRunner().invoke(bench_cli, [*args, "--db", str(db)], catch_exceptions=False)


def run_sweep(db: str | Path, matrix: Path) -> None:
    result = bench(db, "run", "--matrix", str(matrix))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def machine() -> dict[str, machine_lock.Alone]:
    """What the sweeps' fixture found of the machine when it took it alone, per backend."""
    return {}


@pytest.fixture(scope="module", params=BACKENDS)
def db(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    machine: dict[str, machine_lock.Alone],
) -> str:
    """Sweeps 1 and 2: the matrix twice on this machine; sweep 3: the matrix and one more
    configuration, recorded as if on another machine (its fingerprint changed in the database).
    Once on SQLite, once on PostgreSQL."""
    folder = tmp_path_factory.mktemp("tables")
    (folder / "m.yaml").write_text(textwrap.dedent(MATRIX).lstrip())
    (folder / "m3.yaml").write_text(textwrap.dedent(MATRIX).lstrip() + EXTRA)
    url = new_database(request, folder)
    with machine_lock.alone(request.config) as found:  # the sweeps' epochs are compared: alone
        machine[url] = found
        for matrix in ("m.yaml", "m.yaml", "m3.yaml"):
            run_sweep(url, folder / matrix)
    dbs.execute(url, "UPDATE sweeps SET machine = :m, host = 'otherhost' WHERE id = 3", m=OTHER_MACHINE)
    dbs.execute(url, "UPDATE runs SET machine = :m WHERE sweep_id = 3", m=OTHER_MACHINE)  # where each ran
    return url


def runs(db: str | Path, sweep: int) -> list[dict]:
    return dbs.query(db, "SELECT * FROM runs WHERE sweep_id = :s ORDER BY id", s=sweep)


def records(db: str | Path, *args: str) -> list[dict]:
    result = bench(db, "report", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["rows"]


def cell(records: list[dict], **match) -> dict:
    found = [r for r in records if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, records)
    return found[0]


def test_comparison_cells_time_outcome_and_not_run(db):
    out = bench(db, "report", "--table", "comparison", "--sweep", "1").output
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("framework"))
    for column in (
        "dataset (images)",
        "small_cnn CPU epoch s",
        "small_cnn GPU epoch s",
        "resnet50 GPU epoch s",
    ):
        assert column in header
    ok = next(r for r in runs(db, 1) if r["dataset_size"] == 64 and r["model"] == "small_cnn")
    assert ok["outcome"] == "ok" and ok["min_epoch_seconds"] < ok["max_epoch_seconds"]
    expected = (
        f"{number(ok['median_epoch_seconds'])} "
        f"({number(ok['min_epoch_seconds'])}–{number(ok['max_epoch_seconds'])})"
    )
    small = next(line for line in lines if line.startswith("fault") and " 64 " in line)
    big = next(line for line in lines if line.startswith("fault") and " 256 " in line)
    assert expected in small and "crash" not in small
    # epoch s and ms/image of small_cnn CPU, GPU, then resnet50 (never ran)
    assert big.split()[2:] == ["crash", "—", "crash", "—", "—", "—", "—", "—"]
    images = ok["steps_per_epoch"] * ok["batch_size"]
    assert "small_cnn CPU ms/image" in header
    # after the range, the samples marks where there are any (~ wide, ? few: orchestrator/config/samples.py),
    # then !? where the epochs were too short to judge quiet (orchestrator/report/query/select.py)
    ms = number(ok["median_epoch_seconds"] / images * 1000)
    assert re.search(re.escape(expected) + r"( [~?]+)?( !\??)?  " + re.escape(ms) + " ", small), small

    rows = records(db, "--table", "comparison", "--sweep", "1")
    assert len(rows) == 6
    first = cell(rows, dataset_size=64, model="small_cnn", device="cpu")
    assert first["epoch_seconds_median"] == ok["median_epoch_seconds"] and first["runs"] == 1
    assert first["seconds_per_image_median"] == pytest.approx(ok["median_epoch_seconds"] / images)
    assert cell(rows, dataset_size=256, model="small_cnn", device="cuda")["outcome"] == "crash"
    assert not [r for r in rows if r["dataset_size"] == 256 and r["model"] == "resnet50"]


def test_comparison_csv_and_markdown(db):
    text = bench(db, "report", "--table", "comparison", "--sweep", "1", "--format", "csv").output
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 6 and {"epoch_seconds_median", "epoch_seconds_min", "outcome"} <= set(rows[0])
    assert {r["outcome"] for r in rows} == {"ok", "crash"}
    crashed = [r for r in rows if r["outcome"] == "crash"]  # small_cnn at 256 images, CPU and GPU
    assert len(crashed) == 2 and all(r["epoch_seconds_median"] == "" for r in crashed)
    assert all(float(r["epoch_seconds_median"]) > 0 for r in rows if r["outcome"] == "ok")
    md = bench(db, "report", "--table", "comparison", "--sweep", "1", "--format", "markdown").output
    assert (
        "| framework | dataset (images) | small_cnn CPU epoch s | small_cnn CPU ms/image |" in md
        and "| crash | — | crash | — | — | — | — | — |" in md
    )


def test_several_sweeps_pool_one_configuration(db):
    rows = records(db, "--table", "comparison", "--sweep", "1", "--sweep", "2")
    assert rows == records(db, "--table", "comparison", "--sweep", "1,2")
    pooled = cell(rows, dataset_size=64, model="resnet50", device="cpu")
    both = [r for s in (1, 2) for r in runs(db, s) if r["config_hash"] == pooled["config_hash"]]
    assert pooled["runs"] == 2 and len(both) == 2
    assert pooled["epoch_seconds_median"] == pytest.approx(sum(r["median_epoch_seconds"] for r in both) / 2)
    assert pooled["epoch_seconds_min"] == min(r["min_epoch_seconds"] for r in both)
    assert pooled["epoch_seconds_max"] == max(r["max_epoch_seconds"] for r in both)
    crashed = cell(rows, dataset_size=256, model="small_cnn", device="cpu")
    assert crashed["outcome"] == "crash" and crashed["runs"] == 2 and crashed["ok_runs"] == 0


def test_default_is_the_latest_sweep_and_machines_are_never_pooled(db):
    latest = records(db, "--table", "comparison")
    assert len(latest) == 7 and {r["runs"] for r in latest} == {1}  # sweep 3 alone
    out = bench(db, "report", "--table", "comparison", "--sweep", "all").output
    assert "note: these results come from 2 machines" in out and "otherhost [0badc0de]" in out
    assert out.splitlines()[4].startswith("machine")  # three sweep headings, the title, the header
    rows = records(db, "--table", "comparison", "--sweep", "all")
    same = [r for r in rows if r["dataset_size"] == 64 and r["model"] == "small_cnn" and r["device"] == "cpu"]
    assert sorted((r["machine"].endswith("[0badc0de]"), r["runs"]) for r in same) == [(False, 2), (True, 1)]
    # One machine alone: no machine column and no note.
    one = bench(db, "report", "--table", "comparison", "--sweep", "1,2").output
    assert "machines" not in one and "otherhost" not in one


def test_runs_of_one_sweep_on_two_kinds_of_node_are_never_pooled(db):
    """A Ray sweep: each run carries its node's fingerprint (runs.machine), not only the sweep's."""
    before = dbs.query(db, "SELECT id, machine FROM runs WHERE sweep_id = 1")
    dbs.execute(db, "UPDATE runs SET machine = :m WHERE sweep_id = 1 AND id % 2 = 0", m=OTHER_MACHINE)
    try:
        rows = records(db, "--table", "comparison", "--sweep", "1")
        assert {r["machine"].endswith("[0badc0de]") for r in rows} == {True, False}
        out = bench(db, "report", "--table", "comparison", "--sweep", "1").output
        assert (
            "note: these results come from 2 machines" in out and "Other CPU x64, 512 GiB [0badc0de]" in out
        )
    finally:  # the fixture's database is shared by the module's tests
        for row in before:
            dbs.execute(db, "UPDATE runs SET machine = :m WHERE id = :i", m=row["machine"], i=row["id"])


def test_where_filters_every_table(db):
    rows = records(db, "--table", "comparison", "--sweep", "1", "--where", "dataset_size=64,device=cuda")
    assert {(r["dataset_size"], r["device"]) for r in rows} == {(64, "cuda")} and len(rows) == 2
    either = records(db, "--table", "batch", "--sweep", "1", "--where", "model=resnet50,model=small_cnn")
    assert len(either) == 6
    results = bench(db, "report", "--sweep", "1", "--where", "dataset_size=256", "--format", "json").output
    assert {r["dataset_size"] for r in json.loads(results)["runs"]} == {256}
    empty = bench(db, "report", "--table", "comparison", "--where", "framework=mxnet")
    assert empty.exit_code == 0 and "no runs match" in empty.output


@pytest.mark.parametrize(
    "args,message",
    [
        (("--table", "comparison", "--where", "colour=red"), "--where: colour: unknown key"),
        (("--table", "batch", "--where", "model=resnet51"), "--where: model: unknown model 'resnet51'"),
        (("--where", "batch_size=many"), "--where: batch_size:"),
        (("--table", "accuracy", "--where", "batch_size"), "--where: expected key=value"),
        (("--table", "comparison", "--sweep", "99"), "no sweep 99"),
        (("--table", "comparison", "--sweep", "first"), "--sweep first: expected sweep ids"),
        (("--sweep", "1,2"), "the results table reads one sweep"),
        (("--resources", "--sweep", "all"), "--resources reads one sweep"),
        (("--table", "batch", "--crashes"), "--crashes lists failed runs"),
        (("--compare", "1", "2", "--sweep", "1"), "--compare A B names its two sweeps"),
        (("--compare", "1", "99"), "no sweep 99"),
    ],
)
def test_option_errors_are_one_line(db, args, message):
    result = bench(db, "report", *args)
    assert result.exit_code == 1 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_fault_runs_in_the_batch_and_accuracy_tables(db):
    batch = records(db, "--table", "batch", "--sweep", "1")
    ok = cell(batch, dataset_size=64, model="small_cnn", device="cpu")
    run = next(r for r in runs(db, 1) if r["config_hash"] == ok["config_hash"])
    assert ok["images_per_epoch"] == run["steps_per_epoch"] * 8
    assert ok["images_per_second_min"] == pytest.approx(ok["images_per_epoch"] / run["max_epoch_seconds"])
    assert ok["seconds_per_image_median"] == pytest.approx(run["seconds_per_image"])
    # No accuracy from the fault worker: every cell says so, nothing breaks.
    text = bench(db, "report", "--table", "accuracy", "--sweep", "1").output
    assert "epoch 1 val acc" in text and "epoch 3 val acc" in text and "crash" in text
    rows = records(db, "--table", "accuracy", "--sweep", "1")
    assert rows and all(r["val_accuracy_median"] is None and r["values"] == 0 for r in rows)


def test_table_resources_is_the_resources_report(db):
    assert bench(db, "report", "--table", "resources").output == bench(db, "report", "--resources").output


# --- comparing sweeps --------------------------------------------------------------------------


def side(median: float, low: float, high: float, epochs: int = 5, outcome: str = "ok") -> dict:
    ok = outcome == "ok"
    return {
        "outcome": outcome,
        "ok_runs": int(ok),
        "timed_epochs": epochs if ok else 0,
        "epoch_seconds_median": median if ok else None,
        "epoch_seconds_min": low if ok else None,
        "epoch_seconds_max": high if ok else None,
    }


def test_verdict_rule():
    # Epoch seconds of a real fault-worker run alone (A) and sharing its core (B), 5 epochs each.
    alone, shared = side(0.0459, 0.0453, 0.0588), side(0.0893, 0.0877, 0.0937)
    assert verdict(alone, shared) == "slower" and verdict(shared, alone) == "faster"
    assert verdict(alone, side(0.0500, 0.0460, 0.0600)) == "same"  # the ranges overlap
    # Apart, but by less than the wider relative spread (60%): still within the noise.
    assert verdict(side(1.0, 0.7, 1.3), side(1.45, 1.31, 1.9)) == "same"
    assert verdict(alone, side(0.09, 0.09, 0.09, epochs=MIN_EPOCHS - 1)) == "too few epochs"
    assert verdict(alone, side(0, 0, 0, outcome="crash")) == "ok → crash"
    assert verdict(side(0, 0, 0, outcome="oom"), side(0, 0, 0, outcome="oom")) == "both oom"
    assert verdict(alone, None) == "only in A" and verdict(None, alone) == "only in B"


def test_compare_two_sweeps(db, machine):
    machine[db].require_quiet()  # a verdict needs runs taken on a quiet machine
    out = bench(db, "report", "--compare", "1", "2").output
    assert "sweep 1 (A) against sweep 2 (B)" in out and "different machines" not in out
    assert "verdict: faster/slower where every timed epoch" in out
    rows = records(db, "--compare", "1", "2")
    assert len(rows) == 6
    for r in rows:
        if r["a_outcome"] == "crash":
            assert r["verdict"] == "both crash" and r["epoch_ratio"] is None
        else:
            assert r["verdict"] in ("faster", "slower", "same")
            assert r["epoch_ratio"] == pytest.approx(
                r["b_epoch_seconds_median"] / r["a_epoch_seconds_median"]
            )
            assert r["a_timed_epochs"] == 3
            # the same images per epoch on both sides: time per image keeps the epoch ratio
            assert 0 < r["a_seconds_per_image_median"] < r["a_epoch_seconds_median"]
            assert r["b_seconds_per_image_median"] / r["a_seconds_per_image_median"] == pytest.approx(
                r["epoch_ratio"]
            )
            # A run of a fraction of a second may end before its first sample on a busy machine.
            if r["a_rss_peak_bytes_median"] and r["b_rss_peak_bytes_median"]:
                assert r["rss_ratio"] == r["b_rss_peak_bytes_median"] / r["a_rss_peak_bytes_median"]
            else:
                assert r["rss_ratio"] is None
    across = bench(db, "report", "--compare", "1", "3").output
    assert "note: the two sweeps ran on different machines" in across and "otherhost [0badc0de]" in across
    assert across.index("different machines") < across.index(" configurations: ")  # said first
    only = [r for r in records(db, "--compare", "1", "3") if r["verdict"] == "only in B"]
    assert len(only) == 1 and only[0]["dataset_size"] == 96 and only[0]["a_outcome"] is None
    assert "only in B" in across and "1 only in B" in across


SLOW = """
name: slow
settings:
  framework: fault
  dataset_size: 6000
  batch_size: 8
  epochs: 5
  warmup_steps: 100
"""
# Epochs of about 0.15 s alone (600 steps of the fault worker's work), slowed about 4x by three busy
# loops: far more than a hiccup of a loaded machine can spread the epochs of the run alone.
BUSY_LOOPS = 3


@pytest.mark.quiet
def test_compare_finds_a_run_slowed_by_sharing_its_cpu(tmp_path):
    """The same configuration twice on one CPU, the second time sharing it with three busy loops:
    a real slower run with identical settings (same config_hash), which the comparison must show
    and, the run being disturbed, refuse to call."""
    (tmp_path / "slow.yaml").write_text(textwrap.dedent(SLOW).lstrip())
    db = tmp_path / "bench.db"
    cpu = min(os.sched_getaffinity(0))
    command = [sys.executable, "-c", "from orchestrator.cli.main import main; main()", "run"]
    command += ["--matrix", str(tmp_path / "slow.yaml"), "--db", str(db)]
    busy = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    pin = lambda: os.sched_setaffinity(0, {cpu})  # noqa: E731  (the workers inherit it)
    # Sweep 1 only warms the machine up (right after the Ray tests its run was 1.5x slower);
    # sweep 2 is the run alone, sweep 3 the run beside the loops.
    for _ in range(2):
        subprocess.run(command, check=True, capture_output=True, preexec_fn=pin)
    # Each loop in a session of its own: with the kernel's autogroup scheduling (on here), CPU time
    # is shared between sessions, and the worker runs in a session of its own, so loops sharing
    # one session would take half the CPU together, whatever their number.
    loops = [
        subprocess.Popen([sys.executable, "-c", busy], start_new_session=True) for _ in range(BUSY_LOOPS)
    ]
    try:
        subprocess.run(command, check=True, capture_output=True, preexec_fn=pin)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    [row] = records(db, "--compare", "2", "3")
    # Slower indeed, but beside the loops: the run is flagged disturbed, and a pair with a disturbed
    # side gets no verdict (issue 22), whichever way round; the rule itself: test_verdict_rule.
    assert row["epoch_ratio"] > 2.5 and row["b_disturbed"] == 1, row
    assert row["verdict"] == NO_VERDICT
    [back] = records(db, "--compare", "3", "2")
    assert back["verdict"] == NO_VERDICT and back["a_disturbed"] == 1


# --- a real framework: throughput by batch size, accuracy by epoch ------------------------------

PYTORCH = """
name: tiny-pytorch
settings:
  min_time: 0  # timing is not the point here: no extra epochs
  min_steps: 1
  framework: pytorch
  model: small_cnn
  dataset_size: 48
  image_size: 32
  classes: 3
  epochs: 5
  warmup_steps: 1
  timeout: 120
axes:
  batch_size: [4, 16]
include:
  - {framework: pytorch, model: small_cnn, dataset_size: 48, image_size: 32, classes: 3, epochs: 5,
     warmup_steps: 1, timeout: 120, batch_size: 16, optimizer: adam, lr: 0.001}
"""


@pytest.mark.framework
def test_batch_and_accuracy_tables_on_real_pytorch_runs(tmp_path, pytorch_python):
    (tmp_path / "m.yaml").write_text(textwrap.dedent(PYTORCH).lstrip())
    db = tmp_path / "bench.db"
    run_sweep(db, tmp_path / "m.yaml")
    batch = records(db, "--table", "batch")
    sgd = sorted((r for r in batch if r["optimizer"] == "sgd"), key=lambda r: r["batch_size"])
    assert [r["batch_size"] for r in sgd] == [4, 16] and sgd[0]["speedup_vs_smallest_batch"] == 1.0
    assert all(
        r["images_per_second_min"] <= r["images_per_second_median"] <= r["images_per_second_max"] for r in sgd
    )
    text = bench(db, "report", "--table", "batch").output
    assert "images/s (median, min–max)" in text and "ms/image (median, min–max)" in text
    rows = records(db, "--table", "accuracy")
    assert sorted({r["epoch"] for r in rows}) == [5]  # 5 epochs: read at epoch 5
    conn = sqlite3.connect(db)
    for r in rows:
        [value] = conn.execute(
            "SELECT e.val_accuracy FROM epochs e JOIN runs r ON r.id = e.run_id "
            "WHERE r.config_hash = ? AND e.epoch = 5",
            (r["config_hash"],),
        ).fetchone()
        assert r["val_accuracy_median"] == value and 0 <= value <= 1
    conn.close()
    text = bench(db, "report", "--table", "accuracy").output
    assert "epoch 5 val acc" in text and "adam" in text and "0.001" in text


def test_the_versions_table_and_compare_read_the_release_each_run_recorded(db):
    # The fault worker records "fault" as its version; sweep 2 is made to record another release
    # for the length of the test, as a sweep after `bench env use` would.
    ok = [r for r in records(db, "--table", "versions", "--sweep", "1,2") if r["outcome"] == "ok"]
    assert ok and {r["framework_version"] for r in ok} == {"fault"} and {r["releases"] for r in ok} == {1}
    assert {r["change"] for r in ok} == {"one release only"}
    in_sweep_2 = "run_id IN (SELECT id FROM runs WHERE sweep_id = 2)"
    moved = f"UPDATE environments SET framework_version = :v WHERE {in_sweep_2}"
    dbs.execute(db, moved, v="fault 2")
    try:
        rows = records(db, "--table", "versions", "--sweep", "1,2")
        ok = [r for r in rows if r["outcome"] == "ok"]
        assert [r["framework_version"] for r in ok[:2]] == ["fault", "fault 2"]  # a configuration's releases
        assert {r["releases"] for r in ok} == {2}
        pairs = records(db, "--compare", "version:fault", "version:fault 2", "--sweep", "1,2")
        # Every configuration that recorded both releases is one pair (those that failed too).
        recorded = {r["config_hash"] for r in rows if r["framework_version"] is not None}
        assert len(pairs) == len(recorded) and all(r["a_runs"] and r["b_runs"] for r in pairs)
        assert {r["verdict"] for r in pairs if r["a_outcome"] != "ok"} <= {"both crash", "both unsupported"}
    finally:
        dbs.execute(db, moved, v="fault")

"""Accuracy claims (orchestrator/studies/accuracy.py) judged on hand-built runs with epochs whose
answer is known, the published accuracy table set beside them as orders, and the loader's one-line
refusals of the new keys."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.studies import accuracy, claims, loader, measured
from orchestrator.studies import report as study_report
from tests.studies_db import write_db, write_study

MATRIX = """\
name: grid
settings: {device: cpu, threads: 2, model: small_cnn, dataset: digits, classes: 10, image_size: 16,
           dataset_size: 500, optimizer: sgd, epochs: 3}
axes:
  framework: [pytorch, tensorflow]
  lr: [0.01, 0.001, 0.0001]
  seed: [1, 2, 3, 4, 5]
"""

CLAIMS = """\
claims:
  - {id: lr-order, kind: order, text: t, source: s, items: lr, order: [0.01, 0.001, 0.0001],
     metric: val_accuracy, at: every, where: {framework: tensorflow}}
  - {id: lr-wrong, kind: order, text: t, source: s, items: lr, order: [0.0001, 0.01],
     metric: val_accuracy, at: every, where: {framework: tensorflow}}
  - {id: lr-noise, kind: order, text: t, source: s, items: lr, order: [0.001, 0.0001],
     metric: val_accuracy, epoch: 2, where: {framework: pytorch}}
  - {id: lr-last, kind: order, text: t, source: s, items: lr, order: [0.01, 0.001], columns: framework,
     metric: val_accuracy, at: last}
  - {id: sooner, kind: order, text: t, source: s, order: [pytorch, tensorflow], metric: epochs_to_final,
     where: {lr: 0.01}}
  - {id: later, kind: order, text: t, source: s, order: [tensorflow, pytorch], metric: epochs_to_final,
     fraction: 0.95, where: {lr: 0.01}}
"""

# Each (framework, lr): the validation accuracy after epochs 1 to 3 of seed 1; seed k adds 0.002 k,
# so every cell's five seeds are apart from another cell's when their curves are more than 0.01 apart.
CURVES = {
    ("tensorflow", 0.01): (0.5, 0.9, 1.0),  # 95 % of its final (0.95) at epoch 2.5
    ("tensorflow", 0.001): (0.3, 0.4, 0.5),
    ("tensorflow", 0.0001): (0.1, 0.12, 0.14),
    ("pytorch", 0.01): (0.8, 0.9, 0.9),  # 0.855 at epoch 1 + 0.055 / 0.1 = 1.55
    ("pytorch", 0.001): (0.3, 0.35, 0.4),
    ("pytorch", 0.0001): (0.3, 0.35, 0.4),  # the same as 0.001's: inside the noise
}


def _db(tmp_path: Path, curves=CURVES) -> str:
    cells = [
        ({"framework": fw, "lr": lr, "seed": seed, **_fixed()}, [1.0], {})
        for (fw, lr) in curves
        for seed in range(1, 6)
    ]
    url = write_db(tmp_path / "t.db", cells)
    conn = sqlite3.connect(tmp_path / "t.db")
    try:
        for run_id, fw, lr, seed in conn.execute("SELECT id, framework, lr, seed FROM runs").fetchall():
            for epoch, value in enumerate(curves[(fw, lr)], start=1):
                conn.execute(
                    "INSERT INTO epochs (run_id, repeat, epoch, seconds, steps, images, val_accuracy) "
                    "VALUES (?, 0, ?, 1.0, 10, 320, ?)",
                    (run_id, epoch, value + 0.002 * seed),
                )
        conn.commit()
    finally:
        conn.close()
    return url


def _fixed() -> dict[str, object]:
    return {
        "model": "small_cnn", "dataset": "digits", "classes": 10, "image_size": 16, "dataset_size": 500,
        "optimizer": "sgd", "epochs": 3,
    }  # fmt: skip


def _study(tmp_path: Path, tail: str = CLAIMS):
    return loader.load_study(write_study(tmp_path / "studies", tail, matrix=MATRIX))


def _judge(tmp_path: Path) -> dict[str, claims.Verdict]:
    study = _study(tmp_path)
    db = Database(_db(tmp_path), create=False)
    found = measured.read(db, study, "cpu")
    return {c.id: claims.judge(c, found.cells) for c in study.claims}


def test_epochs_to_a_fraction_of_the_final_accuracy_is_interpolated():
    assert accuracy.epochs_to({1: 0.5, 2: 0.9, 3: 1.0}, 0.95) == pytest.approx(2.5)
    assert accuracy.epochs_to({1: 0.8, 2: 0.9, 3: 0.9}, 0.95) == pytest.approx(1.55)
    assert accuracy.epochs_to({1: 0.97, 2: 0.98, 3: 1.0}, 0.95) == 1.0  # nothing before epoch 1
    assert accuracy.epochs_to({1: 0.5, 2: 0.9, 3: 1.0}, 1.0) == 3.0
    assert accuracy.epochs_to({1: 0.0, 2: 0.0}, 0.95) is None  # no final accuracy to reach


def test_the_order_of_learning_rates_at_every_epoch_holds_and_its_reverse_does_not(tmp_path):
    v = _judge(tmp_path)
    assert v["lr-order"].verdict == "holds"
    assert v["lr-wrong"].verdict == "does not hold"
    # Each epoch its own column, all six comparisons corrected together.
    lines = " ".join(v["lr-order"].figures)
    for epoch in (1, 2, 3):
        assert f"epoch {epoch}: 0.001/0.01" in lines and f"epoch {epoch}: 0.0001/0.001" in lines
    assert "holm correction over 6 comparisons" in lines.lower()
    # The figures are the stored accuracies: TensorFlow lr 0.01 after epoch 2, seeds 1-5.
    assert "epoch 2: validation accuracy, median over seeds: " in lines
    assert "0.01 0.906 (n=5)" in lines  # median of 0.9 + 0.002 k, k = 1..5
    assert "epoch 2: 0.001/0.01 0.448" in lines  # (0.4 + 0.006) / (0.9 + 0.006)


def test_learning_rates_the_runs_cannot_tell_apart_are_not_shown(tmp_path):
    v = _judge(tmp_path)
    assert v["lr-noise"].verdict == "not shown at this n"


def test_the_last_epoch_per_framework(tmp_path):
    v = _judge(tmp_path)
    assert v["lr-last"].verdict == "holds"
    lines = " ".join(v["lr-last"].figures)
    assert "pytorch: 0.001/0.01" in lines and "tensorflow: 0.001/0.01" in lines


def test_fewer_epochs_to_the_final_accuracy(tmp_path):
    v = _judge(tmp_path)
    assert v["sooner"].verdict == "holds" and v["later"].verdict == "does not hold"
    lines = " ".join(v["sooner"].figures)
    # pytorch: 0.855 + 0.0019 k reached between epochs 1 and 2; tensorflow between 2 and 3.
    assert "epochs to 0.95 of the final accuracy, median over seeds: pytorch 1.5" in lines
    assert "tensorflow 2.5" in lines


def test_a_seed_is_one_figure_and_runs_of_one_seed_are_not_more(tmp_path):
    """Five runs of seed 1 replay one training: one figure, never five."""
    cell = measured.Cell({"seed": 1}, curves={i: (1, {1: 0.5 + i / 100}) for i in range(5)})
    claim = _study(tmp_path).claims[0]
    assert accuracy.per_epoch(cell, claim) == {1: [pytest.approx(0.52)]}


def test_two_sweeps_of_one_seed_are_not_pooled(tmp_path):
    one = measured.Cell({"lr": 0.01, "seed": 1})
    two = measured.Cell({"lr": 0.01, "seed": 1})
    three = measured.Cell({"lr": 0.01, "seed": 2})
    assert len(accuracy.pooled([one, three])) == 1
    assert len(accuracy.pooled([one, two, three])) == 3  # the grid then says which clash


def test_without_epochs_an_accuracy_claim_is_not_checkable(tmp_path):
    study = _study(tmp_path)
    cells = [({"framework": "tensorflow", "lr": 0.01, "seed": 1, **_fixed()}, [1.0], {})]
    db = Database(write_db(tmp_path / "e.db", cells), create=False)
    verdict = claims.judge(study.claims[0], measured.read(db, study, "cpu").cells)
    assert verdict.verdict == "not checkable here" and "0.01: no validation accuracy recorded" in verdict.note


ACCURACY_TABLE = """\
published:
  - name: acc
    file: published/acc.csv
    unit: fraction
    row: accuracy after an epoch
    value: accuracy
    items: lr
    columns: epoch
    where: {framework: tensorflow}
    measured: {framework: tensorflow}
"""

CSV = """\
framework,lr,epoch,accuracy
tensorflow,0.01,3,0.9
tensorflow,0.001,3,0.5
tensorflow,0.0001,3,0.2
tensorflow,0.01,10,0.95
tensorflow,0.001,10,0.6
tensorflow,0.0001,10,0.7
"""


def _published(tmp_path: Path, csv: str = CSV, table: str = ACCURACY_TABLE):
    folder = write_study(tmp_path / "studies", table, matrix=MATRIX)
    (folder / "published").mkdir(exist_ok=True)
    (folder / "published" / "acc.csv").write_text(csv)
    return loader.load_study(folder)


def test_the_published_accuracy_is_set_beside_as_orders_never_levels(tmp_path):
    study = _published(tmp_path)
    db = Database(_db(tmp_path), create=False)
    text = study_report.report(study, measured.read(db, study, "cpu"), "markdown")
    assert "bench's accuracies are on digits, not the study's data" in text
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in text.splitlines()
        if line.startswith("| ")
    }
    assert rows["3"][:2] == ["0.01, 0.001, 0.0001", "0.01 → 0.001 → 0.0001"]
    assert rows["3"][3] == "1.00 over 3"
    assert rows["10"][1].startswith("not run here")  # bench trained 3 epochs
    assert rows["last (published 10, bench 3)"][0] == "0.01, 0.0001, 0.001"
    assert rows["last (published 10, bench 3)"][3] == "0.33 over 3"
    assert rows["1"][0] == "—" and rows["1"][1] == "0.01 → 0.001 → 0.0001"
    assert "0.906" not in text  # no level of bench's beside the study's


C = "  - {id: c, kind: order, text: t, source: s, order: [pytorch, tensorflow], "
ACC = C + "metric: val_accuracy,\n"


@pytest.mark.parametrize(
    "tail, says",
    [
        (
            C + "metric: val_accuracy}\n",
            "study.yaml:8: metric: a val_accuracy claim gives one of epoch: N or at",
        ),
        (
            ACC + "     epoch: 40}\n",
            "study.yaml:9: epoch: epoch 40: the study's matrices train at most 3 epochs",
        ),
        (ACC + "     epoch: 0}\n", "study.yaml:9: epoch: 0: expected an epoch, 1 to 10000"),
        (ACC + "     at: first}\n", "study.yaml:9: at: 'first': expected one of every, last"),
        (ACC + "     at: last, epoch: 2}\n", "study.yaml:8: metric: a val_accuracy claim gives one of"),
        (C + "epoch: 2}\n", "study.yaml:8: epoch: only a claim of metric val_accuracy takes epoch (this one"),
        (
            ACC + "     at: last, fraction: 0.9}\n",
            "study.yaml:9: fraction: only a claim of metric epochs_to_final takes fraction",
        ),
        (
            C + "metric: epochs_to_final,\n     fraction: 1.5}\n",
            "study.yaml:9: fraction: 1.5: expected a number",
        ),
        (
            "  - {id: c, kind: not_checkable, text: t, source: s, reason: r, at: every}\n",
            "study.yaml:8: at: a not_checkable claim does not take at",
        ),
    ],
)
def test_the_loader_refuses_bad_accuracy_keys_in_one_line(tmp_path, tail, says):
    with pytest.raises(ConfigError) as found:
        _study(tmp_path, "claims:\n" + tail)
    message = str(found.value)
    assert says in message and "\n" not in message, message


@pytest.mark.parametrize(
    "table, csv, says",
    [
        (
            ACCURACY_TABLE.replace("columns: epoch", "columns: model"),
            CSV,
            "study.yaml:14: columns: an accuracy table's columns are epoch",
        ),
        (ACCURACY_TABLE, CSV.replace("0.01,3,", "0.01,three,"), "acc.csv:2: epoch: 'three' is not an epoch"),
        (
            ACCURACY_TABLE,
            CSV.replace(",3,0.9", ",3,1.5"),
            "acc.csv:2: accuracy: '1.5' is not an accuracy (0 to 1)",
        ),
    ],
)
def test_a_bad_accuracy_table_is_one_line(tmp_path, table, csv, says):
    with pytest.raises(ConfigError) as found:
        _published(tmp_path, csv, table)
    assert says in str(found.value) and "\n" not in str(found.value), str(found.value)


DIGITS = Path(__file__).resolve().parent / "data" / "studies"


@pytest.mark.slow
@pytest.mark.framework
def test_real_runs_on_the_digits_are_judged_on_their_stored_accuracies(cli, workdir, pytorch_python):
    """PyTorch on the real digits (tests/data/studies/digits: two learning rates, two seeds, 2
    epochs), through bench study run and report: each figure of the verdicts is the median of the
    accuracies the runs stored, and 2 seeds a side cannot show an order."""
    result = cli("study", "run", "digits", "--studies", str(DIGITS))
    assert result.exit_code == 0, result.output
    assert "4 ok" in result.output
    out = cli("study", "report", "digits", "--studies", str(DIGITS)).output
    conn = sqlite3.connect(workdir / "bench.db")
    try:
        stored = conn.execute(
            "SELECT r.lr, e.epoch, e.val_accuracy FROM epochs e JOIN runs r ON r.id = e.run_id"
        ).fetchall()
    finally:
        conn.close()
    by: dict[tuple[float, int], list[float]] = {}
    for lr, epoch, value in stored:
        by.setdefault((lr, epoch), []).append(value)
    assert sorted(by) == [(0.0001, 1), (0.0001, 2), (0.01, 1), (0.01, 2)]
    assert all(len(v) == 2 for v in by.values())  # one run a seed
    for epoch in (1, 2):
        line = next(x for x in out.splitlines() if x.startswith(f"- epoch {epoch}: validation accuracy"))
        for lr in (0.0001, 0.01):
            median = sum(by[(lr, epoch)]) / 2
            assert f"{lr} {median:.3g} (n=2)" in line, (line, by)
    assert "lr-order (made up): not shown at this n" in out
    last = {lr: [v for (r, e), vs in by.items() if r == lr and e == 2 for v in vs] for lr in (0.01, 0.0001)}
    assert min(last[0.01]) > 0.25  # it learned the real digits: well above chance (0.1)


def test_a_hostile_stored_accuracy_leaves_the_claim_not_checkable_and_the_report_whole(tmp_path):
    url = _db(tmp_path)
    conn = sqlite3.connect(tmp_path / "t.db")
    [(run_id,)] = conn.execute(
        "SELECT id FROM runs WHERE framework = 'tensorflow' AND lr = 0.01 AND seed = 1"
    )
    conn.execute("UPDATE epochs SET val_accuracy = 0 WHERE epoch = 2 AND run_id = ?", (run_id,))
    conn.execute("UPDATE epochs SET val_accuracy = -3 WHERE epoch = 3 AND run_id = ?", (run_id,))
    conn.commit()
    conn.close()
    folder = write_study(tmp_path / "studies", ACCURACY_TABLE + CLAIMS, matrix=MATRIX)
    (folder / "published").mkdir()
    (folder / "published" / "acc.csv").write_text(CSV)
    study = loader.load_study(folder)
    found = measured.read(Database(url, create=False), study, "cpu")
    verdict = claims.judge(study.claims[0], found.cells)  # lr-order, TensorFlow at every epoch
    assert verdict.verdict == "not checkable here" and "positive" in verdict.note, verdict
    text = study_report.report(study, found, "text")
    assert "— (an accuracy of 0 or less cannot be ranked as a ratio)" in text
    assert "lr-last" in text  # the other claims are still judged

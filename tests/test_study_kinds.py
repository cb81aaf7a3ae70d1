"""The band and shape claim kinds (orchestrator/studies/kinds.py) judged on hand-built databases
whose answer is known (holds, does not hold, not shown at this n), their bad input refused in one
line, and a published-only table read and shown as printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.studies import claims, kinds, loader, measured
from orchestrator.studies import report as study_report
from tests.studies_db import FAST, NOISY_A, NOISY_B, SLOW, write_db, write_study

CLAIMS = """\
claims:
  - {id: similar, kind: similar, text: t, source: s, a: tensorflow, b: pytorch, within: 1.25,
     columns: model, where: {batch_size: 8}}
  - {id: spread, kind: spread, text: t, source: s, within: 1.9, columns: model, where: {batch_size: 8}}
  - {id: rise-pytorch, kind: rises_beyond, text: t, source: s, axis: batch_size,
     where: {framework: pytorch, model: alexnet}}
  - {id: rise-tensorflow, kind: rises_beyond, text: t, source: s, axis: batch_size,
     where: {framework: tensorflow, model: alexnet}}
  - {id: rise-mxnet, kind: rises_beyond, text: t, source: s, axis: batch_size,
     where: {framework: mxnet, model: alexnet}}
  - {id: rise-resnet, kind: rises_beyond, text: t, source: s, axis: batch_size,
     where: {framework: pytorch, model: resnet50}}
"""


def _by(figures: list[float], factor: float) -> list[float]:
    return [f * factor for f in figures]


def _judge(tmp_path: Path, cells) -> dict[str, claims.Verdict]:
    study = loader.load_study(write_study(tmp_path / "studies", CLAIMS))
    db = Database(write_db(tmp_path / "t.db", cells), create=False)
    found = measured.read(db, study, "cpu")
    return {c.id: kinds.judge(c, found.cells) for c in study.claims}


def _at_8(pytorch, tensorflow, mxnet) -> list:
    return [
        ({"framework": f, "model": m, "batch_size": 8}, figures, {})
        for m in ("alexnet", "resnet50")
        for f, figures in (("pytorch", pytorch), ("tensorflow", tensorflow), ("mxnet", mxnet))
    ]


def _series(framework: str, model: str, by_batch: dict[int, list[float]]) -> list:
    return [({"framework": framework, "model": model, "batch_size": b}, f, {}) for b, f in by_batch.items()]


def test_two_cells_told_inside_the_band_are_similar_and_outside_it_are_not(tmp_path):
    v = _judge(tmp_path, _at_8(FAST, _by(FAST, 1.02), _by(FAST, 1.5)))
    assert v["similar"].verdict == "holds"
    assert any("alexnet: tensorflow/pytorch 1.02 [" in line for line in v["similar"].figures)
    assert v["spread"].verdict == "holds"  # slowest/fastest 1.5, wholly below 1.9
    assert any("slowest/fastest (mxnet/pytorch)" in line for line in v["spread"].figures)
    v = _judge(tmp_path / "apart", _at_8(FAST, SLOW, _by(SLOW, 1.5)))
    assert v["similar"].verdict == "does not hold"  # 2x: wholly outside 1.25
    assert v["spread"].verdict == "does not hold"  # 3x: wholly above 1.9


def test_a_band_the_interval_crosses_is_not_shown_never_holds(tmp_path):
    v = _judge(tmp_path, _at_8(NOISY_A, NOISY_B, _by(NOISY_B, 1.5)))
    assert v["similar"].verdict == "not shown at this n"  # about 1.05, the interval across 0.8 and 1.25
    assert v["spread"].verdict == "not shown at this n"  # about 1.6, the interval across 1.9


def test_one_run_a_cell_never_holds_a_band(tmp_path):
    v = _judge(tmp_path, _at_8(FAST[:1], FAST[:1], FAST[:1]))
    assert v["similar"].verdict == "not shown at this n"
    assert v["spread"].verdict == "not shown at this n"
    assert "a cell of one run has no interval" in v["spread"].note


def test_few_runs_say_the_interval_undercovers(tmp_path):
    v = _judge(tmp_path, _at_8(FAST[:3], _by(FAST[:3], 1.02), _by(FAST[:3], 1.1)))
    assert "over 3 runs the 95 % interval holds the truth less often" in v["similar"].note


def test_a_minimum_inside_the_range_and_a_rise_after_it(tmp_path):
    cells = _series("pytorch", "alexnet", {1: SLOW, 8: FAST, 32: _by(FAST, 1.5)})  # falls, then rises
    cells += _series("tensorflow", "alexnet", {1: _by(SLOW, 2), 8: SLOW, 32: FAST})  # falls throughout
    cells += _series("mxnet", "alexnet", {1: SLOW, 8: NOISY_A, 32: NOISY_B})  # the rise inside the noise
    cells += _series("pytorch", "resnet50", {1: FAST, 8: _by(FAST, 1.5), 32: SLOW})  # rises from the start
    v = _judge(tmp_path, cells)
    assert v["rise-pytorch"].verdict == "holds"
    assert "pytorch: the lowest figure at batch_size 8 (of 1, 8, 32)" in v["rise-pytorch"].figures
    assert v["rise-tensorflow"].verdict == "does not hold"
    assert v["rise-mxnet"].verdict == "not shown at this n"
    assert v["rise-resnet"].verdict == "holds"
    # Every ordered pair of levels is compared, Holm over all of them: the minimum is picked from
    # the same runs, and the correction must cover whichever pair it picks.
    assert sum("Holm correction over 3 comparisons" in line for line in v["rise-pytorch"].figures) == 3


def test_too_many_levels_for_the_runs_say_so(tmp_path):
    cells = _series("pytorch", "alexnet", {1: SLOW[:3], 8: FAST[:3], 32: _by(FAST[:3], 1.5)})
    v = _judge(tmp_path, cells)
    assert v["rise-pytorch"].verdict == "not shown at this n"
    assert "more runs are needed" in v["rise-pytorch"].note


def test_an_empty_database_leaves_the_new_kinds_not_checkable(tmp_path):
    v = _judge(tmp_path, [])
    assert {x.verdict for x in v.values()} == {"not checkable here"}


C = "{id: c, text: t, source: s, "


@pytest.mark.parametrize(
    "claim,says",
    [
        (
            C + "kind: similar, a: pytorch, b: tensorflow, within: 0.8}",
            "study.yaml:8: within: 0.8: expected a factor above 1",
        ),
        (C + "kind: spread, within: wide}", "study.yaml:8: within: 'wide': expected a factor above 1"),
        (
            C + "kind: similar, a: pytorch, b: tensorflow}",
            "study.yaml:8: within: a similar claim needs within",
        ),
        (C + "kind: spread, within: 2, a: pytorch}", "study.yaml:8: a: a spread claim does not take a"),
        (C + "kind: similar, a: caffe, b: pytorch, within: 2}", "study.yaml:8: a: framework"),
        (
            C + "kind: rises_beyond, axis: batchsize}",
            "axis: 'batchsize' is not a setting (did you mean batch_size?)",
        ),
    ],
)
def test_a_bad_claim_of_a_new_kind_is_refused_in_one_line(tmp_path, claim, says):
    folder = write_study(tmp_path / "studies", f"claims:\n  - {claim}\n")
    with pytest.raises(ConfigError) as caught:
        loader.load_study(folder)
    assert says in str(caught.value) and "\n" not in str(caught.value)


KERNELS = """\
published:
  - name: kernels
    file: published/k.csv
    unit: s
    row: a kernel's GPU time in one framework
    value: seconds
    where: {kind: plain}
    published_only: the rows are GPU kernels, not frameworks
"""
KERNEL_CSV = (
    "kernel,framework,kind,seconds,calls\n"
    "128x64_nn,caffe,plain,6.9,75264\n64x64_nt,tensorflow,batched,0.39,64\n"
)


def _kernels(tmp_path: Path, tail: str = KERNELS, csv: str = KERNEL_CSV) -> Path:
    folder = write_study(tmp_path / "studies", tail)
    (folder / "published").mkdir()
    (folder / "published" / "k.csv").write_text(csv)
    return folder


def test_a_published_only_table_is_shown_as_printed_with_why_nothing_is_beside_it(tmp_path):
    study = loader.load_study(_kernels(tmp_path))
    db = Database(write_db(tmp_path / "t.db", []), create=False)
    text = study_report.report(study, measured.read(db, study, "cpu"), "markdown")
    assert "## Published only: kernels" in text
    assert "Not measured here: the rows are GPU kernels, not frameworks" in text
    assert "| 128x64_nn | caffe | plain | 6.9 | 75264 |" in text
    assert "64x64_nt" not in text  # where: {kind: plain} keeps the plain rows only


@pytest.mark.parametrize(
    "tail,csv,says",
    [
        (KERNELS, KERNEL_CSV + "64x64_nn,tensorflow,plain,,21\n", "k.csv:4: seconds: '' is not a number"),
        (KERNELS.replace("seconds", "secs"), KERNEL_CSV, "k.csv:1: secs: no such column"),
        (
            KERNELS + "    columns: model\n",
            KERNEL_CSV,
            "study.yaml:15: columns: a published_only table is matched",
        ),
    ],
)
def test_a_bad_published_only_table_is_refused_in_one_line(tmp_path, tail, csv, says):
    with pytest.raises(ConfigError) as caught:
        loader.load_study(_kernels(tmp_path, tail, csv))
    assert says in str(caught.value) and "\n" not in str(caught.value)


ABSENT = """\
published:
  - name: times
    file: published/p.csv
    unit: s
    row: a framework's time
    value: value
    columns: model
    measured: {batch_size: 8}
    unknown: carry
    absent: {caffe: bench has no Caffe adapter, %s: it runs}
"""


def test_a_row_bench_lacks_says_why_and_an_absent_item_bench_has_is_refused(tmp_path):
    csv = "framework,model,value\npytorch,alexnet,1\ncaffe,alexnet,2\nchainer,alexnet,3\n"
    folder = write_study(tmp_path / "studies", ABSENT % "chainer")
    (folder / "published").mkdir()
    (folder / "published" / "p.csv").write_text(csv)
    study = loader.load_study(folder)
    db = Database(write_db(tmp_path / "t.db", []), create=False)
    text = study_report.report(study, measured.read(db, study, "cpu"), "text")
    assert "not run here: bench has no framework caffe (bench has no Caffe adapter)" in text
    (folder / "study.yaml").write_text((folder / "study.yaml").read_text().replace("chainer:", "pytorch:"))
    with pytest.raises(ConfigError) as caught:
        loader.load_study(folder)
    assert "study.yaml:16: absent: 'pytorch': not one of the table's frameworks that bench lacks" in str(
        caught.value
    )

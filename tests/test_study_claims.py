"""Each claim kind judged on a hand-built database whose answer is known: holds, does not hold,
mixed, inside the noise (not shown at this n), and not checkable here (orchestrator/studies/claims.py)."""

from __future__ import annotations

import pytest

from orchestrator.storage.db import Database
from orchestrator.studies import claims, loader, measured
from tests.studies_db import FAST, NOISY_A, NOISY_B, SLOW, write_db, write_study

CLAIMS = """\
claims:
  - {id: pt-every, kind: fastest, text: t, source: s, who: pytorch, in: [every], columns: model,
     where: {batch_size: 8}}
  - {id: pt-average, kind: fastest, text: t, source: s, who: pytorch, in: [average, worst], columns: model,
     where: {batch_size: 8}}
  - {id: tf-every, kind: fastest, text: t, source: s, who: tensorflow, in: [every], columns: model,
     where: {batch_size: 8}}
  - {id: order, kind: order, text: t, source: s, order: [pytorch, tensorflow, mxnet], columns: model,
     where: {batch_size: 8}}
  - {id: order-wrong, kind: order, text: t, source: s, order: [tensorflow, pytorch], columns: model,
     where: {batch_size: 8}}
  - {id: ratio-above, kind: ratio, text: t, source: s, a: tensorflow, b: pytorch, above: 1.5, columns: model,
     where: {batch_size: 8}}
  - {id: ratio-far, kind: ratio, text: t, source: s, a: tensorflow, b: pytorch, above: 3, columns: model,
     where: {batch_size: 8}}
  - {id: ratio-one, kind: ratio, text: t, source: s, a: tensorflow, b: pytorch, above: 1, columns: model,
     where: {batch_size: 8}}
  - {id: rises, kind: rises_with, text: t, source: s, metric: images_per_second, axis: batch_size,
     where: {framework: pytorch, model: alexnet}}
  - {id: falls, kind: rises_with, text: t, source: s, metric: seconds_per_image, axis: batch_size,
     where: {framework: pytorch, model: alexnet}}
  - {id: ram, kind: resource, text: t, source: s, metric: rss_peak_bytes, a: pytorch, b: tensorflow,
     relation: less, columns: model, where: {batch_size: 8}}
  - {id: ram-wrong, kind: resource, text: t, source: s, metric: rss_peak_bytes, a: pytorch, b: tensorflow,
     relation: greater, columns: model, where: {batch_size: 8}}
  - {id: unpinned, kind: order, text: t, source: s, order: [pytorch, tensorflow], columns: model}
  - {id: absent, kind: order, text: t, source: s, order: [pytorch, mxnet],
     where: {batch_size: 1, model: resnet50}}
  - {id: caffe, kind: not_checkable, text: t, source: s, reason: bench has no Caffe}
"""


def _slower(figures: list[float], by: float) -> list[float]:
    return [f * by for f in figures]


def _judge(tmp_path, cells) -> dict[str, claims.Verdict]:
    study = loader.load_study(write_study(tmp_path / "studies", CLAIMS))
    db = Database(write_db(tmp_path / "t.db", cells), create=False)
    found = measured.read(db, study, "cpu")
    return {c.id: claims.judge(c, found.cells) for c in study.claims}


def _cells(pytorch, tensorflow, mxnet, resnet_pytorch=None):
    ram = {"rss_peak_bytes": 10**9}
    found = []
    for model in ("alexnet", "resnet50"):
        mine = resnet_pytorch if model == "resnet50" and resnet_pytorch else pytorch
        found += [
            ({"framework": "pytorch", "model": model, "batch_size": 8}, mine, ram),
            (
                {"framework": "tensorflow", "model": model, "batch_size": 8},
                tensorflow,
                {"rss_peak_bytes": 2 * 10**9},
            ),
            ({"framework": "mxnet", "model": model, "batch_size": 8}, mxnet, ram),
        ]
    found += [
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 1}, _slower(FAST, 4), {}),
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 32}, _slower(FAST, 0.5), {}),
        ({"framework": "pytorch", "model": "resnet50", "batch_size": 1}, FAST, {}),
        ({"framework": "mxnet", "model": "resnet50", "batch_size": 1}, FAST, {"outcome": "crash"}),
    ]
    return found


def test_claims_that_the_runs_support_hold_and_their_reverse_does_not(tmp_path):
    v = _judge(tmp_path, _cells(FAST, SLOW, _slower(SLOW, 1.5)))
    assert v["pt-every"].verdict == "holds"
    assert v["pt-average"].verdict == "holds"
    assert v["tf-every"].verdict == "does not hold"
    assert v["order"].verdict == "holds" and v["order-wrong"].verdict == "does not hold"
    assert v["ratio-above"].verdict == "holds" and v["ratio-far"].verdict == "does not hold"
    assert v["rises"].verdict == "holds" and v["falls"].verdict == "does not hold"
    assert v["ram"].verdict == "holds" and v["ram-wrong"].verdict == "does not hold"
    # The figures it rests on: the ratio, its interval, the runs and the test's p-value.
    assert any(
        "tensorflow/pytorch 2" in line and "n=5/5" in line and "p=" in line for line in v["order"].figures
    )


def test_a_difference_inside_the_noise_is_not_shown_never_holds(tmp_path):
    v = _judge(tmp_path, _cells(NOISY_A, NOISY_B, _slower(SLOW, 1.5)))
    assert v["pt-every"].verdict == "not shown at this n"
    assert v["order"].verdict == "not shown at this n"  # pytorch against tensorflow: noise
    assert v["ratio-one"].verdict == "not shown at this n"  # 1.05 [0.77-1.32] straddles 1
    assert v["ratio-above"].verdict == "does not hold"  # ... but lies wholly below 1.5
    assert "the smallest difference these runs could detect" in " ".join(v["order"].figures)


def test_one_column_each_way_is_mixed(tmp_path):
    v = _judge(tmp_path, _cells(FAST, SLOW, _slower(SLOW, 1.5), resnet_pytorch=_slower(SLOW, 1.2)))
    assert v["pt-every"].verdict == "mixed"
    assert v["order"].verdict == "mixed"


def test_one_run_a_cell_is_never_told_apart(tmp_path):
    v = _judge(tmp_path, _cells(FAST[:1], SLOW[:1], SLOW[:1]))
    assert v["pt-every"].verdict == "not shown at this n"
    assert v["pt-average"].verdict == "not shown at this n"


def test_what_the_database_cannot_answer_is_not_checkable_and_says_why(tmp_path):
    v = _judge(tmp_path, _cells(FAST, SLOW, SLOW))
    assert v["caffe"].verdict == "not checkable here" and v["caffe"].note == "bench has no Caffe"
    assert v["unpinned"].verdict == "not checkable here" and "pin it in where" in v["unpinned"].note
    assert v["absent"].verdict == "not checkable here"
    assert "mxnet: no ok run (crash ×5)" in v["absent"].note


def test_an_empty_database_leaves_every_claim_not_checkable(tmp_path):
    v = _judge(tmp_path, [])
    assert {x.verdict for x in v.values()} == {"not checkable here"}


@pytest.mark.parametrize(
    "parts,expected",
    [
        (["holds", "holds"], "holds"),
        (["holds", "not shown at this n"], "not shown at this n"),
        (["holds", "does not hold"], "mixed"),
        (["does not hold", "not shown at this n"], "does not hold"),
        ([], "not shown at this n"),
    ],
)
def test_verdicts_combine_as_documented(parts, expected):
    assert claims.combine(parts) == expected


def test_too_few_runs_for_the_corrected_test_say_so(tmp_path):
    """3 runs a side: the exact test's smallest p is 0.1, so no comparison can pass, however far
    apart the cells lie; the verdict is not shown, and its note says more runs are needed."""
    v = _judge(tmp_path, _cells(FAST[:3], SLOW[:3], _slower(SLOW[:3], 1.5)))
    assert v["order"].verdict == "not shown at this n"
    assert "at n=3/3 over 4 comparisons no difference can pass the test" in v["order"].note
    assert v["pt-every"].verdict == "not shown at this n"  # tie groups: 3 against 3 is never apart

"""The acceptance checks across all six frameworks: the same models (identical trainable
parameter counts, equal to the reference architectures'), and the quick matrix with a row for
every framework, each ok or with its honest outcome."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from orchestrator.config.run_config import FRAMEWORKS, MODELS
from tests import import_record
from workers import models
from workers.models import GPT, LANGUAGE

pytestmark = [pytest.mark.slow, pytest.mark.framework]
REAL = [f for f in FRAMEWORKS if f != "fault"]
REFERENCE_1000 = {
    "alexnet": 61_100_840,
    "mobilenet_v2": 3_504_872,
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "googlenet": 6_624_904,
    "gru": 3_818_302 - 202 + 100 * 1000 + 1000,  # the IMDB GRU with a 1000-way dense layer
}
# What a framework honestly cannot do, with the reason its adapter gives (docs/frameworks/).
KNOWN_LIMITS = {
    ("singa", "mobilenet_v2"): ("unsupported", "grouped convolution"),
    ("singa", "googlenet"): ("unsupported", "concatenation"),
    ("singa", "gru"): ("unsupported", "cuDNN"),
    # at bench models' batch of 32 full contexts, its one-hot input and logits pass singa's 2 GiB limit
    ("singa", "gpt2_small"): ("unsupported", "2 GiB"),
}
QUICK = Path(__file__).resolve().parent.parent / "matrices" / "quick.yaml"


# The image models but ViT-B/16 are built in every framework, and their counts held to the
# reference, by each adapter's in-process driver (test_<framework>_adapter.py: one process per
# framework, not one per model); their reference counts are test_models.py's. `bench models` here
# builds the rest: the two transformers of full size, the GRU and the tiny GPT. (All eleven models,
# one process each, took 12 minutes of CI; docs/performance.md, "The test suite's time".)
PROBED = tuple(m for m in MODELS if m not in models.MODELS or m == "vit_b16")


def test_the_models_no_adapter_test_builds_have_the_same_parameters_in_every_framework(tmp_path):
    args = ["models", "--format", "json", "--image-size", "64"]
    result = import_record.bench(tmp_path, *args, *[f"--model={m}" for m in PROBED])
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert {(r["framework"], r["model"]) for r in rows} == {(f, m) for f in REAL for m in PROBED}
    for row in rows:
        limit = KNOWN_LIMITS.get((row["framework"], row["model"]))
        if limit:
            assert row["outcome"] == limit[0] and limit[1] in row["reason"], row
            continue
        assert row["outcome"] == "ok", row
        assert row["parameters"] == row["reference"], row
        if row["model"] in LANGUAGE:  # the next token at every position of a full context
            vocab, context = GPT[row["model"]][:2]
            assert row["output_shape"] == [2, context, vocab], row
        else:
            assert row["output_shape"] == [2, 1000], row
        if row["model"] in REFERENCE_1000:
            assert row["parameters"] == REFERENCE_1000[row["model"]]
    import_record.assert_no_framework(result)  # bench models' probes ran in every framework


def test_the_quick_matrix_has_a_row_for_every_framework(tmp_path):
    result = import_record.bench(tmp_path, "run", "--matrix", str(QUICK))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = (
        sqlite3.connect(tmp_path / "bench.db")
        .execute("SELECT framework, model, outcome, reason, final_val_accuracy FROM runs")
        .fetchall()
    )
    assert {r[0] for r in rows} == set(FRAMEWORKS)
    for framework, model, outcome, reason, accuracy in rows:
        if framework == "fault":
            assert outcome == "crash"
        else:
            assert outcome == "ok", (framework, model, reason)
            assert 0.0 <= accuracy <= 1.0
    import_record.assert_no_framework(result, "profiler.sampler")  # a run of every framework

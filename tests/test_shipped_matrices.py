"""The matrices shipped under matrices/ load and expand as their comments say."""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from orchestrator.config.matrix import load_matrix
from orchestrator.config.run_config import FRAMEWORKS, MODES

MATRICES = Path(__file__).resolve().parent.parent / "matrices"
REAL = [f for f in FRAMEWORKS if f != "fault"]


def test_every_matrix_file_is_tested():
    assert {p.stem for p in MATRICES.glob("*.yaml")} == {
        "quick",
        "full",
        "batch-sweep",
        "optimizers",
        "threads",
        "cifar-cnn",
        "inference",
        "googlenet-alexnet",
        "imdb-gru",
        "gaps",
        "modes",
        "modes-quick",
        "transformers",
        "transformers-sgd",
        "scaling",
    }


@pytest.mark.parametrize(
    "name",
    [
        "quick",
        "full",
        "batch-sweep",
        "optimizers",
        "threads",
        "inference",
        "googlenet-alexnet",
        "imdb-gru",
        "gaps",
        "modes",
        "modes-quick",
        "transformers",
        "transformers-sgd",
        "scaling",
    ],
)
def test_matrix_loads_with_every_framework(name):
    m = load_matrix(MATRICES / f"{name}.yaml")
    assert {c.framework for c in m.configs} >= set(REAL)
    assert m.configs[0].__class__.__name__ == "RunConfig"


def test_the_research_grids():
    full = load_matrix(MATRICES / "full.yaml").configs
    assert len(full) == 6 * 4 * 2 * 2
    assert {c.dataset_size for c in full} == {791, 6003} and {c.classes for c in full} == {3}
    sweep = load_matrix(MATRICES / "batch-sweep.yaml").configs
    assert sorted({c.batch_size for c in sweep}) == [2**i for i in range(10)]
    opt = load_matrix(MATRICES / "optimizers.yaml").configs
    assert {(c.optimizer, c.lr) for c in opt} == {
        (o, lr) for o in ("sgd", "adam", "rmsprop") for lr in (0.01, 0.001, 0.0001)
    }
    inference = load_matrix(MATRICES / "inference.yaml").configs
    assert {c.task for c in inference} == {"inference"} and len(inference) == 6 * 5 * 2 * 2
    assert {(c.model, c.features) for c in inference} >= {("resnet50", True), ("resnet50", None)}
    wall = load_matrix(MATRICES / "googlenet-alexnet.yaml").configs
    assert {c.model for c in wall} == {"googlenet", "alexnet"}
    assert [c.batch_size for c in wall[:10]] == sorted(c.batch_size for c in wall[:10])  # ascending
    gru = load_matrix(MATRICES / "imdb-gru.yaml").configs
    assert len(gru) == 6 * 2 and {(c.model, c.classes, c.batch_size, c.optimizer, c.lr) for c in gru} == {
        ("gru", 2, 64, "adam", 0.001)
    }
    quick = load_matrix(MATRICES / "quick.yaml").configs
    assert [c.framework for c in quick].count("fault") == 1


STUDIES = ["full", "batch-sweep", "optimizers", "threads", "inference", "googlenet-alexnet", "imdb-gru"]


@pytest.mark.parametrize("name", STUDIES)
def test_a_study_matrix_runs_each_configuration_often_enough_to_rank_it(name):
    """The exact test can never tell 3 runs from 3 apart; the planner said 5 on this machine."""
    assert {c.runs for c in load_matrix(MATRICES / f"{name}.yaml").configs} == {5}


def test_cifar_cnn_needs_and_uses_the_cifar_folder(tmp_path):
    (tmp_path / "matrices").mkdir()
    shutil.copy(MATRICES / "cifar-cnn.yaml", tmp_path / "matrices")
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for i in range(1, 6):
        with open(folder / f"data_batch_{i}", "wb") as f:
            pickle.dump({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0]}, f)
    configs = load_matrix(tmp_path / "matrices" / "cifar-cnn.yaml").configs
    assert {(c.epochs, c.batch_size, c.lr, c.momentum) for c in configs} == {(10, 64, 0.01, 0.9)}
    assert {c.data_dir for c in configs} == {str(folder)}
    assert {c.runs for c in configs} == {5}


def test_the_gaps_matrix_is_the_one_docs_fairness_md_measured():
    configs = load_matrix(MATRICES / "gaps.yaml").configs
    assert len(configs) == 12 and {c.model for c in configs} == {"resnet50", "vgg16"}
    assert {(c.image_size, c.batch_size, c.threads, c.train_size // c.batch_size) for c in configs} == {
        (224, 32, 2, 3)
    }


PRECISIONS = ("fp32", "bf16")


def test_the_modes_matrices_cross_every_framework_mode_and_precision():
    """matrices/modes.yaml: the studies' size, all cores, every framework × mode × {fp32, bf16}."""
    configs = load_matrix(MATRICES / "modes.yaml").configs
    assert len(configs) == 6 * 2 * 3 * 2
    assert {(c.framework, c.model, c.mode, c.precision or "fp32") for c in configs} == {
        (f, m, mode, p)
        for f in REAL
        for m in ("resnet50", "vgg16")
        for mode in MODES
        for p in ("fp32", "bf16")
    }
    assert {(c.image_size, c.batch_size, c.threads, c.dataset) for c in configs} == {
        (224, 32, len(os.sched_getaffinity(0)), "synthetic")  # threads: all
    }
    assert {c.task for c in configs} <= {None, "train"}
    quick = load_matrix(MATRICES / "modes-quick.yaml").configs
    assert {(c.framework, c.mode, c.precision or "fp32") for c in quick} == {
        (f, mode, p) for f in REAL for mode in MODES for p in PRECISIONS
    }
    assert {c.model for c in quick} == {"small_cnn"} and {c.image_size for c in quick} == {32}


def test_the_transformers_matrix():
    """ViT-B/16 beside ResNet50 and GPT-2 small, six frameworks, CPU and cuda, untraced and traced;
    the sequence length reaches only the language model."""
    configs = load_matrix(MATRICES / "transformers.yaml").configs
    assert len(configs) == 6 * 2 * 3 * 2
    assert {c.model for c in configs} == {"resnet50", "vit_b16", "gpt2_small"}
    assert {c.device for c in configs} == {"cpu", "cuda"} and {c.trace for c in configs} == {None, "kernels"}
    assert {c.sequence_length for c in configs if c.model == "gpt2_small"} == {256}
    assert {c.sequence_length for c in configs if c.model != "gpt2_small"} == {None}
    assert {(c.image_size, c.batch_size) for c in configs} == {(224, 32)}


def test_the_transformers_sgd_matrix_is_transformers_with_sgd():
    """The SGD variant (so that Singa, whose autograd optimizer is SGD alone, appears) differs from
    transformers.yaml in the optimizer: the same runs, in the same order; then the two attention
    models at batch 8 in Singa and PyTorch (Singa's run out of 24 GiB at batch 32), and Singa's traced."""
    adam = load_matrix(MATRICES / "transformers.yaml").configs
    sgd = load_matrix(MATRICES / "transformers-sgd.yaml").configs
    assert {(c.optimizer, c.lr, c.momentum) for c in adam} == {("adam", 0.0001, 0.9)}
    assert {(c.optimizer, c.lr, c.momentum) for c in sgd} == {("sgd", 0.01, 0.9)}
    unchanged = {"optimizer": "adam", "lr": 0.0001}
    assert [dataclasses.replace(c, **unchanged) for c in sgd[: len(adam)]] == list(adam)
    small = sgd[len(adam) :]
    untraced = [c for c in small if c.trace is None]
    assert {(c.framework, c.device, c.model) for c in untraced} == {
        (f, d, m) for f in ("singa", "pytorch") for d in ("cpu", "cuda") for m in ("vit_b16", "gpt2_small")
    }
    # and Singa's two traced at batch 8 on the CPU, for docs/kernels.md
    traced = {(c.framework, c.device, c.model) for c in small if c.trace == "kernels"}
    assert traced == {("singa", "cpu", "vit_b16"), ("singa", "cpu", "gpt2_small")}
    assert len(small) == len(untraced) + len(traced)
    assert {(c.batch_size, c.dataset_size) for c in small} == {(8, 40)}


def test_the_scaling_matrix_sets_two_replicas_beside_one():
    """Every framework at 1 and 2 replicas of the same per-replica batch; small_cnn traced too,
    where a two-replica run can run (Singa says why not once, on small_cnn)."""
    configs = load_matrix(MATRICES / "scaling.yaml").configs
    assert len(configs) == 32
    for framework in ("pytorch", "tensorflow", "mxnet", "paddle", "jax"):
        for model in ("small_cnn", "resnet50"):
            mine = [c for c in configs if (c.framework, c.model, c.trace) == (framework, model, None)]
            assert sorted(c.replica_count for c in mine) == [1, 2]
            assert {c.batch_size for c in mine} == {16} and {c.global_batch for c in mine} == {16, 32}
        traced = [c for c in configs if c.framework == framework and c.trace == "kernels"]
        assert sorted(c.replica_count for c in traced) == [1, 2]
    assert {(c.model, c.replica_count) for c in configs if c.framework == "singa"} == {
        ("small_cnn", 1),
        ("small_cnn", 2),
    }

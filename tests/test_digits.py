"""dataset: digits: the 1,797 real handwritten digits scikit-learn ships in its wheel, read without
importing scikit-learn and without a download; a copy in data_dir that is not what it claims is
refused in one line; a real framework learns them."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from orchestrator.errors import DatasetError
from orchestrator.provision import datafiles, datasets, digits


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))


def test_the_bundled_file_decodes_to_1797_images_of_ten_digits():
    path = digits.source(None)
    assert path.name == "digits.csv.gz" and "sklearn" in path.parts
    pixels, y, classes = digits.decode(path, datafiles.default_limits())
    assert pixels.shape == (1797, 8, 8, 3)
    x = datasets._resize(pixels, 16)
    assert x.shape == (1797, 3, 16, 16) and x.dtype == np.uint8
    assert y.shape == (1797,) and sorted(set(y.tolist())) == list(range(10)) and classes == digits.CLASSES
    assert x.max() == 255 and x.min() == 0  # 0–16 scaled to the full range
    assert (x[:, 0] == x[:, 1]).all() and (x[:, 1] == x[:, 2]).all()  # grey in every channel
    # Not noise: two images of one digit are closer, on average, than images of two digits.
    flat = x[:, 0].reshape(len(y), -1).astype(float)
    zeros, ones = flat[y == 0], flat[y == 1]
    within = np.abs(zeros[:50, None] - zeros[None, 50:100]).mean()
    between = np.abs(zeros[:50, None] - ones[None, :50]).mean()
    assert within < between


def test_without_scikit_learn_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(digits.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DatasetError) as found:
        digits.source(None)
    assert "pip install scikit-learn" in str(found.value) and "\n" not in str(found.value)


def write(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(exist_ok=True)
    with gzip.open(folder / "digits.csv.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    return folder


GOOD = ",".join(["0"] * 64 + ["3"])


@pytest.mark.parametrize(
    "bad, says",
    [
        (",".join(["0"] * 63 + ["3"]), "64 values, not 64 pixels and a label"),
        (",".join(["0"] * 63 + ["17", "3"]), "a pixel outside 0–16"),
        (",".join(["0"] * 64 + ["12"]), "label 12 is not a digit"),
        (",".join(["0"] * 63 + ["nan", "3"]), "not a whole number"),
        (",".join(["0"] * 63 + ["x\x1b[31m", "3"]), "not a number"),
    ],
)
def test_a_copy_in_data_dir_that_is_not_digits_is_one_line_naming_its_line(tmp_path, bad, says):
    folder = write(tmp_path / "d", [GOOD, bad])
    with pytest.raises(DatasetError) as found:
        digits.decode(digits.source(str(folder)), datafiles.default_limits())
    message = str(found.value)
    assert says in message and "line 2" in message and "\n" not in message and "\x1b" not in message


def test_a_file_that_inflates_past_the_limit_is_refused(tmp_path):
    folder = write(tmp_path / "d", [GOOD] * 2000)  # 260 kB inflated, a few kB compressed
    small = datafiles.Limits(max_bytes=100_000)
    with pytest.raises(DatasetError, match="decompresses to more than 100000 bytes"):
        digits.decode(digits.source(str(folder)), small)
    (folder / "digits.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DatasetError, match="not a gzip file"):
        digits.decode(digits.source(str(folder)), small)


def test_the_matrix_refuses_digits_with_other_than_ten_classes(write_matrix, cli):
    write_matrix("settings: {dataset: digits, classes: 3}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "m.yaml:1: classes: dataset digits has 10 classes" in result.output, result.output


def test_a_data_dir_without_the_file_is_one_line(tmp_path, write_matrix, cli, workdir):
    (workdir / "empty").mkdir()
    write_matrix("settings: {dataset: digits, data_dir: empty, dataset_size: 100}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "needs digits.csv.gz" in result.output and result.output.count("\n") == 1


def test_the_decoded_copy_is_made_once(tmp_path):
    from orchestrator.config.run_config import RunConfig

    config = RunConfig(framework="pytorch", dataset="digits", classes=10, image_size=8, dataset_size=100)
    first = datasets.prepare(config)
    assert first is not None and first.exists()
    stamp = first.stat().st_mtime_ns
    assert datasets.prepare(config) == first and first.stat().st_mtime_ns == stamp
    datasets.check_fits(config, first)


@pytest.mark.slow
@pytest.mark.framework
def test_pytorch_learns_the_real_digits(write_matrix, cli, workdir, pytorch_python):
    write_matrix("""
        settings: {framework: pytorch, model: small_cnn, dataset: digits, classes: 10, image_size: 16,
                   dataset_size: 1000, batch_size: 32, epochs: 2, optimizer: adam, lr: 0.003,
                   threads: 1, warmup_steps: 1, min_time: 0, min_steps: 1}
    """)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    ((outcome, accuracy),) = sqlite3.connect(workdir / "bench.db").execute(
        "SELECT outcome, final_val_accuracy FROM runs"
    )
    assert outcome == "ok" and accuracy > 0.7, accuracy  # chance is 0.1

"""image_folder and CIFAR datasets: decoded once into a cached array file, the same pixels in
every environment, and clear errors for folders that are not what they claim. All data is made
here; nothing is downloaded."""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchestrator.config.run_config import RunConfig
from orchestrator.provision import datasets
from workers import data

REPO = Path(__file__).resolve().parent.parent
COLOURS = {"fire": (220, 60, 20), "smoke": (120, 120, 120), "no_fire": (30, 140, 60)}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))


def make_folder(root: Path, per_class: int = 12) -> Path:
    """Three classes of photos-to-be: a class colour plus noise, mixed sizes, PNG and JPEG."""
    rng = np.random.RandomState(0)
    for name, colour in COLOURS.items():
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            size = (40 + i, 30 + 2 * i)
            pixels = np.clip(np.array(colour) + rng.randint(-40, 40, size[::-1] + (3,)), 0, 255)
            suffix = ".png" if i % 2 else ".jpg"
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"img{i}{suffix}")
    (root / "fire" / "notes.txt").write_text("not an image: ignored")
    return root


def make_cifar(root: Path, kind: str, per_file: int = 20, protocol: int = pickle.HIGHEST_PROTOCOL) -> Path:
    root.mkdir(parents=True)
    rng = np.random.RandomState(1)
    names, key = datasets.CIFAR_FILES[kind]
    classes = 10 if kind == "cifar10" else 100
    for name in names:
        batch = {
            b"data": rng.randint(0, 256, (per_file, 3072)).astype(np.uint8),
            key: list(rng.randint(0, classes, per_file)),
        }
        with open(root / name, "wb") as f:
            pickle.dump(batch, f, protocol=protocol)
    return root


def config(**kw) -> RunConfig:
    return RunConfig(**{"framework": "pytorch", "image_size": 16, "dataset_size": 30, "classes": 3, **kw})


def test_image_folder_is_decoded_once(tmp_path):
    root = make_folder(tmp_path / "photos")
    cfg = config(dataset="image_folder", data_dir=str(root))
    path = datasets.prepare(cfg)
    stamp = path.stat().st_mtime_ns
    with np.load(path) as f:
        assert f["x"].shape == (36, 3, 16, 16) and f["x"].dtype == np.uint8
        assert list(f["classes"]) == ["fire", "no_fire", "smoke"]
        assert np.bincount(f["y"]).tolist() == [12, 12, 12]
    assert datasets.prepare(cfg) == path and path.stat().st_mtime_ns == stamp
    # A changed folder is decoded again.
    Image.new("RGB", (20, 20)).save(root / "smoke" / "extra.png")
    assert datasets.prepare(cfg) != path


@pytest.mark.parametrize("kind,protocol", [("cifar10", 2), ("cifar10", 5), ("cifar100", 4)])
def test_cifar_batches(tmp_path, kind, protocol):
    """Real CIFAR-format files (numpy arrays, lists of numpy ints) load through the restricted unpickler,
    at protocol 2 (as Python 3 writes bytes there: _codecs.encode) and at 4 and 5 (_frombuffer)."""
    root = make_cifar(tmp_path / kind, kind, protocol=protocol)
    cfg = config(dataset=kind, data_dir=str(root), image_size=32, classes=10 if kind == "cifar10" else 100)
    with np.load(datasets.prepare(cfg)) as f:
        count = 100 if kind == "cifar10" else 20
        assert f["x"].shape == (count, 3, 32, 32)
        first = pickle.load(open(root / datasets.CIFAR_FILES[kind][0][0], "rb"), encoding="bytes")
        assert (f["x"][0].reshape(-1) == first[b"data"][0]).all()


def test_the_framework_environment_sees_the_same_pixels(tmp_path, pytorch_python):
    root = make_folder(tmp_path / "photos")
    cfg = config(dataset="image_folder", data_dir=str(root))
    spec = {**cfg.to_dict(), "data_file": str(datasets.prepare(cfg))}
    here = data.load(spec)
    digest = hashlib.sha256(b"".join(here[k].tobytes() for k in sorted(here))).hexdigest()
    code = (
        "import hashlib, json, sys\nfrom workers import data\nd = data.load(json.loads(sys.argv[1]))\n"
        "print(hashlib.sha256(b''.join(d[k].tobytes() for k in sorted(d))).hexdigest())\n"
    )
    there = subprocess.run(
        [str(pytorch_python), "-c", code, json.dumps(spec)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.strip()
    assert there == digest
    assert here["x_train"].shape == (24, 3, 16, 16) and here["x_val"].shape == (6, 3, 16, 16)
    assert here["x_train"].min() >= -1.0 and here["x_train"].max() <= 1.0


@pytest.mark.slow
@pytest.mark.framework
def test_pytorch_trains_on_an_image_folder_and_cifar(tmp_path, write_matrix, cli, workdir, pytorch_python):
    photos = make_folder(workdir / "photos")
    make_cifar(workdir / "cifar", "cifar10")
    write_matrix("""
        settings: {min_time: 0, min_steps: 1,
                   framework: pytorch, model: small_cnn, image_size: 32, batch_size: 6, epochs: 2,
                   warmup_steps: 1}
        include:
          - {dataset: image_folder, data_dir: photos, classes: 3, dataset_size: 36}
          - {dataset: cifar10, data_dir: cifar, classes: 10, dataset_size: 100}
    """)
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 0, result.output
    rows = (
        sqlite3.connect(workdir / "bench.db")
        .execute("SELECT outcome, dataset, data_dir, final_val_accuracy FROM runs ORDER BY id")
        .fetchall()
    )
    assert [r[0] for r in rows] == ["ok", "ok"], rows
    assert rows[0][2] == str(photos)  # relative to the matrix file, stored absolute
    assert rows[0][3] > 0.5  # three colours are easy: chance is 1/3


def test_data_errors_are_one_line_before_anything_runs(tmp_path, write_matrix, cli, workdir):
    write_matrix("settings: {dataset: image_folder, data_dir: nowhere}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "m.yaml:1: data_dir: no such folder" in result.output
    write_matrix("settings: {dataset: cifar10}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "m.yaml:1: dataset: dataset cifar10 needs data_dir" in result.output
    (workdir / "flat").mkdir()
    Image.new("RGB", (8, 8)).save(workdir / "flat" / "a.png")
    write_matrix("settings: {dataset: image_folder, data_dir: flat}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "one subfolder per class" in result.output
    make_folder(workdir / "photos", per_class=4)
    write_matrix("settings: {dataset: image_folder, data_dir: photos, classes: 3, dataset_size: 100}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "dataset_size 100 is more than the 12 images" in result.output
    write_matrix("settings: {dataset: image_folder, data_dir: photos, dataset_size: 12, batch_size: 4}\n")
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1 and "classes is 10, but" in result.output
    assert not (workdir / "bench.db").exists()


class RunsCode:
    """A pickle that, loaded with pickle.load, would write a marker file (os.system)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused(tmp_path, write_matrix, cli, workdir):
    marker = tmp_path / "ran"
    # The pickle is real: plain pickle.load runs it (the marker appears), so refusing it means something.
    probe = tmp_path / "probe.pickle"
    probe.write_bytes(pickle.dumps(RunsCode(tmp_path / "probe-ran")))
    pickle.load(open(probe, "rb"))
    assert (tmp_path / "probe-ran").exists()
    root = make_cifar(workdir / "cifar", "cifar10")
    hostile = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1], b"x": RunsCode(marker)}
    (root / "data_batch_3").write_bytes(pickle.dumps(hostile, protocol=2))
    write_matrix(
        "settings: {dataset: cifar10, data_dir: cifar, classes: 10, dataset_size: 20, batch_size: 4}"
    )
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line
    assert str(root / "data_batch_3") in line and "refused to load posix.system" in line
    assert not marker.exists()
    assert not (workdir / "bench.db").exists()


@pytest.mark.parametrize(
    "payload",
    [
        b"cbuiltins\neval\n(V1\ntR.",  # builtins.eval, written by hand
        pickle.dumps({b"data": __import__("collections").OrderedDict()}),  # harmless, but not a CIFAR type
    ],
)
def test_only_the_types_cifar_files_hold_are_admitted(tmp_path, payload):
    path = tmp_path / "f"
    path.write_bytes(payload)
    with pytest.raises(datasets.DatasetError, match="refused to load"):
        datasets.load_data_pickle(path)


def make_imdb(root: Path, train: int = 30, test: int = 10, extra: object = None) -> Path:
    """A small imdb.npz in Keras's layout: object arrays of reviews (lists of word ranks from 1)."""
    rng = np.random.RandomState(0)

    def reviews(n: int) -> np.ndarray:
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = [int(w) for w in rng.randint(1, 40000, rng.randint(3, 300))]
        return out

    x_train = reviews(train)
    if extra is not None:
        x_train[0] = extra
    root.mkdir(parents=True, exist_ok=True)
    np.savez(
        root / "imdb.npz",
        x_train=x_train,
        y_train=rng.randint(0, 2, train),
        x_test=reviews(test),
        y_test=rng.randint(0, 2, test),
    )
    return root


def test_imdb_is_read_as_keras_reads_it(tmp_path):
    root = make_imdb(tmp_path / "imdb")
    path = datasets.prepare(
        config(model="gru", dataset="imdb", data_dir=str(root), classes=2, dataset_size=40)
    )
    assert path is not None
    with np.load(root / "imdb.npz", allow_pickle=True) as raw, np.load(path) as cached:
        x, y = cached["x"], cached["y"]
        assert (
            x.shape == (40, 150)
            and x.dtype == np.int32
            and list(cached["classes"]) == ["negative", "positive"]
        )
        assert list(y) == list(raw["y_train"]) + list(raw["y_test"])
        for i, review in enumerate(list(raw["x_train"]) + list(raw["x_test"])):
            # Keras: a start token, ranks + 3, ranks past the vocabulary as 2, padded/truncated in front
            ids = [1] + [w + 3 if w + 3 < 30000 else 2 for w in review]
            ids = ids[-150:]
            assert list(x[i]) == [0] * (150 - len(ids)) + ids
    arrays = data.from_file({"data_file": str(path), "dataset_size": 40, "val_fraction": 0.25, "seed": 0})
    assert arrays["x_train"].shape == (30, 150) and arrays["x_train"].dtype == np.int64
    assert arrays["x_val"].shape == (10, 150)


def test_an_imdb_archive_that_would_run_code_is_refused(tmp_path, write_matrix, cli, workdir):
    marker = tmp_path / "ran"
    make_imdb(workdir / "imdb", extra=RunsCode(marker))
    write_matrix(
        "settings: {model: gru, dataset: imdb, data_dir: imdb, classes: 2, dataset_size: 20, batch_size: 4}"
    )
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "imdb.npz" in line and "refused to load posix.system" in line
    assert not marker.exists()
    assert not (workdir / "bench.db").exists()


def test_imdb_and_model_kinds_must_match(tmp_path, write_matrix, cli, workdir):
    make_imdb(workdir / "imdb")
    cases = {
        "settings: {model: resnet50, dataset: imdb, data_dir: imdb, classes: 2}": (
            "m.yaml:1: dataset: dataset imdb holds token sequences, but model resnet50 reads images"
        ),
        "settings: {model: gru, dataset: imdb, data_dir: imdb}": (
            "m.yaml:1: dataset: dataset imdb has 2 classes (negative, positive), not 10"
        ),
        "settings: {model: gru, dataset: cifar10, data_dir: imdb}": (
            "m.yaml:1: dataset: dataset cifar10 holds images, but model gru reads token sequences"
        ),
        "settings: {model: gru, dataset: imdb, data_dir: nowhere, classes: 2}": (
            "m.yaml:1: data_dir: no such folder"
        ),
        "settings: {model: gru, dataset: imdb, data_dir: ., classes: 2}": "dataset imdb needs imdb.npz",
    }
    for text, message in cases.items():
        write_matrix(text + "\n")
        result = cli("run", "--matrix", "m.yaml")
        assert result.exit_code == 1 and message in result.output, (text, result.output)
    assert not (workdir / "bench.db").exists()


def test_synthetic_tokens_are_deterministic_and_carry_their_class():
    cfg = {"model": "gru", "dataset_size": 400, "val_fraction": 0.25, "classes": 2, "seed": 3}
    one, two = data.load(cfg), data.load(cfg)
    assert all(np.array_equal(one[k], two[k]) for k in one)
    x, y = one["x_train"], one["y_train"]
    assert x.shape == (300, 150) and x.dtype == np.int64 and x.min() >= 0 and x.max() < 30000
    assert sorted(set(y.tolist())) == [0, 1]
    starts = (x == 1).argmax(axis=1)  # the start token follows the padding, as Keras pads
    assert all((row[:s] == 0).all() and s <= 75 for row, s in zip(x, starts, strict=True))
    # No single token decides the class, but the class's marker words are over-represented:
    # a word's count in class 0 against class 1 separates most sequences.
    counts = [np.bincount(x[y == c].ravel(), minlength=30000) for c in (0, 1)]
    for count in counts:
        count[:3] = 0  # padding, start and out-of-vocabulary are not words
    markers = [np.argsort(counts[c] - counts[1 - c])[-20:] for c in (0, 1)]
    score = np.isin(x, markers[0]).sum(1) - np.isin(x, markers[1]).sum(1)
    assert ((score > 0) == (y == 0)).mean() > 0.9

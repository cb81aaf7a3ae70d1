"""Real datasets, decoded and resized once into a cached array file that every framework reads.

Decoding happens here, in the orchestrator, before any run starts: it is never timed, and every
framework trains on exactly the same pixels. The cache file is an ``.npz`` holding ``x`` (N, 3, H, W)
uint8 (IMDB: (N, SEQ_LEN) int32 token ids), ``y`` (N,) int64 and ``classes``; its name is a hash of
the source (paths, sizes, mtimes), the kind and the image size, so a changed folder is decoded
again and an unchanged one never is.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from pathlib import Path
from typing import cast

import numpy as np

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import DatasetError
from orchestrator.provision import datafiles, digits
from orchestrator.provision.datafiles import images, npz, pickles

log = logging.getLogger(__name__)

__all__ = ["DatasetError", "prepare", "prepare_all", "check_fits", "load_data_pickle", "cache_dir"]

IMAGE_SUFFIXES = images.SUFFIXES
CIFAR_FILES = {
    "cifar10": ([f"data_batch_{i}" for i in range(1, 6)], b"labels"),
    "cifar100": (["train"], b"fine_labels"),
}
CIFAR_PIXELS = 3 * 32 * 32


def limits() -> datafiles.Limits:
    """The limits every reader works within (docs/datasets.md, "Data folders are untrusted input")."""
    return datafiles.default_limits()


def load_data_pickle(path: Path) -> object:
    """The value in a python-pickle data file: dicts, lists, tuples, bytes, str, numbers and numeric
    numpy arrays, and nothing else (orchestrator/provision/datafiles/pickles.py); DatasetError otherwise."""
    return pickles.load(path, limits(), "not a plain-data python pickle")


def cache_dir() -> Path:
    if os.environ.get("BENCH_DATA_CACHE"):
        return Path(os.environ["BENCH_DATA_CACHE"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / "datasets"


def _sources(config: RunConfig) -> list[Path]:
    if config.dataset == "digits":
        return [digits.source(config.data_dir)]
    root = Path(config.data_dir or "")
    if not root.is_dir():
        raise DatasetError(f"data_dir {root}: no such folder")
    if config.dataset == "image_folder":
        return [f for _, f in images.list_images(root, limits())]
    if config.dataset == "imdb":
        if not (root / IMDB_FILE).is_file():
            raise DatasetError(
                f"{root}: dataset imdb needs {IMDB_FILE} (x_train, y_train, x_test, y_test, as Keras "
                "distributes it); it is not there"
            )
        return [root / IMDB_FILE]
    names, _ = CIFAR_FILES[config.dataset]
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise DatasetError(
            f"{root}: {config.dataset} needs the python-pickle batch files {', '.join(names)}; "
            f"missing {', '.join(missing)}"
        )
    return [root / n for n in names]


def _key(config: RunConfig, sources: list[Path]) -> str:
    size = 0 if config.dataset == "imdb" else config.image_size  # sequences have no image size
    h = hashlib.sha256(f"{config.dataset}|{size}|{config.data_dir}".encode())
    for path in sources:
        st = path.stat()
        h.update(f"|{path}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _resize(pixels: np.ndarray, size: int) -> np.ndarray:
    """(N, H, W, 3) uint8 → (N, 3, size, size) uint8, bilinear, the same for every dataset."""
    from PIL import Image

    out = np.empty((len(pixels), 3, size, size), dtype=np.uint8)
    for i, im in enumerate(pixels):
        if im.shape[:2] != (size, size):
            im = np.asarray(Image.fromarray(im).resize((size, size), Image.Resampling.BILINEAR))
        out[i] = im.transpose(2, 0, 1)
    return out


def _decode_folder(root: Path, size: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    files = images.list_images(root, limits())
    classes = sorted({c for c, _ in files})
    x = images.decode_all(root, [f for _, f in files], size, limits())
    y = np.array([classes.index(c) for c, _ in files], dtype=np.int64)
    return x, y, classes


def _cifar_batch(path: Path, kind: str, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(data (N, 3072) uint8, labels (N,) int64) of one batch, as CIFAR's python batches hold them:
    a dict with b'data' a uint8 (N, 3072) array and a list of N labels below `count`."""
    _, label_key = CIFAR_FILES[kind]
    what = f"not a {kind} python-pickle batch"
    batch = pickles.load(path, limits(), what)
    if type(batch) is not dict or b"data" not in batch or label_key not in batch:
        raise DatasetError(f"{path}: {what}: no dict with {b'data'!r} and {label_key!r}")
    data, labels = batch[b"data"], batch[label_key]
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2):
        raise DatasetError(f"{path}: {what}: {b'data'!r} is not a uint8 (N, {CIFAR_PIXELS}) array")
    if data.shape[1] != CIFAR_PIXELS:
        raise DatasetError(f"{path}: {what}: {b'data'!r} is not a uint8 (N, {CIFAR_PIXELS}) array")
    if type(labels) is not list or not all(isinstance(v, (int, np.integer)) for v in labels):
        raise DatasetError(f"{path}: {what}: {label_key!r} is not a list of integers")
    y = np.array([int(v) for v in labels], dtype=np.int64)
    if len(y) != len(data) or (len(y) and (y.min() < 0 or y.max() >= count)):
        raise DatasetError(f"{path}: {what}: {label_key!r} is not {len(data)} labels from 0 to {count - 1}")
    return data, y


def _decode_cifar(config: RunConfig, sources: list[Path]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    count = 10 if config.dataset == "cifar10" else 100
    batches = [_cifar_batch(path, config.dataset, count) for path in sources]
    total = sum(len(y) for _, y in batches)
    size = config.image_size
    datafiles.check_size(
        config.data_dir or "", total * 3 * size * size, limits(), f"{total:,} decoded images"
    )
    pixels = np.concatenate([data for data, _ in batches]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    x = _resize(pixels, size)
    y = np.concatenate([y for _, y in batches])
    return x, y, [str(i) for i in range(count)]


IMDB_FILE = "imdb.npz"
IMDB_PARTS = ("x_train", "y_train", "x_test", "y_test")


def _word_ranks(value: object, name: str) -> list[int]:
    if type(value) is list and all(isinstance(w, (int, np.integer)) for w in value):
        ranks = [int(w) for w in value]
    elif isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
        ranks = value.tolist()
    else:
        raise ValueError(
            f"{name} holds a {type(value).__name__} where a review (a list of word ranks) belongs"
        )
    if any(w < 0 for w in ranks):
        raise ValueError(f"{name} holds a negative word rank")
    return ranks


def _decode_imdb(config: RunConfig, sources: list[Path]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Keras's imdb.load_data(num_words=VOCAB) then pad_sequences(maxlen=SEQ_LEN): a start token,
    word ranks moved up by 3 (0 pads, 1 starts, 2 is a word outside the vocabulary), ranks at or
    past the vocabulary replaced by 2, padded and truncated at the front to SEQ_LEN. Train and test
    parts are pooled; each run draws its own seeded train/validation split from them."""
    from workers import models

    path = sources[0]
    kinds = {"x_train": "object", "y_train": "int", "x_test": "object", "y_test": "int"}
    members = npz.read_members(path, limits(), kinds)
    xs, ys = [], []
    try:
        for part in ("train", "test"):
            reviews = cast(list, members[f"x_{part}"])  # what read_members makes of each kind
            labels = cast(np.ndarray, members[f"y_{part}"])
            if len(reviews) != len(labels):
                raise ValueError(f"x_{part} has {len(reviews)} reviews but y_{part} {len(labels)} labels")
            labels = labels.astype(np.int64)
            if labels.size and (labels.min() < 0 or labels.max() > 1):
                raise ValueError(f"y_{part} holds labels other than 0 and 1")
            x = np.zeros((len(reviews), models.SEQ_LEN), dtype=np.int32)
            for i, review in enumerate(reviews):
                ids = [models.START] + [w + models.OOV + 1 for w in _word_ranks(review, f"x_{part}")]
                ids = [w if w < models.VOCAB else models.OOV for w in ids][-models.SEQ_LEN :]
                x[i, models.SEQ_LEN - len(ids) :] = ids
            xs.append(x)
            ys.append(labels)
    except ValueError as exc:
        parts = ", ".join(IMDB_PARTS)
        raise DatasetError(f"{path}: not an IMDB word-rank archive ({parts}): {exc}") from None
    return np.concatenate(xs), np.concatenate(ys), ["negative", "positive"]


def prepare(config: RunConfig) -> Path | None:
    """The cached array file for this configuration's dataset (made if needed); None for synthetic."""
    if config.dataset == "synthetic":
        return None
    sources = _sources(config)
    size = "" if config.dataset == "imdb" else f"{config.image_size}px-"
    path = cache_dir() / f"{config.dataset}-{size}{_key(config, sources)}.npz"
    if path.exists():
        return path
    log.info("decoding %s from %s into %s", config.dataset, config.data_dir or sources[0], path)
    if config.dataset == "imdb":
        x, y, classes = _decode_imdb(config, sources)
    elif config.dataset == "image_folder":
        x, y, classes = _decode_folder(Path(config.data_dir or ""), config.image_size)
    elif config.dataset == "digits":
        pixels, y, classes = digits.decode(sources[0], limits())
        x = _resize(pixels, config.image_size)
    else:
        x, y, classes = _decode_cifar(config, sources)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(
        f"{path.name}.{os.getpid()}.tmp.npz"
    )  # two sweeps decoding at once each write their own
    np.savez(tmp, x=x, y=y, classes=np.array(classes))
    tmp.rename(path)  # whole or absent: a sweep killed mid-write leaves no half file behind
    return path


def check_fits(config: RunConfig, path: Path) -> None:
    """The configuration asks for no more images or classes than the file holds, and the file is
    whole: what the worker will read (x's header, y, classes) is what bench wrote."""
    origin = config.data_dir or config.dataset  # digits may come from scikit-learn's own copy
    damaged = f"{path}: bench's decoded copy of {origin} is damaged"
    damaged += "; delete it and bench decodes the data again"
    try:
        with np.load(path) as data:  # bench's own file, read without pickles all the same
            y, names = data["y"], data["classes"]
            with data.zip.open("x.npy") as fp:
                descr, _, shape, _ = npz.read_header(fp, "x.npy")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, npz.Malformed) as exc:
        raise DatasetError(f"{damaged} ({exc})") from None
    available, classes = len(y), len(names)
    expected = ("<i4", 2) if config.dataset == "imdb" else ("|u1", 4)
    if (descr, len(shape)) != expected or shape[0] != available or y.ndim != 1 or y.dtype != np.int64:
        raise DatasetError(damaged)
    if available and (y.min() < 0 or y.max() >= classes):
        raise DatasetError(damaged)
    if config.dataset_size > available:
        raise DatasetError(
            f"dataset_size {config.dataset_size} is more than the {available} images in {origin}"
        )
    if config.classes != classes:
        raise DatasetError(f"classes is {config.classes}, but {origin} has {classes} classes")


def prepare_all(configs: list[RunConfig]) -> dict[str, Path]:
    """Decode every dataset the configurations need, before anything runs: config hash → file."""
    files: dict[str, Path] = {}
    done: dict[tuple[str, str | None, int], Path | None] = {}
    for config in configs:
        key = (config.dataset, config.data_dir, config.image_size)
        if key not in done:
            done[key] = prepare(config)
        path = done[key]
        if path is not None and config.framework != "fault":
            check_fits(config, path)
            files[config.config_hash] = path
    return files

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
import pickle
from pathlib import Path

import numpy as np

from orchestrator.config import RunConfig
from orchestrator.errors import BenchError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")
CIFAR_FILES = {
    "cifar10": ([f"data_batch_{i}" for i in range(1, 6)], b"labels"),
    "cifar100": (["train"], b"fine_labels"),
}


# What the CIFAR python batches hold, and nothing more: numpy arrays (and numpy scalars in label
# lists), rebuilt by these reconstructors, whichever numpy (1.x: numpy.core, 2.x: numpy._core) or
# Python (2's cPickle, 3's protocols 2 to 5) wrote them. Dicts, lists, bytes and str need no global.
# Every other global (os.system, builtins.eval, subprocess.Popen, ...) is refused before it is
# looked up, so a hostile data folder cannot run code through a __reduce__.
CORES = ("core", "_core")
SAFE_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how Python 3 writes bytes at protocol 2
    *((f"numpy.{core}.multiarray", name) for core in CORES for name in ("_reconstruct", "scalar")),
    *((f"numpy.{core}.numeric", "_frombuffer") for core in CORES),
}


class DatasetError(BenchError):
    """A dataset folder is missing, empty or not in the expected format."""


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}: a data file holds only arrays")
        # numpy 2 reads numpy 1's pickles through its numpy.core shim; go to the module itself
        return super().find_class(module.replace("numpy.core.", "numpy._core."), name)


def load_data_pickle(path: Path) -> object:
    """The object in a python-pickle data file, admitting only dicts, lists, bytes/str and numpy arrays."""
    with open(path, "rb") as f:
        return _DataUnpickler(f, encoding="bytes").load()


def cache_dir() -> Path:
    if os.environ.get("BENCH_DATA_CACHE"):
        return Path(os.environ["BENCH_DATA_CACHE"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "bench" / "datasets"


def _image_files(root: Path) -> list[tuple[str, Path]]:
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    files = [
        (c.name, f)
        for c in classes
        for f in sorted(c.rglob("*"))
        if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES
    ]
    if len(classes) < 2 or not files:
        raise DatasetError(
            f"{root}: an image_folder needs one subfolder per class (at least 2) holding images "
            f"({', '.join(IMAGE_SUFFIXES)}); found {len(classes)} subfolders, {len(files)} images"
        )
    return files


def _sources(config: RunConfig) -> list[Path]:
    root = Path(config.data_dir or "")
    if not root.is_dir():
        raise DatasetError(f"data_dir {root}: no such folder")
    if config.dataset == "image_folder":
        return [f for _, f in _image_files(root)]
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


def _resize(images: np.ndarray, size: int) -> np.ndarray:
    """(N, H, W, 3) uint8 → (N, 3, size, size) uint8, bilinear, the same for every dataset."""
    from PIL import Image

    if images.shape[1:3] != (size, size):
        images = np.stack(
            [np.asarray(Image.fromarray(im).resize((size, size), Image.Resampling.BILINEAR)) for im in images]
        )
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2))


def _decode_folder(root: Path, size: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    from PIL import Image, UnidentifiedImageError

    files = _image_files(root)
    classes = sorted({c for c, _ in files})
    xs = []
    for _, path in files:
        try:
            with Image.open(path) as im:
                xs.append(np.asarray(im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)))
        except (OSError, UnidentifiedImageError) as exc:
            raise DatasetError(f"{path}: cannot decode the image: {exc}") from None
    x = np.ascontiguousarray(np.stack(xs).transpose(0, 3, 1, 2))
    y = np.array([classes.index(c) for c, _ in files], dtype=np.int64)
    return x, y, classes


def _decode_cifar(config: RunConfig, sources: list[Path]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    _, label_key = CIFAR_FILES[config.dataset]
    xs, ys = [], []
    for path in sources:
        try:
            batch = load_data_pickle(path)
            if not isinstance(batch, dict):
                raise ValueError(f"holds a {type(batch).__name__}, not a dict")
            data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
            labels = np.asarray(batch[label_key], dtype=np.int64)
        except (OSError, pickle.UnpicklingError, KeyError, ValueError, TypeError, EOFError) as exc:
            raise DatasetError(f"{path}: not a {config.dataset} python-pickle batch: {exc!r}") from None
        xs.append(data)
        ys.append(labels)
    x = _resize(np.concatenate(xs).transpose(0, 2, 3, 1), config.image_size)
    y = np.concatenate(ys)
    count = 10 if config.dataset == "cifar10" else 100
    return x, y, [str(i) for i in range(count)]


IMDB_FILE = "imdb.npz"
IMDB_PARTS = ("x_train", "y_train", "x_test", "y_test")


def _npz_member(path: Path, name: str) -> np.ndarray:
    """One array of an .npz, without numpy's unrestricted unpickling: a plain array is read with
    allow_pickle=False; an object array (Keras's IMDB stores its reviews as lists of word ranks)
    goes through the data unpickler, which admits arrays and lists and nothing that runs code."""
    import zipfile

    with zipfile.ZipFile(path) as archive, archive.open(f"{name}.npy") as fp:
        version = np.lib.format.read_magic(fp)
        fmt = np.lib.format
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        _, _, dtype = read_header(fp)
        if not dtype.hasobject:
            with np.load(path, allow_pickle=False) as data:
                return np.asarray(data[name])
        value = _DataUnpickler(fp, encoding="latin1").load()
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{name} holds a {type(value).__name__}, not an array")
    return value


def _word_ranks(value: object, name: str) -> list[int]:
    if not isinstance(value, (list, tuple, np.ndarray)):
        kind = type(value).__name__
        raise ValueError(f"{name} holds a {kind} where a review (a list of word ranks) belongs")
    ranks = [int(w) for w in value]
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
    xs, ys = [], []
    try:
        for part in ("train", "test"):
            reviews, labels = _npz_member(path, f"x_{part}"), _npz_member(path, f"y_{part}")
            if len(reviews) != len(labels):
                raise ValueError(f"x_{part} has {len(reviews)} reviews but y_{part} {len(labels)} labels")
            labels = np.asarray(labels).astype(np.int64)
            if labels.size and (labels.min() < 0 or labels.max() > 1):
                raise ValueError(f"y_{part} holds labels other than 0 and 1")
            x = np.zeros((len(reviews), models.SEQ_LEN), dtype=np.int32)
            for i, review in enumerate(reviews):
                ids = [models.START] + [w + models.OOV + 1 for w in _word_ranks(review, f"x_{part}")]
                ids = [w if w < models.VOCAB else models.OOV for w in ids][-models.SEQ_LEN :]
                x[i, models.SEQ_LEN - len(ids) :] = ids
            xs.append(x)
            ys.append(labels)
    except (OSError, KeyError, ValueError, TypeError, EOFError, pickle.UnpicklingError) as exc:
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
    log.info("decoding %s from %s into %s", config.dataset, config.data_dir, path)
    if config.dataset == "imdb":
        x, y, classes = _decode_imdb(config, sources)
    elif config.dataset == "image_folder":
        x, y, classes = _decode_folder(Path(config.data_dir or ""), config.image_size)
    else:
        x, y, classes = _decode_cifar(config, sources)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, x=x, y=y, classes=np.array(classes))
    tmp.rename(path)  # whole or absent: a sweep killed mid-write leaves no half file behind
    return path


def check_fits(config: RunConfig, path: Path) -> None:
    """The configuration asks for no more images or classes than the file holds."""
    with np.load(path) as data:
        available, classes = len(data["y"]), len(data["classes"])
    if config.dataset_size > available:
        raise DatasetError(
            f"dataset_size {config.dataset_size} is more than the {available} images in {config.data_dir}"
        )
    if config.classes != classes:
        raise DatasetError(f"classes is {config.classes}, but {config.data_dir} has {classes} classes")


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

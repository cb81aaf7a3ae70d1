"""The digits data set: 1,797 real 8 × 8 grey images of handwritten digits (0–9), the copy of the
UCI "Optical Recognition of Handwritten Digits" test set that scikit-learn ships inside its wheel
(`sklearn/datasets/data/digits.csv.gz`). Real images that need no download at run time: what the
tests and a study's CPU scale use where a claim is about learning (accuracy per epoch), not speed.

The file is found without importing scikit-learn (its import pulls SciPy; only the file is needed),
or read from `data_dir` where a user keeps a copy. Each line is 64 pixel values 0–16 and the label;
the file is outside input, read within the data limits and refused in one line where a line is not
that. Pixels are scaled to 0–255, grey in all three channels.
"""

from __future__ import annotations

import importlib.util
import io
import zlib
from pathlib import Path

import numpy as np

from orchestrator.errors import DatasetError
from orchestrator.provision.datafiles import Limits, read_whole

FILE = "digits.csv.gz"
PIXELS = 64  # 8 × 8
CLASSES = [str(d) for d in range(10)]
INSTALL = (
    "dataset digits reads the copy scikit-learn ships (sklearn/datasets/data/digits.csv.gz): install "
    "scikit-learn into bench's environment (.venv/bin/pip install scikit-learn), or set data_dir to a "
    f"folder holding {FILE}"
)


def source(data_dir: str | None) -> Path:
    """The file to read: `data_dir`'s copy, else the installed scikit-learn's."""
    if data_dir is not None:
        path = Path(data_dir) / FILE
        if not path.is_file():
            raise DatasetError(
                f"{data_dir}: dataset digits needs {FILE} (scikit-learn's format); it is not there"
            )
        return path
    try:
        spec = importlib.util.find_spec("sklearn")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "datasets" / "data" / FILE
        if path.is_file():
            return path
    raise DatasetError(INSTALL)


def decode(path: Path, limits: Limits) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(x (N, 8, 8, 3) uint8, y (N,) int64, the class names) from the file; datasets.py resizes
    them as it resizes every image dataset."""
    raw = read_whole(path, limits)
    try:
        # At most max_bytes decompressed: a small file that inflates without end is refused.
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflater.decompress(raw, limits.max_bytes)
        if inflater.unconsumed_tail:
            raise DatasetError(f"{path}: decompresses to more than {limits.max_bytes} bytes")
    except zlib.error as exc:
        raise DatasetError(f"{path}: not a gzip file ({exc})") from None
    pixels, labels = [], []
    for number, line in enumerate(io.StringIO(text.decode("ascii", errors="replace")), start=1):
        if not line.strip():
            continue
        values = _row(line, path, number)
        pixels.append(values[:PIXELS])
        labels.append(values[PIXELS])
    if not labels:
        raise DatasetError(f"{path}: no digits in the file")
    grey = np.array(pixels, dtype=np.float64).reshape(-1, 8, 8)
    scaled = np.rint(grey * (255 / 16)).astype(np.uint8)
    rgb = np.repeat(scaled[..., None], 3, axis=3)  # (N, 8, 8, 3): grey in every channel
    return rgb, np.array(labels, dtype=np.int64), CLASSES


def _row(line: str, path: Path, number: int) -> list[int]:
    fields = line.strip().split(",")
    where = f"{path}, line {number}"
    if len(fields) != PIXELS + 1:
        raise DatasetError(f"{where}: {len(fields)} values, not {PIXELS} pixels and a label")
    try:
        numbers = [float(f) for f in fields]
    except ValueError:
        raise DatasetError(f"{where}: a value that is not a number") from None
    if not all(n.is_integer() for n in numbers):  # NaN and infinities are not whole either
        raise DatasetError(f"{where}: a value that is not a whole number")
    values = [int(n) for n in numbers]
    if any(not 0 <= v <= 16 for v in values[:PIXELS]):
        raise DatasetError(f"{where}: a pixel outside 0–16")
    if not 0 <= values[PIXELS] <= 9:
        raise DatasetError(f"{where}: label {values[PIXELS]} is not a digit 0–9")
    return values

"""Readers of data files bench did not write: CIFAR's pickles, Keras's imdb.npz, image folders.

Every file here is treated as hostile. A reader accepts only what its format allows, checks every
size a file declares against the file itself and against `Limits` before allocating, and turns
every failure into a `DatasetError` naming the file: never another exception, never a crash, never
a hang, never more memory than the limits allow. Nothing here runs code a file names: the pickle
reader walks the opcodes itself and builds only plain containers and numeric numpy arrays.

    pickles.py         CIFAR's pickles, read by walking the opcodes (no code a file names is run)
    pickled_numpy.py   the few numpy reconstructors a data pickle may name, checked before built
    npz.py             `.npz` archives (Keras's imdb.npz): the zip and each `.npy` member's sizes checked
    images.py          image folders, decoded with Pillow after the pixel count is checked

May import numpy, Pillow (lazily, in `images`) and `orchestrator.errors`; nothing else of bench's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import DatasetError

GIB = 1 << 30


def _default_max_bytes() -> int:
    """8 GiB, or half the machine's memory where that is less: a decoded dataset sits in memory
    twice at most (decoded, then written), and bench must leave room for the framework."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        physical = 16 * GIB
    return min(8 * GIB, max(physical // 2, GIB))


@dataclass(frozen=True)
class Limits:
    """The most a dataset may ask of bench, whatever its files declare."""

    # Any one source file, any decoded dataset, and the objects a pickle may build: each at most this.
    max_bytes: int
    # Width x height of one image before it is decoded: 64 megapixels (8000 x 8000) holds any
    # camera photo, and stays under Pillow's own bomb warning (89.5 megapixels).
    max_image_pixels: int = 64_000_000
    # Entries (files and folders) looked at under one image_folder: a folder of a million
    # files is answered with an error in seconds instead of being listed for minutes.
    max_folder_entries: int = 1_000_000
    # Containers inside containers in a pickle: CIFAR's go 3 deep (dict, list, bytes), IMDB's 4.
    max_depth: int = 16


def default_limits() -> Limits:
    return Limits(max_bytes=_default_max_bytes())


def read_whole(path: Path, limits: Limits) -> bytes:
    """The bytes of a regular file no larger than `limits.max_bytes` (a file that grows while it is
    read is refused, rather than read without end)."""
    if not os.path.isfile(path):  # before open: opening a FIFO would wait for a writer
        raise DatasetError(f"{path}: not a regular file")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            check_size(path, size, limits, "the file")
            data = f.read(size + 1)  # read(n) allocates n bytes first: n is the checked size
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > size:
        raise DatasetError(f"{path}: the file grew while it was read")
    return data


def check_size(path: Path | str, size: int, limits: Limits, what: str) -> None:
    """A size a file declares (or has) against the limit, before anything that large is allocated."""
    if size > limits.max_bytes:
        raise DatasetError(f"{path}: {too_big(size, limits, what)}")


def too_big(size: int, limits: Limits, what: str) -> str:
    limit = f"{limits.max_bytes:,}"
    return f"{what} would take {size:,} bytes, more than bench's limit of {limit} bytes for a dataset"

"""An image folder, listed and decoded without trusting it.

The listing enters class folders that are links, but below them does not follow links to folders
(as `Path.rglob` does not): no link loop can make it endless, and it stops with an error past
`Limits.max_folder_entries` entries. Each image is opened by the five format plugins bench accepts
and no others (Pillow would otherwise try every format it knows, some by calling out to other
programs), its declared size is checked against `Limits.max_image_pixels` before a pixel is
decoded, and whatever goes wrong in decoding (truncated, corrupt, a bomb Pillow itself catches) is
a DatasetError naming the file.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

import numpy as np

from orchestrator.errors import DatasetError
from orchestrator.provision.datafiles import Limits, check_size

SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")
FORMATS = ["JPEG", "PNG", "BMP", "GIF", "WEBP"]


def list_images(root: Path, limits: Limits) -> list[tuple[str, Path]]:
    """(class name, image file) for each image under each class subfolder of `root`, in name order."""
    lister = _Lister(limits)
    classes = sorted(Path(e.path) for e in lister.entries(root) if _kind(e) == stat.S_IFDIR)
    files = [(c.name, f) for c in classes for f in sorted(lister.images_under(c))]
    if len(classes) < 2 or not files:
        raise DatasetError(
            f"{root}: an image_folder needs one subfolder per class (at least 2) holding images "
            f"({', '.join(SUFFIXES)}); found {len(classes)} subfolders, {len(files)} images"
        )
    return files


def _kind(entry: os.DirEntry) -> int:
    """The file type of what the entry names, through a link; 0 for a dangling link."""
    try:
        return stat.S_IFMT(entry.stat().st_mode)
    except OSError:
        return 0


class _Lister:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.left = limits.max_folder_entries

    def entries(self, folder: Path) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as scan:
                found = []
                for entry in scan:
                    self.left -= 1
                    if self.left < 0:
                        raise DatasetError(
                            f"{folder}: the image folder holds more than {self.limits.max_folder_entries:,} "
                            "files and folders, more than bench lists for a dataset"
                        )
                    found.append(entry)
                return found
        except OSError as exc:
            raise DatasetError(f"{folder}: cannot list it: {exc.strerror or exc}") from None

    def images_under(self, folder: Path) -> list[Path]:
        """Regular files with an image suffix under `folder`, at any depth: no FIFO or device
        (reading one would wait for ever or never end)."""
        files, todo = [], [folder]
        while todo:
            for entry in self.entries(todo.pop()):
                if entry.is_dir(follow_symlinks=False):
                    todo.append(Path(entry.path))
                elif Path(entry.name).suffix.lower() in SUFFIXES and _kind(entry) == stat.S_IFREG:
                    files.append(Path(entry.path))
        return files


def decode_all(root: Path, files: list[Path], size: int, limits: Limits) -> np.ndarray:
    """The images, RGB, resized to size x size (bilinear), as one (N, 3, size, size) uint8 array,
    whose size is checked against the limit before it is allocated."""
    check_size(root, len(files) * 3 * size * size, limits, f"{len(files):,} decoded images")
    out = np.empty((len(files), 3, size, size), dtype=np.uint8)
    for i, path in enumerate(files):
        out[i] = decode(path, size, limits).transpose(2, 0, 1)
    return out


def decode(path: Path, size: int, limits: Limits) -> np.ndarray:
    """One image as (size, size, 3) uint8."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(path, formats=FORMATS) as im:
                width, height = im.size
                if width * height > limits.max_image_pixels:
                    raise DatasetError(
                        f"{path}: the image declares {width} x {height} pixels, more than bench's "
                        f"limit of {limits.max_image_pixels:,} for one image"
                    )
                return np.asarray(im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR))
        except DatasetError:
            raise
        except Exception as exc:  # Pillow's decoders raise many kinds; on hostile bytes all mean one thing
            raise DatasetError(f"{path}: cannot decode the image: {type(exc).__name__}: {exc}") from None

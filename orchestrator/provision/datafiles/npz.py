"""A reader of `.npz` archives (Keras's imdb.npz) that allows only what the format does.

An `.npz` is a zip of `.npy` members. Both layers declare sizes a hostile file can lie about: the
zip its members' uncompressed sizes, the `.npy` header its shape. Here every member must have a
plain name, appear once, not overlap another, be stored or deflated at a ratio deflate can reach,
and declare an uncompressed size within the limit; the `.npy` header (parsed here, never with
`allow_pickle`) must describe exactly the bytes its member holds, before those are read. A numeric
member becomes an array; an object member (Keras's reviews) goes through the pickle reader, which
builds only plain lists.
"""

from __future__ import annotations

import ast
import io
import re
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO

import numpy as np

from orchestrator.errors import DatasetError
from orchestrator.provision.datafiles import Limits, pickles, read_whole, too_big

MEMBER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\.npy")
MAGIC = b"\x93NUMPY"
MAX_HEADER = 10_000  # numpy's own limit on a header's length
MAX_DEFLATE_RATIO = 1032  # the most deflate can shrink data: a member declaring more lies
LOCAL_HEADER = 30  # bytes of a zip local file header before its name
NUMERIC_DESCR = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248])")


class Malformed(Exception):
    """The archive or one of its members is not what the format allows; the message says why."""


def read_members(path: Path, limits: Limits, kinds: dict[str, str]) -> dict[str, object]:
    """The members of the archive at `path`, which must be exactly the names in `kinds`:
    kind "int" is a 1-d integer array, "object" a 1-d object array (returned as its list of items)."""
    # Read whole (it is within the limit) so that no size the archive declares becomes a read of
    # that size: a file object's read(n) allocates n bytes before it reads; a BytesIO's does not.
    data = io.BytesIO(read_whole(path, limits))
    try:
        with zipfile.ZipFile(data) as archive:
            infos = _check_directory(archive, limits, {f"{name}.npy" for name in kinds})
            return {
                name: _member(archive, infos[f"{name}.npy"], kind, limits) for name, kind in kinds.items()
            }
    except Malformed as exc:
        raise DatasetError(f"{path}: {exc}") from None
    except pickles.Refused as exc:
        raise DatasetError(f"{path}: an object member holds {exc}") from None
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        struct.error,
        OSError,
        EOFError,
        ValueError,
    ) as exc:
        raise DatasetError(f"{path}: not a readable .npz archive: {exc}") from None
    except (NotImplementedError, RuntimeError) as exc:  # zipfile: unknown compression, encryption
        raise DatasetError(f"{path}: not a readable .npz archive: {exc}") from None


def _check_directory(
    archive: zipfile.ZipFile, limits: Limits, expected: set[str]
) -> dict[str, zipfile.ZipInfo]:
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        name = info.filename
        if not MEMBER_NAME.fullmatch(name):
            raise Malformed(f"a member named {name[:80]!r}: an .npz holds only NAME.npy members")
        if name in infos:
            raise Malformed(f"member {name} appears twice")
        if name not in expected:
            raise Malformed(f"member {name} is not one of {', '.join(sorted(expected))}")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise Malformed(f"member {name} is encrypted or compressed other than by deflate")
        stored = info.compress_type == zipfile.ZIP_STORED
        if info.file_size > (info.compress_size if stored else MAX_DEFLATE_RATIO * info.compress_size + 1024):
            raise Malformed(f"member {name} declares {info.file_size:,} bytes from {info.compress_size:,}")
        if info.file_size > limits.max_bytes:
            raise Malformed(f"member {name}: {too_big(info.file_size, limits, 'its data')}")
        infos[name] = info
    missing = expected - set(infos)
    if missing:
        raise Malformed(f"no member {', '.join(sorted(missing))}")
    total = sum(i.file_size for i in infos.values())
    if total > limits.max_bytes:
        raise Malformed(too_big(total, limits, "its members together"))
    spans = sorted(
        (i.header_offset, i.header_offset + LOCAL_HEADER + len(i.filename) + i.compress_size)
        for i in infos.values()
    )
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise Malformed("members overlap (a zip bomb's trick)")
    return infos


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, kind: str, limits: Limits) -> object:
    name = info.filename
    with archive.open(info) as fp:
        descr, fortran, shape, header_size = read_header(fp, name)
        body = info.file_size - header_size
        if body < 0:
            raise Malformed(f"member {name} is shorter than its own header")
        if len(shape) != 1:
            raise Malformed(f"member {name} has shape {shape}: a 1-d array belongs there")
        if kind == "object":
            if descr != "|O":
                raise Malformed(f"member {name} has dtype {descr!r}: an object array belongs there")
            items = pickles.loads(_read_exactly(fp, body, name), limits, object_arrays=True)
            if type(items) is not list or len(items) != shape[0]:
                raise Malformed(f"member {name} holds other than its {shape[0]:,} items")
            return items
        if not NUMERIC_DESCR.fullmatch(descr) or np.dtype(descr).kind not in "iu":
            raise Malformed(f"member {name} has dtype {descr!r}: an integer array belongs there")
        dtype = np.dtype(descr)
        if shape[0] * dtype.itemsize != body:
            raise Malformed(f"member {name} declares {shape} of {descr} but holds {body:,} bytes of data")
        data = _read_exactly(fp, body, name)
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


def read_header(fp: IO[bytes], name: str) -> tuple[str, bool, tuple[int, ...], int]:
    """(descr, fortran_order, shape, bytes before the data) of an .npy stream, checked."""
    start = fp.read(len(MAGIC) + 2)
    if (
        len(start) != len(MAGIC) + 2
        or not start.startswith(MAGIC)
        or start[-2:] not in (b"\1\0", b"\2\0", b"\3\0")
    ):
        raise Malformed(f"member {name} is not an .npy array (versions 1 to 3)")
    width = 2 if start[-2] == 1 else 4
    length = int.from_bytes(fp.read(width), "little")
    if length > MAX_HEADER:
        raise Malformed(
            f"member {name} declares a header of {length:,} bytes (numpy writes at most {MAX_HEADER:,})"
        )
    text = fp.read(length)
    try:
        header = ast.literal_eval(text.decode("utf-8" if start[-2] == 3 else "latin-1"))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, UnicodeDecodeError):
        header = None
    if not (isinstance(header, dict) and header.keys() == {"descr", "fortran_order", "shape"}):
        raise Malformed(f"member {name} has a header other than {{descr, fortran_order, shape}}")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if type(descr) is not str or type(fortran) is not bool or type(shape) is not tuple:
        raise Malformed(f"member {name} has a header of the wrong types")
    if len(shape) > 32 or any(type(n) is not int or n < 0 for n in shape):
        raise Malformed(f"member {name} has a shape that is not a tuple of sizes")
    return descr, fortran, shape, len(start) + width + length


def _read_exactly(fp: IO[bytes], size: int, name: str) -> bytes:
    """The member's remaining `size` bytes, and nothing after them (the zip's CRC is checked at the end)."""
    data = fp.read(size)
    if len(data) != size or fp.read(1):
        raise Malformed(f"member {name} holds other than the {size:,} bytes its header declares")
    return data

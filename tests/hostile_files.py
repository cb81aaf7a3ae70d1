"""Data files written byte by byte: real formats (Python 2's CIFAR pickles, .npy, .npz, PNG) and
the hostile variants of them that tests/test_hostile_data*.py feed to bench's readers."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

# --- pickle opcodes, as Python 2's cPickle (protocol 2) writes them


def glob(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def py2str(data: bytes) -> bytes:
    """Python 2's str: SHORT_BINSTRING or BINSTRING."""
    return b"U" + bytes([len(data)]) + data if len(data) < 256 else b"T" + struct.pack("<i", len(data)) + data


def text(s: str) -> bytes:
    data = s.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def pyint(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if 0 <= n < 65536:
        return b"M" + struct.pack("<H", n)
    return b"J" + struct.pack("<i", n)


def int_tuple(values: tuple[int, ...]) -> bytes:
    return b"(" + b"".join(pyint(v) for v in values) + b"t"


def dtype(typestr: str, endian: str = "|", flags: int = 0, middle: bytes = b"NNN") -> bytes:
    """numpy.dtype(typestr, 0, 1) with its version-3 state, as numpy pickles a dtype."""
    state = (
        b"(K\x03" + py2str(endian.encode()) + middle + b"J\xff\xff\xff\xffJ\xff\xff\xff\xff" + pyint(flags)
    )
    return glob("numpy", "dtype") + py2str(typestr.encode()) + b"K\x00K\x01\x87R" + state + b"tb"


def array(shape: tuple[int, ...], dtype_ops: bytes, payload_ops: bytes, core: str = "numpy.core") -> bytes:
    """numpy.core.multiarray._reconstruct(ndarray, (0,), 'b') and its state."""
    head = glob(f"{core}.multiarray", "_reconstruct") + glob("numpy", "ndarray") + b"K\x00\x85" + py2str(b"b")
    return head + b"\x87R(K\x01" + int_tuple(shape) + dtype_ops + b"\x89" + payload_ops + b"tb"


def py2_cifar_batch(data: np.ndarray, labels: list[int], label_key: bytes = b"labels") -> bytes:
    """A CIFAR python batch as the published files are: Python 2's cPickle at protocol 2."""
    items = [
        (b"batch_label", py2str(b"training batch 1 of 5")),
        (label_key, b"](" + b"".join(pyint(v) for v in labels) + b"e"),
        (b"data", array(data.shape, dtype("u1"), py2str(data.tobytes()))),
        (b"filenames", b"](" + b"".join(py2str(b"img_%d.png" % i) for i in range(len(labels))) + b"e"),
    ]
    return b"\x80\x02}(" + b"".join(py2str(k) + v for k, v in items) + b"u."


def cifar_dict(data_ops: bytes, labels: list[int] | None = None) -> bytes:
    """A protocol-2 CIFAR-like dict whose b'data' is the given opcodes."""
    labels = [0, 1] if labels is None else labels
    label_ops = b"](" + b"".join(pyint(v) for v in labels) + b"e"
    return b"\x80\x02}(" + py2str(b"data") + data_ops + py2str(b"labels") + label_ops + b"u."


# --- .npy and .npz


def npy(header: str, body: bytes, version: int = 1) -> bytes:
    """An .npy file with this header text (padded as numpy pads it) and body."""
    width = 2 if version == 1 else 4
    raw = header.encode("utf-8" if version == 3 else "latin-1", "replace")
    raw += b" " * (-(len(raw) + 1 + 6 + 2 + width) % 64) + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + len(raw).to_bytes(width, "little") + raw + body


def npy_of(array_value: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array_value, allow_pickle=True)
    return buf.getvalue()


def reviews(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.RandomState(seed)
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = [int(w) for w in rng.randint(1, 40000, rng.randint(3, 40))]
    return out


def imdb_members(n: int = 6) -> dict[str, bytes]:
    rng = np.random.RandomState(1)
    return {
        "x_train.npy": npy_of(reviews(n)),
        "y_train.npy": npy_of(rng.randint(0, 2, n)),
        "x_test.npy": npy_of(reviews(n, 2)),
        "y_test.npy": npy_of(rng.randint(0, 2, n)),
    }


def zip_bytes(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buf.getvalue()


def write_zip(path: Path, members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zip_bytes(members, compression))
    return path


def patch_declared_size(archive: bytes, name: str, size: int) -> bytes:
    """The zip with `name`'s declared uncompressed size changed in its local and central headers."""
    out = bytearray(archive)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (start := out.find(signature, start)) >= 0:
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if out[name_at : name_at + len(name)] == name.encode():
                out[start + offset : start + offset + 4] = struct.pack("<I", size)
            start += 4
    return bytes(out)


# --- PNG


def png(width: int = 8, height: int = 8) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def with_ihdr_size(data: bytes, width: int, height: int) -> bytes:
    """The PNG with its header claiming another size (and a correct CRC, so only the size lies)."""
    out = bytearray(data)
    out[16:24] = struct.pack(">II", width, height)
    out[29:33] = struct.pack(">I", zlib.crc32(bytes(out[12:29])))
    return bytes(out)


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(side: int = 30000) -> bytes:
    """A real, complete side x side 1-bit PNG of zeros: about 110 KB that decode to side^2 pixels."""
    row = b"\0" * (1 + (side + 7) // 8)  # filter byte, then the packed bits
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(side)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")

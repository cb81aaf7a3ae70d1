"""What the pickle reader builds for the few numpy callables a data pickle may name.

numpy's own reconstructors trust their arguments (a dtype's pickled flags can make raw bytes into
object pointers); these functions take the same arguments, check them, and build the value
themselves: a dtype only from a numeric type string, an array only from a byte payload whose
length is exactly its shape times its item size, an object array only as the plain list of its
items. Each raises `Refused` saying what was wrong.
"""

from __future__ import annotations

import re

import numpy as np

CORES = ("numpy.core", "numpy._core")  # numpy 1.x wrote the one, numpy 2 writes the other
GLOBALS = {
    ("numpy", "ndarray"): "ndarray",
    ("numpy", "dtype"): "dtype",
    ("_codecs", "encode"): "encode",  # how Python 3 writes bytes at protocol 2
    **{(f"{core}.multiarray", "_reconstruct"): "reconstruct" for core in CORES},
    **{(f"{core}.multiarray", "scalar"): "scalar" for core in CORES},
    **{(f"{core}.numeric", "_frombuffer"): "frombuffer" for core in CORES},
}
NUMERIC_TYPESTR = re.compile(r"b1|[iu][1248]|f[248]")
OBJECT_TYPESTR = re.compile(r"O[48]?")
MAX_DIMS = 32  # numpy's own limit


class Refused(Exception):
    """The pickle holds something a data file may not; the message says what."""


class Global:
    """One of the allowed callables, by name: never the real object."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Pending:
    """An array or dtype REDUCE has announced and BUILD has yet to fill in."""

    __slots__ = ("kind", "typestr", "value")

    def __init__(self, kind: str, typestr: str = "") -> None:
        self.kind, self.typestr = kind, typestr
        self.value: object = None


def one_of(value: object, *options: object) -> bool:
    """`value in options` for plain values only: an array's == answers with an array, not a bool."""
    return type(value) in (str, bytes, int, bool) and value in options


def call(name: str, args: tuple[object, ...], max_dim: int) -> object:
    """What REDUCE of the allowed callable `name` on `args` makes."""
    if name == "reconstruct" and len(args) == 3:
        subtype, shape, typecode = args
        if isinstance(subtype, Global) and subtype.name == "ndarray" and one_of(typecode, b"b", "b"):
            if type(shape) is tuple and len(shape) == 1 and one_of(shape[0], 0):
                return Pending("array")
        raise Refused("numpy's _reconstruct called with other than (ndarray, (0,), 'b')")
    if name == "dtype" and len(args) == 3:
        typestr = args[0].decode("ascii", "replace") if type(args[0]) is bytes else args[0]
        if type(typestr) is str and (NUMERIC_TYPESTR.fullmatch(typestr) or OBJECT_TYPESTR.fullmatch(typestr)):
            if one_of(args[1], 0) and one_of(args[2], 1):
                return Pending("dtype", typestr)
        raise Refused(f"dtype {str(typestr)[:20]!r}: data files hold bool, integer and float arrays")
    if name == "scalar" and len(args) == 2:
        kind, payload = numeric(args[0]), args[1]
        if type(payload) is not bytes or len(payload) != kind.itemsize:
            raise Refused("a numpy scalar whose bytes do not match its dtype")
        return np.frombuffer(payload, kind)[0]
    if name == "frombuffer" and len(args) == 4:
        if not one_of(args[3], "C", "F"):
            raise Refused("an array of an order other than C or F")
        return array(args[2], numeric(args[1]), args[3] == "F", args[0], max_dim, False)
    if name == "encode" and len(args) == 2:
        text, encoding = args
        if type(text) is str and one_of(encoding, "latin1", "latin-1") and max(text, default="\0") <= "\xff":
            return text.encode("latin-1")
        raise Refused("_codecs.encode called with other than latin-1 text and 'latin1'")
    raise Refused(f"a call of {name} with {len(args)} arguments")


def build(target: Pending, state: tuple[object, ...], max_dim: int, object_arrays: bool) -> object:
    """What BUILD with `state` makes of an announced dtype or array."""
    if target.kind == "dtype":
        return dtype_from_state(target.typestr, state)
    if len(state) == 5 and one_of(state[0], 1):
        return array(state[1], state[2], state[3], state[4], max_dim, object_arrays)
    raise Refused("an array state other than (1, shape, dtype, fortran, data)")


def dtype_from_state(typestr: str, state: tuple[object, ...]) -> np.dtype:
    # numpy's dtype states: (version, endian, subarray, names, fields, elsize, alignment[, flags
    # [, metadata]]): 7 items up to version 2, 8 in version 3, 9 (with metadata) in version 4.
    # The flags are ignored: the dtype is made from the type string, never from what they claim.
    known = {1: 7, 2: 7, 3: 8, 4: 9}.get(state[0] if state and type(state[0]) is int else -1)
    endian = state[1] if len(state) == known else None
    if type(endian) is bytes:
        endian = endian.decode("ascii", "replace")
    plain = all(item is None for item in state[2:5] + state[8:])
    if not (one_of(endian, "<", ">", "|", "=") and plain):
        raise Refused("a dtype with fields, a subarray, metadata or an unknown byte order")
    if OBJECT_TYPESTR.fullmatch(typestr):
        return np.dtype(object)  # harmless as a value: `array` builds no object array from bytes
    return np.dtype(("=" if endian == "|" else str(endian)) + typestr)


def numeric(dtype: object) -> np.dtype:
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf":
        raise Refused("a numpy value of a dtype other than bool, integer or float")
    return dtype


def array(
    shape: object, dtype: object, fortran: object, payload: object, max_dim: int, object_arrays: bool
) -> object:
    """A numeric array from exactly its bytes; an object array (where allowed) as its list of items."""
    if type(shape) is not tuple or len(shape) > MAX_DIMS:
        raise Refused("an array shape that is not a tuple of sizes")
    if any(type(n) is not int or not 0 <= n <= max_dim for n in shape):
        raise Refused(f"an array shape {str(shape)[:60]} with a size beyond 0 to {max_dim:,}")
    if not one_of(fortran, 0, 1) or not isinstance(dtype, np.dtype):
        raise Refused("an array state with a bad dtype or order")
    count = 1
    for n in shape:
        count *= n
    if dtype.hasobject:
        if not object_arrays:
            raise Refused("an object array: this file holds only numeric arrays")
        if type(payload) is not list or len(shape) != 1 or len(payload) != count:
            raise Refused("an object array whose items are not a list of its length")
        return payload  # the items themselves: numpy never builds an object array here
    dtype = numeric(dtype)
    if not isinstance(payload, (bytes, bytearray)) or len(payload) != count * dtype.itemsize:
        raise Refused(f"an array of shape {shape} whose data is not {count * dtype.itemsize:,} bytes")
    return np.frombuffer(payload, dtype).reshape(shape, order="F" if fortran else "C")

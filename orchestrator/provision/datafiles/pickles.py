"""A reader of the python pickles data sets ship in, that runs nothing a file names.

`pickle.Unpickler`, however restricted its globals, hands the objects it is given to numpy's own
reconstructors, and those trust their arguments: a dtype's pickled state can claim that raw bytes
are object pointers (SIGSEGV), a few hundred bytes of shared nested lists expand to gigabytes when
numpy walks them. So this reader walks the opcode stream itself, as a small stack machine that
knows only the opcodes CIFAR's batches (Python 2's cPickle, protocol 2) and numpy's pickles from
Python 3 (protocols 2 to 5) use, and builds every value itself:

- containers are dicts, lists and tuples; a list or dict is never shared (no DUP, no memo GET of a
  container), so what a file builds is a tree whose size is what the file paid for;
- a numpy array is built here from a numeric dtype (bool, int, uint, float; no object, void,
  structured or subarray dtype) and a byte payload whose length must match its shape exactly;
  an object array (Keras's IMDB reviews) only where the caller allows it, as the plain list of
  its items, never by numpy;
- nesting depth, every length and the memory the objects take are checked against `Limits`
  before anything is built.

Anything else is refused with the opcode and the byte where it was found.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from orchestrator.errors import DatasetError
from orchestrator.provision.datafiles import Limits, read_whole
from orchestrator.provision.datafiles.pickled_numpy import GLOBALS, Global, Pending, Refused, build, call
from orchestrator.text.terminal import safe_line

INT_WIDTHS = {0x4B: 1, 0x4D: 2, 0x4A: 4}  # BININT1, BININT2, BININT (signed)
LEAF_TYPES = (bytes, str, int, float, bool, type(None), np.ndarray, np.generic, np.dtype, Global)
# Approximate bytes of memory per object, for the budget (CPython's sizes, rounded up).
# A container also costs its entry in `depths`.
COST_CONTAINER, COST_ITEM, COST_DICT_ITEM, COST_LEAF = 160, 8, 100, 48

__all__ = ["Refused", "load", "loads"]


def load(path: Path, limits: Limits, what: str, object_arrays: bool = False) -> object:
    """The value pickled in `path`; DatasetError naming the file and `what` it should have been."""
    data = read_whole(path, limits)
    try:
        return loads(data, limits, object_arrays)
    except Refused as exc:
        raise DatasetError(f"{path}: {what}: {exc}") from None


def loads(data: bytes, limits: Limits, object_arrays: bool = False) -> object:
    """The value pickled in `data` (nothing may follow its STOP); Refused if it is not plain data."""
    return _Machine(data, limits, object_arrays).run()


class _Args(tuple):
    """A tuple holding one of the allowed functions: the arguments of a call, and nothing else."""


def _is_container(value: object) -> bool:
    return type(value) in (list, dict, tuple)


class _Machine:
    def __init__(self, data: bytes, limits: Limits, object_arrays: bool) -> None:
        self.data, self.limits, self.object_arrays = data, limits, object_arrays
        self.pos = 0
        self.stack: list[object] = []
        self.metastack: list[list[object]] = []
        self.memo: dict[int, object] = {}
        self.depths: dict[int, int] = {}  # id(container) -> its depth; set when it is made
        self.spent = 0
        self.ops: dict[int, Callable[[], None]] = {ord(code): op for code, op in self._table().items()}

    def _table(self) -> dict[str, Callable[[], None]]:
        return {
            "\x80": self.proto, "\x95": self.frame, "(": self.mark, "N": lambda: self.push(None),
            "\x88": lambda: self.push(True), "\x89": lambda: self.push(False),
            "\x8a": self.long1, "U": lambda: self.push_bytes(1, False), "T": lambda: self.push_bytes(4, True),
            "C": lambda: self.push_bytes(1, False), "B": lambda: self.push_bytes(4, False),
            "\x8e": lambda: self.push_bytes(8, False), "\x96": self.bytearray8,
            "\x8c": lambda: self.push_text(1), "X": lambda: self.push_text(4),
            "\x8d": lambda: self.push_text(8),
            "}": lambda: self.push_container({}), "]": lambda: self.push_container([]),
            ")": lambda: self.push_container(()), "t": lambda: self.push(self.make_tuple(self.pop_mark())),
            "\x85": lambda: self.tuple_n(1), "\x86": lambda: self.tuple_n(2), "\x87": lambda: self.tuple_n(3),
            "a": self.append, "e": self.appends, "s": self.setitem, "u": self.setitems,
            "q": lambda: self.put(self.take(1)[0]), "r": lambda: self.put(self.uint(4)),
            "\x94": lambda: self.put(len(self.memo)),
            "h": lambda: self.get(self.take(1)[0]), "j": lambda: self.get(self.uint(4)),
            "c": self.global_, "\x93": self.stack_global, "R": self.reduce, "b": self.build,
        }  # fmt: skip

    # --- the loop and its plumbing

    def run(self) -> object:
        data, ops, end = self.data, self.ops, len(self.data)
        while True:
            if self.pos >= end:
                raise Refused(f"the data ends at byte {self.pos} before the pickle's STOP")
            code = data[self.pos]
            self.pos += 1
            if code in INT_WIDTHS:
                self.ints(code)
                continue
            if code == 0x2E:  # STOP
                return self.stop()
            op = ops.get(code)
            if op is None:
                raise Refused(f"opcode {bytes([code])!r} at byte {self.pos - 1} is not one data files use")
            op()

    def ints(self, code: int) -> None:
        """A run of BININT1/2/BININT opcodes in one loop: IMDB's reviews are millions of them."""
        data, stack, pos, end, start = self.data, self.stack, self.pos, len(self.data), len(self.stack)
        room = start + (self.limits.max_bytes - self.spent) // COST_LEAF + 1  # then `charge` refuses
        while len(stack) < room:
            width = INT_WIDTHS[code]
            if pos + width > end:
                break
            stack.append(int.from_bytes(data[pos : pos + width], "little", signed=code == 0x4A))
            pos += width
            if pos >= end or data[pos] not in INT_WIDTHS:
                break
            code = data[pos]
            pos += 1
        self.pos = pos
        self.charge(COST_LEAF * (len(stack) - start))
        if len(stack) == start:
            raise self.fail("an integer opcode cut short by the end of the data")

    def stop(self) -> object:
        if len(self.stack) != 1 or self.metastack:
            raise Refused(f"the pickle ends at byte {self.pos} with {len(self.stack)} values on its stack")
        if self.pos != len(self.data):
            raise Refused(
                f"{len(self.data) - self.pos} bytes follow the pickle's STOP at byte {self.pos - 1}"
            )
        value = self.stack.pop()
        if isinstance(value, (Global, Pending, _Args)):
            raise Refused("the pickle holds a reference to a function, not data")
        return value

    def fail(self, why: str) -> Refused:
        return Refused(f"{why} (before byte {self.pos})")

    def charge(self, cost: int) -> None:
        self.spent += cost
        if self.spent > self.limits.max_bytes:
            raise self.fail(f"it would build more than bench's limit of {self.limits.max_bytes:,} bytes")

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise self.fail(f"it declares {n:,} bytes where {len(self.data) - self.pos:,} remain")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def push(self, value: object) -> None:
        self.charge(COST_LEAF)
        self.stack.append(value)

    def pop(self) -> object:
        if not self.stack:
            raise self.fail("an opcode needs a value and the stack is empty")
        return self.stack.pop()

    def top(self) -> object:
        if not self.stack:
            raise self.fail("an opcode needs a value and the stack is empty")
        return self.stack[-1]

    def mark(self) -> None:
        self.charge(COST_CONTAINER)
        self.metastack.append(self.stack)
        self.stack = []

    def pop_mark(self) -> list[object]:
        if not self.metastack:
            raise self.fail("an opcode needs a MARK and there is none")
        items, self.stack = self.stack, self.metastack.pop()
        return items

    # --- scalars and strings

    def proto(self) -> None:
        if self.take(1)[0] not in (2, 3, 4, 5):
            raise self.fail("only pickle protocols 2 to 5 are read")

    def frame(self) -> None:
        if self.uint(8) > len(self.data) - self.pos:
            raise self.fail("a frame declares more bytes than remain")

    def long1(self) -> None:
        n = self.take(1)[0]
        if n > 8:
            raise self.fail(f"an integer of {n} bytes: data files hold 64-bit ones at most")
        self.push(int.from_bytes(self.take(n), "little", signed=True))

    def push_bytes(self, width: int, signed: bool) -> None:
        n = int.from_bytes(self.take(width), "little", signed=signed)
        if n < 0:
            raise self.fail("a negative length")
        self.charge(n)
        self.push(self.take(n))  # Python 2's str is bytes here, as pickle's encoding="bytes" reads it

    def bytearray8(self) -> None:
        n = self.uint(8)
        self.charge(n)
        self.push(bytearray(self.take(n)))

    def push_text(self, width: int) -> None:
        n = self.uint(width)
        self.charge(4 * n)  # the most memory a str of n UTF-8 bytes can take
        try:
            self.push(self.take(n).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise self.fail(f"text that is not UTF-8 ({exc.reason})") from None

    # --- containers

    def depth(self, value: object) -> int:
        return self.depths.get(id(value), 0) if _is_container(value) else 0

    def admit(self, value: object, parent: object) -> None:
        """`value` may go into `parent`: data (not a half-built array), and not too deep."""
        if isinstance(value, (Pending, _Args)) or (isinstance(value, Global) and type(parent) is not _Args):
            raise self.fail("a function or an unfinished array is used as data")
        depth = self.depth(value) + 1
        if depth > self.limits.max_depth:
            raise self.fail(f"containers nested more than {self.limits.max_depth} deep")
        if depth > self.depths[id(parent)]:
            self.depths[id(parent)] = depth

    def push_container(self, value: object) -> None:
        self.charge(COST_CONTAINER)
        self.depths[id(value)] = 1
        self.stack.append(value)

    def make_tuple(self, items: list[object]) -> tuple[object, ...]:
        self.charge(COST_CONTAINER + COST_ITEM * len(items))
        value = _Args(items) if any(isinstance(item, Global) for item in items) else tuple(items)
        self.depths[id(value)] = 1
        for item in items:
            self.admit(item, value)
        return value

    def tuple_n(self, n: int) -> None:
        if len(self.stack) < n:
            raise self.fail(f"a TUPLE{n} with {len(self.stack)} values on the stack")
        items = self.stack[-n:]
        del self.stack[-n:]
        self.push(self.make_tuple(items))

    def extend(self, items: list[object]) -> None:
        target = self.top()
        if type(target) is not list:
            raise self.fail(f"an APPEND to a {type(target).__name__}")
        self.charge(COST_ITEM * len(items))
        for item in items:
            if type(item) is not int:  # the common case (word ranks, labels) needs no check
                self.admit(item, target)
        target.extend(items)

    def append(self) -> None:
        self.extend([self.pop()])

    def appends(self) -> None:
        self.extend(self.pop_mark())

    def update(self, items: list[object]) -> None:
        target = self.top()
        if type(target) is not dict or len(items) % 2:
            raise self.fail("a SETITEM that is not a key and a value into a dict")
        self.charge(COST_DICT_ITEM * len(items) // 2)
        for key, value in zip(items[::2], items[1::2], strict=True):
            if type(key) not in (bytes, str, int):
                raise self.fail(f"a dict key of type {type(key).__name__}")
            self.admit(value, target)
            target[key] = value

    def setitem(self) -> None:
        value = self.pop()
        self.update([self.pop(), value])

    def setitems(self) -> None:
        self.update(self.pop_mark())

    # --- the memo: a value may be referred to again, but a container only once, so the data is a tree

    def put(self, index: int) -> None:
        self.charge(COST_DICT_ITEM)
        self.memo[index] = self.top()

    def get(self, index: int) -> None:
        if index not in self.memo:
            raise self.fail(f"memo entry {index} is used before it is set")
        value = self.memo[index]
        if isinstance(value, Pending):
            if value.value is None:
                raise self.fail("an unfinished array or dtype is used")
            value = value.value
        if not isinstance(value, LEAF_TYPES) or isinstance(value, bytearray):
            raise self.fail(f"a {type(value).__name__} is used twice: data files share no containers")
        self.push(value)

    # --- the few globals, and what calling them builds

    def global_(self) -> None:
        module, name = self.line(), self.line()
        self.push_global(module, name)

    def line(self) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + 256)
        if end < 0:
            raise self.fail("a GLOBAL whose name does not end within 256 bytes")
        text = self.data[self.pos : end]
        self.pos = end + 1
        return text.decode("ascii", "backslashreplace")

    def stack_global(self) -> None:
        name, module = self.pop(), self.pop()
        if type(module) is not str or type(name) is not str:
            raise self.fail("a STACK_GLOBAL whose module and name are not strings")
        self.push_global(module, name)

    def push_global(self, module: str, name: str) -> None:
        known = GLOBALS.get((module, name))
        if known is None:
            where = f"{safe_line(module[:80])}.{safe_line(name[:80])}"
            raise Refused(f"refused to load {where}: a data file holds only arrays")
        self.push(Global(known))

    def reduce(self) -> None:
        args, func = self.pop(), self.pop()
        if not isinstance(func, Global) or not isinstance(args, tuple):
            raise self.fail("a REDUCE that does not call an allowed function with a tuple")
        try:
            value = call(func.name, args, self.limits.max_bytes)
        except Refused as exc:
            raise self.fail(str(exc)) from None
        self.push(value)

    def build(self) -> None:
        state, target = self.pop(), self.top()
        if not isinstance(target, Pending) or target.value is not None or type(state) is not tuple:
            raise self.fail("a BUILD of something other than a new numpy array or dtype")
        try:
            target.value = build(target, state, self.limits.max_bytes, self.object_arrays)
        except Refused as exc:
            raise self.fail(str(exc)) from None
        self.charge(COST_CONTAINER)
        self.stack[-1] = target.value

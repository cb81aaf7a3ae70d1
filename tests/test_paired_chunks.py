"""benchmarks/inside/bare_common.alternate: the in-process alternation zoo_parity.py and overhead.py use.

Pure Python: the sides are recording functions, since what is checked is the schedule (every
step by every side, in chunks, in balanced orders, each chunk closed by the synchronisation),
not any framework.
"""

from __future__ import annotations

from argparse import Namespace

from benchmarks.inside import bare_common


def schedule(sides: int, steps: int, chunk: int, passes: int, warmup: int = 0):
    calls: list[tuple[str, int]] = []

    def side(name: str):
        return name, lambda i: calls.append((name, i))

    names = "abc"[:sides]
    args = Namespace(warmup=warmup, chunk=chunk, chunk_seconds=0.02)
    out = bare_common.alternate(
        [side(n) for n in names], steps, lambda: calls.append(("sync", -1)), args, passes
    )
    return out, calls


def test_every_side_takes_every_step_in_chunks_each_pass():
    out, calls = schedule(sides=2, steps=5, chunk=2, passes=2)
    assert out["steps"] == 5 and out["chunk"] == 2 and len(out["other_load"]) == 2
    for name in "ab":
        assert [i for n, i in calls if n == name] == [0, 1, 2, 3, 4] * 2
        assert [len(p) for p in out["paired"][name]] == [3, 3]  # chunks [0, 1], [2, 3], [4]
        assert all(t > 0 for p in out["paired"][name] for t in p)


def test_orders_alternate_and_every_chunk_ends_with_a_sync():
    _, calls = schedule(sides=2, steps=4, chunk=1, passes=1)
    assert calls == [
        ("a", 0), ("sync", -1), ("b", 0), ("sync", -1),
        ("b", 1), ("sync", -1), ("a", 1), ("sync", -1),
        ("a", 2), ("sync", -1), ("b", 2), ("sync", -1),
        ("b", 3), ("sync", -1), ("a", 3), ("sync", -1),
    ]  # fmt: skip


def test_three_sides_follow_each_other_equally_often():
    _, calls = schedule(sides=3, steps=6, chunk=1, passes=1)
    order = [n for n, _ in calls if n != "sync"]
    turns = [tuple(order[k : k + 3]) for k in range(0, 18, 3)]
    assert sorted(turns) == sorted({("a", "b", "c"), ("a", "c", "b"), ("b", "a", "c"), ("b", "c", "a"),
                                    ("c", "a", "b"), ("c", "b", "a")})  # fmt: skip


def test_warmup_steps_come_first_by_every_side_and_size_the_chunks():
    out, calls = schedule(sides=2, steps=3, chunk=0, passes=1, warmup=2)
    assert [c for c in calls if c[0] != "sync"][:4] == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    # Recording a call takes far less than the 20 ms a chunk aims at: one chunk holds every step.
    assert out["chunk"] >= 3 and [len(p) for p in out["paired"]["a"]] == [1]

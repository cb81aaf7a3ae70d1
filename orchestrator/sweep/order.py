"""The order a sweep runs its runs in, when each configuration runs several times (``runs: N``).

A worker process lands on a speed of its own (docs/performance.md: the spread between processes
is larger than within one), so a configuration's N runs are N processes, and the order they run in
decides what the machine's drift does to them. Run k of every configuration comes before run k+1 of
any (interleaved blocks), and each block is shuffled: a slow minute, another user's job or a warm
page cache then falls on every framework alike instead of on whichever ran last. The shuffle is
drawn from the sweep's recorded seed, so the order can be read back and a resumed sweep continues
the same plan.

A sweep whose every configuration runs once keeps the matrix's order: there is nothing to
interleave, and its order is what the user wrote.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Slot(Generic[T]):
    """One run of a configuration: ``run`` counts its configuration's runs from 0."""

    config: T
    run: int


def block_random(seed: int, block: int) -> random.Random:
    """The generator that shuffles one block: a function of the sweep's seed and the block alone,
    so the plan of a resumed sweep is the first one's."""
    return random.Random(f"bench-order:{seed}:{block}")


def interleaved(
    configs: Sequence[T],
    runs_of: Callable[[T], int],
    key: Callable[[T], str],
    seed: int,
    done: Mapping[str, Collection[int]] | None = None,
) -> list[Slot[T]]:
    """Every run still to run, in interleaved blocks, each block shuffled by ``seed``.

    ``runs_of`` is how many runs a configuration asks for; ``key`` its identity (its hash: two
    identical configurations are one); ``done`` which runs of each identity already finished (by
    run index). The whole plan is drawn, then what is done is taken out, so the runs left keep the
    places they had.
    """
    done = done or {}
    unique: dict[str, T] = {}
    for config in configs:
        unique.setdefault(key(config), config)
    wanted = {k: runs_of(c) for k, c in unique.items()}
    shuffle = any(n > 1 for n in wanted.values())
    plan: list[Slot[T]] = []
    for block in range(max(wanted.values(), default=0)):
        members = [k for k in unique if wanted[k] > block]
        if shuffle:
            block_random(seed, block).shuffle(members)
        plan.extend(Slot(unique[k], block) for k in members if block not in done.get(k, ()))
    return plan


def new_seed() -> int:
    """A seed for a sweep that names none: recorded with the sweep, whatever it is."""
    return random.SystemRandom().randrange(2**31)

"""The order of a sweep's runs when configurations run several times (orchestrator/sweep/order.py):
interleaved blocks, each shuffled by the sweep's seed, resumable to the same plan."""

from __future__ import annotations

from collections import Counter

from orchestrator.sweep import order

NAMES = ["pytorch", "tensorflow", "mxnet", "jax"]


def plan(
    runs: dict[str, int], seed: int = 7, done: dict[str, set[int]] | None = None
) -> list[tuple[str, int]]:
    slots = order.interleaved(list(runs), runs.__getitem__, str, seed, done)
    return [(s.config, s.run) for s in slots]


def test_run_k_of_every_configuration_comes_before_run_k_plus_1_of_any():
    slots = plan({n: 5 for n in NAMES})
    assert [r for _, r in slots] == sorted(r for _, r in slots)
    assert Counter(c for c, _ in slots) == {n: 5 for n in NAMES}
    for k in range(5):
        assert sorted(c for c, r in slots if r == k) == sorted(NAMES)


def test_blocks_are_shuffled_by_the_seed_and_the_same_seed_gives_the_same_order():
    first = plan({n: 6 for n in NAMES}, seed=1)
    assert first == plan({n: 6 for n in NAMES}, seed=1)
    blocks = {tuple(c for c, r in first if r == k) for k in range(6)}
    assert len(blocks) > 1  # six blocks of four: one order for all would be no shuffle at all
    assert first != plan({n: 6 for n in NAMES}, seed=2)


def test_a_sweep_of_single_runs_keeps_the_matrix_order():
    assert plan({n: 1 for n in NAMES}) == [(n, 0) for n in NAMES]


def test_configurations_asking_for_fewer_runs_leave_the_later_blocks():
    slots = plan({"a": 1, "b": 3, "c": 2})
    assert Counter(c for c, _ in slots) == {"a": 1, "b": 3, "c": 2}
    assert [c for c, r in slots if r == 2] == ["b"]


def test_a_resumed_plan_keeps_the_places_of_the_runs_left():
    whole = plan({n: 4 for n in NAMES}, seed=3)
    done = {"pytorch": {0, 1}, "tensorflow": {0, 2}, "mxnet": set(), "jax": {0, 1, 2, 3}}
    left = plan({n: 4 for n in NAMES}, seed=3, done=done)
    assert left == [(c, r) for c, r in whole if r not in done[c]]
    assert ("tensorflow", 1) in left and ("tensorflow", 2) not in left  # a disturbed run redone


def test_identical_configurations_are_one():
    slots = order.interleaved(["a", "a", "b"], lambda _c: 2, str, 0)
    assert Counter(s.config for s in slots) == {"a": 2, "b": 2}


def test_a_new_seed_is_an_int_a_database_column_holds():
    assert all(0 <= order.new_seed() < 2**31 for _ in range(20))

"""orchestrator/stats on synthetic runs whose answers are known by construction or by hand."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from orchestrator.errors import StatsError
from orchestrator.stats import bootstrap, comparison, corrections, exactpower, mannwhitney, planning, ranking


def runs_around(centre: float, spread: float = 0.02, n: int = 7, epochs: int = 5) -> list[list[float]]:
    """n runs whose figures lie evenly over centre × (1 ± spread), each with epochs around it: the
    cell's figure is `centre` exactly (the middle run's median epoch)."""
    found = []
    for i in range(n):
        run = centre * (1 + spread * (2 * i / (n - 1) - 1))
        found.append([run * (1 + 0.005 * (j - epochs // 2)) for j in range(epochs)])
    return found


def drawn(rng: random.Random, n: int = 6, cv: float = 0.05, epochs: int = 8) -> list[list[float]]:
    """n runs of one distribution: each process's own speed, then its epochs' noise."""
    found = []
    for _ in range(n):
        run = math.exp(rng.gauss(0, cv))
        found.append([run * math.exp(rng.gauss(0, 0.01)) for _ in range(epochs)])
    return found


# --- a cell's figure and its interval


def test_the_interval_covers_the_known_centre():
    estimate = bootstrap.cell_estimate(runs_around(2.0))
    assert estimate.centre == pytest.approx(2.0)
    assert estimate.n == 7
    assert estimate.low is not None and estimate.high is not None
    assert estimate.low < 2.0 < estimate.high
    assert 2.0 * 0.98 * 0.99 <= estimate.low and estimate.high <= 2.0 * 1.02 * 1.01
    assert not estimate.undercovers
    assert bootstrap.cell_estimate(runs_around(2.0, n=4)).undercovers


def test_one_run_gives_its_figure_and_no_interval():
    estimate = bootstrap.cell_estimate([[3.0, 1.0, 2.0, 9.0, 2.5]])
    assert (estimate.centre, estimate.low, estimate.high, estimate.n) == (2.5, None, None, 1)
    assert not estimate.has_interval
    one = bootstrap.ratio([[1.0, 1.1]], runs_around(2.0))
    assert one.centre == pytest.approx(2.0 / 1.05) and not one.has_interval and not one.excludes_one()


def test_the_resampling_is_deterministic_given_the_seed():
    cell = drawn(random.Random(3))
    assert bootstrap.cell_estimate(cell, seed=1) == bootstrap.cell_estimate(cell, seed=1)
    assert bootstrap.cell_estimate(cell, seed=1) != bootstrap.cell_estimate(cell, seed=2)
    # The runs' order (a database's) does not change the draw.
    assert bootstrap.cell_estimate(cell[::-1], seed=1) == bootstrap.cell_estimate(cell, seed=1)


def test_a_ratio_of_well_separated_cells_covers_its_known_value_and_excludes_one():
    ratio = bootstrap.ratio(runs_around(1.0), runs_around(1.5))
    assert ratio.centre == pytest.approx(1.5)
    assert ratio.low is not None and ratio.high is not None
    assert 1 < ratio.low < 1.5 < ratio.high
    assert ratio.excludes_one()
    back = bootstrap.ratio(runs_around(1.5), runs_around(1.0))
    assert back.low == pytest.approx(1 / ratio.high) and back.high == pytest.approx(1 / ratio.low)


def test_times_the_fastest_is_one_for_the_fastest_and_an_interval_for_the_others():
    found = bootstrap.times_fastest(
        {"tf": runs_around(1.2), "torch": runs_around(1.0), "mx": runs_around(2.0)}
    )
    assert found["torch"].centre == 1.0 and not found["torch"].has_interval
    assert found["tf"].centre == pytest.approx(1.2) and found["tf"].excludes_one()
    assert found["mx"].centre == pytest.approx(2.0)


# --- tie groups and ranks


def test_separated_cells_get_groups_of_their_own_in_order():
    groups = ranking.tie_groups({"slow": runs_around(2.0), "fast": runs_around(1.0), "mid": runs_around(1.4)})
    assert groups == [["fast"], ["mid"], ["slow"]]
    assert ranking.rank_labels(groups) == {"fast": "1", "mid": "2", "slow": "3"}


def test_cells_of_one_distribution_are_one_group():
    rng = random.Random(7)
    cells = {name: drawn(rng) for name in ("pytorch", "tensorflow", "mxnet", "jax")}
    assert len(ranking.tie_groups(cells)) == 1
    # The same runs, reordered, under two names: the same cell, a tie whatever the seed.
    same = {"a": cells["mxnet"], "b": cells["mxnet"][::-1]}
    for seed in range(5):
        assert len(ranking.tie_groups(same, seed=seed)) == 1


def test_two_tied_then_one_apart_are_ranked_one_equal_and_three():
    cells = {"c": runs_around(1.5), "a": runs_around(1.0), "b": runs_around(1.001)}
    groups = ranking.tie_groups(cells)
    assert [sorted(g) for g in groups] == [["a", "b"], ["c"]]
    assert ranking.rank_labels(groups) == {"a": "1=", "b": "1=", "c": "3"}
    assert ranking.ranks(groups) == {"a": 1, "b": 1, "c": 3}


def test_the_groups_do_not_depend_on_the_order_given():
    rng = random.Random(11)
    cells = {name: drawn(rng, cv=0.05) for name in "abcdef"}
    cells["g"] = [[f * 1.3 for f in run] for run in drawn(rng)]
    first = ranking.tie_groups(cells, seed=4)
    names = list(cells)
    random.Random(0).shuffle(names)
    assert ranking.tie_groups({k: cells[k] for k in names}, seed=4) == first
    assert first[-1] == ["g"]


def test_few_runs_of_one_distribution_are_never_split_where_the_interval_alone_would():
    # The percentile interval alone splits such pairs 32 % of the time at 2 runs a side and 10 % at
    # 3 (docs/reports.md); the exact test cannot reach 5 % there, so the rule never splits them.
    rng = random.Random(21)
    for n in (2, 3):
        pairs = [{"a": drawn(rng, n=n), "b": drawn(rng, n=n)} for _ in range(60)]
        assert sum(bootstrap.ratio(p["a"], p["b"], seed=i).excludes_one() for i, p in enumerate(pairs)) > 0
        assert all(len(ranking.tie_groups(p, seed=i, resamples=500)) == 1 for i, p in enumerate(pairs))


def test_a_real_difference_is_split_at_enough_runs():
    rng = random.Random(5)
    found = 0
    for i in range(40):
        slow = [[f * 1.10 for f in run] for run in drawn(rng, n=6, cv=0.03)]
        found += ranking.tie_groups(
            {"fast": drawn(rng, n=6, cv=0.03), "slow": slow}, seed=i, resamples=500
        ) == [
            ["fast"],
            ["slow"],
        ]
    assert found >= 32  # 80 % of the trials


def test_one_run_cells_are_never_told_apart():
    assert ranking.tie_groups({"a": [1.0], "b": [5.0]}) == [["a", "b"]]


def test_kendall_tau_b_with_ties_against_a_hand_computation():
    # Pairs: ab tied in the first, bc tied in the second, the other four concordant:
    # (4 − 0) / √((6 − 1)(6 − 1)) = 0.8.
    first = {"a": 1, "b": 1, "c": 3, "d": 4}
    second = {"a": 1, "b": 2, "c": 2, "d": 4}
    assert ranking.kendall_tau_b(first, second) == pytest.approx(0.8)
    # No ties, ab and cd swapped: (4 − 2) / 6.
    assert ranking.kendall_tau_b({"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 2, "b": 1, "c": 4, "d": 3}) == (
        pytest.approx(1 / 3)
    )
    assert ranking.kendall_tau_b(first, {**first, "extra": 9}) == pytest.approx(1.0)
    with pytest.raises(StatsError, match="ties every item"):
        ranking.kendall_tau_b(first, {"a": 1, "b": 1, "c": 1, "d": 1})


# --- the test, the verdict and the corrections


def test_the_exact_mann_whitney_p_value_matches_counting_every_split():
    a, b = [1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]
    test = mannwhitney.mann_whitney(a, b)
    assert test.u == 6 and test.method == "Mann-Whitney U, exact"
    pooled = a + b
    us = [
        mannwhitney.u_statistic([pooled[i] for i in left], [pooled[i] for i in range(8) if i not in left])
        for left in itertools.combinations(range(8), 4)
    ]
    by_count = 2 * min(sum(u <= 6 for u in us), sum(u >= 6 for u in us)) / len(us)
    assert test.p_value == pytest.approx(by_count) == pytest.approx(48 / 70)
    assert mannwhitney.mann_whitney([1, 2, 3], [4, 5, 6]).p_value == pytest.approx(0.1)  # 2 / C(6, 3)
    tied = mannwhitney.mann_whitney([1.0, 2.0, 2.0], [2.0, 3.0, 4.0])
    assert "normal approximation" in tied.method and 0 < tied.p_value < 1


def test_verdicts_on_runs():
    slower = comparison.compare(runs_around(1.0, n=5), runs_around(1.2, n=5))
    assert slower.verdict == "slower" and slower.p_value == pytest.approx(2 / 252)
    assert comparison.compare(runs_around(1.2, n=5), runs_around(1.0, n=5)).verdict == "faster"
    same = comparison.compare(runs_around(1.0, n=5), runs_around(1.0, n=5))
    assert same.verdict == "no difference detected at n=5"
    assert same.detectable is not None and "could detect is" in same.detectable_text()
    # 3 runs against 3 can never reach 5 % (2 / C(6, 3) = 0.1): nothing detectable, said so.
    few = comparison.compare(runs_around(1.0, n=3), runs_around(2.0, n=3))
    assert few.verdict == "no difference detected at n=3" and few.detectable is None


def test_holm_and_benjamini_hochberg_on_a_hand_computed_case():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm, sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 → 0.06 (monotone).
    assert corrections.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH, times 4/1, 4/2, 4/3, 4/4: 0.02, 0.02, 0.04, 0.04.
    assert corrections.benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert corrections.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert corrections.correct(p, "bh")[0] == "Benjamini-Hochberg"


def test_a_table_of_comparisons_is_corrected_and_names_its_correction():
    apart = (runs_around(1.0, n=5), runs_around(1.2, n=5))
    table = comparison.compare_table([apart, apart, apart], correction="holm")
    assert [c.adjusted_p for c in table] == pytest.approx([3 * 2 / 252] * 3)
    assert all("Holm correction over 3 comparisons" in c.method for c in table)
    with pytest.raises(StatsError, match="no correction"):
        comparison.compare_table([apart], correction="bonferroni")


# --- planning


def test_runs_needed_follows_its_stated_formula():
    # σ² = ln(1 + 0.1²), δ = ln(1.05), z = 1.959964 + 0.841621; n = ⌈2 z² σ² / δ² · π/3⌉ = ⌈68.7⌉.
    z = 1.959964 + 0.841621
    by_hand = 2 * z**2 * math.log(1.01) / math.log(1.05) ** 2 * math.pi / 3
    assert planning.runs_needed(0.1) == math.ceil(by_hand) == 69
    assert planning.runs_needed(0.0) == planning.fewest_runs() == 4  # 2 / C(8, 4) < 5 % < 2 / C(6, 3)
    assert planning.runs_needed(0.05, difference=0.10) < planning.runs_needed(0.05)


def test_the_planned_runs_detect_the_difference_they_were_planned_for():
    for cv in (0.02, 0.05, 0.11):
        n = planning.runs_needed(cv)
        spread = math.sqrt(math.log1p(cv**2))
        assert planning.detectable(spread, n, n) <= 0.05
        fewer = planning.detectable(spread, n - 1, n - 1)
        assert n == planning.fewest_runs() or (fewer is not None and fewer > 0.05)
    assert planning.detectable(0.02, 3, 3) is None


def test_over_few_runs_the_plan_follows_the_exact_tests_power_not_the_formula():
    # 4 against 4 rejects only at U = 0 or U = 16 (p = 2/70 each side's extreme).
    assert [u for u, r in enumerate(mannwhitney.rejections(4, 4, 0.05)) if r] == [0, 16]
    assert exactpower.exact_power(4, 4, 0.0, 0.05) == pytest.approx(2 / 70, abs=0.01)  # its size
    assert exactpower.exact_power(4, 4, 50.0, 0.05) == 1.0
    # At CV 2 % the formula says 4 runs for 5 %, where the exact test's power is below 80 %: 5.
    shift = math.log(1.05) / math.sqrt(math.log1p(0.02**2))
    assert exactpower.exact_power(4, 4, shift, 0.05) < 0.8 <= exactpower.exact_power(5, 5, shift, 0.05)
    assert planning.runs_needed(0.02) == 5


def test_the_between_run_spread_is_pooled_within_cells():
    # Logs ±0.1 around each cell's own centre: σ² = 0.02 in each, whatever the centres.
    cells = [[math.exp(-0.1), math.exp(0.1)], [3 * math.exp(-0.1), 3 * math.exp(0.1)], [5.0]]
    assert planning.between_run_cv(cells) == pytest.approx(math.sqrt(math.expm1(0.02)))
    assert planning.between_run_cv([[1.0], [2.0]]) is None


# --- hostile input


@pytest.mark.parametrize(
    "runs",
    [[], [float("nan")], [-1.0], [float("inf")], [0.0], [[1.0, float("nan")]], [[]], ["1.0"], [True], "abc"],
    ids=["empty", "nan", "negative", "inf", "zero", "nan-epoch", "empty-run", "text", "bool", "string"],
)
def test_hostile_figures_are_refused_in_one_line(runs):
    with pytest.raises(StatsError) as caught:
        bootstrap.cell_estimate(runs)
    assert "\n" not in str(caught.value) and str(caught.value)
    with pytest.raises(StatsError):
        ranking.tie_groups({"good": runs_around(1.0), "bad": runs})


@pytest.mark.parametrize(
    "call",
    [
        lambda: corrections.holm([0.1, float("nan")]),
        lambda: corrections.benjamini_hochberg([1.5]),
        lambda: planning.runs_needed(float("inf")),
        lambda: planning.runs_needed(-0.1),
        lambda: planning.runs_needed(0.1, difference=0),
        lambda: planning.runs_needed(5.0, difference=0.001),
        lambda: ranking.kendall_tau_b({"a": 1}, {"a": 1}),
        lambda: ranking.kendall_tau_b({"a": float("nan"), "b": 1}, {"a": 1, "b": 2}),
        lambda: bootstrap.times_fastest({}),
        lambda: bootstrap.cell_estimate([1.0, 2.0], level=1.5),
    ],
    ids=[
        "holm-nan",
        "bh-above-one",
        "cv-inf",
        "cv-negative",
        "zero-difference",
        "hopeless",
        "one-item",
        "nan-rank",
        "no-cells",
        "level",
    ],
)
def test_other_hostile_input_is_refused_in_one_line(call):
    with pytest.raises(StatsError) as caught:
        call()
    assert "\n" not in str(caught.value)

"""Rankings that call ties ties: the ordered groups of cells that cannot be told apart, their rank
labels ("1=", "3"), and Kendall's τ-b between two rankings with ties.

The rule. Cells are sorted by figure, fastest first (equal figures: by their contents, then their
key, so the order does not depend on the order they were given in). Walking down, the next cell
joins the current group unless it is told apart from **every** cell already in the group, "told
apart" meaning both that the 95 % bootstrap interval of their ratio (bootstrap.ratio) excludes 1
and that the exact Mann–Whitney test on their runs (mannwhitney.py) gives p < 5 %.

Why both: the test is exact, so two cells of one distribution are split at most 5 % of the time
at any n, where the percentile interval alone splits them far more often over few runs (a
simulation, docs/reports.md: 32 % at 2 runs a side, 10 % at 3, 8.5 % at 4); the interval keeps the
groups consistent with the "× the fastest" a table prints beside them (no cut where the printed
interval holds 1). A cell with one run, or 3 against 3, can therefore never be told apart.

Why this rule: a cut between two groups is a claim, "every cell above is faster than this one", so
a cut is only made where the runs support it against each cell of the group above; a chain of
cells each within the noise of the next stays one group, even when its ends differ, because no
single cut along it can be defended. The price is groups wider than a pairwise view would draw;
the gain is that no table built on the groups calls a cell faster than one it could not be told
apart from at the group's boundary. Each pair's interval depends on the two cells' contents and
the seed only (sample.content_seed), so the groups are deterministic and order-independent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from orchestrator.errors import StatsError
from orchestrator.stats import bootstrap, mannwhitney, sample


def tie_groups(
    cells: Mapping[str, Sequence[sample.RunLike]],
    seed: int = 0,
    resamples: int = bootstrap.RESAMPLES,
    level: float = bootstrap.LEVEL,
) -> list[list[str]]:
    """The cells' keys as an ordered list of groups, fastest group first (rule: the module's
    docstring)."""
    checked = bootstrap.checked_cells(cells)
    order = sorted(checked, key=lambda k: (sample.cell_figure(checked[k]), checked[k], k))

    def apart(a: sample.Cell, b: sample.Cell) -> bool:
        test = mannwhitney.mann_whitney(sample.figures(a), sample.figures(b))
        return test.p_value < 1 - level and bootstrap.ratio(a, b, seed, resamples, level).excludes_one()

    groups: list[list[str]] = [[order[0]]]
    for key in order[1:]:
        if all(apart(checked[member], checked[key]) for member in groups[-1]):
            groups.append([key])
        else:
            groups[-1].append(key)
    return groups


def ranks(groups: Sequence[Sequence[str]]) -> dict[str, int]:
    """Each key's rank: 1 + the number of cells in the groups above (standard competition ranking:
    two cells sharing first place are both 1, the next is 3)."""
    found: dict[str, int] = {}
    above = 0
    for group in groups:
        for key in group:
            found[key] = above + 1
        above += len(group)
    return found


def rank_labels(groups: Sequence[Sequence[str]]) -> dict[str, str]:
    """Each key's label: its rank, with "=" where it shares the group ("1=", "1=", "3")."""
    sizes = {key: len(group) for group in groups for key in group}
    return {key: f"{rank}=" if sizes[key] > 1 else str(rank) for key, rank in ranks(groups).items()}


def _finite(ranking: Mapping[str, float], which: str) -> None:
    for key, value in ranking.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise StatsError(f"ranking {which}: {key!r} has rank {value!r}, not a finite number")


def kendall_tau_b(first: Mapping[str, float], second: Mapping[str, float]) -> float:
    """Kendall's τ-b between two rankings (key → rank; equal ranks are ties) over the keys both
    hold: (concordant − discordant) / √((n0 − ties in first)(n0 − ties in second)), n0 the pairs.
    τ-b, not τ-a, because tie groups make ties the rule: τ-b is 1 for two rankings that agree,
    ties included."""
    _finite(first, "1")
    _finite(second, "2")
    keys = sorted(set(first) & set(second))
    if len(keys) < 2:
        raise StatsError(f"Kendall's tau-b needs at least 2 items in both rankings, not {len(keys)}")
    concordant = discordant = tied_first = tied_second = pairs = 0
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            pairs += 1
            one = first[a] - first[b]
            two = second[a] - second[b]
            tied_first += one == 0
            tied_second += two == 0
            if one * two > 0:
                concordant += 1
            elif one * two < 0:
                discordant += 1
    denominator = math.sqrt((pairs - tied_first) * (pairs - tied_second))
    if denominator == 0:
        raise StatsError("Kendall's tau-b is undefined where one ranking ties every item")
    return (concordant - discordant) / denominator

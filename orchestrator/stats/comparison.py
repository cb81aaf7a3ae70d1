"""One comparison of two configurations on their runs (B against A), and a table of them with a
correction for multiple comparisons.

Each comparison carries B/A with its bootstrap interval (bootstrap.ratio), the Mann–Whitney test's
p-value on the runs' figures (mannwhitney.py), the smallest difference these runs could detect
(planning.detectable: 5 % level, 80 % power, from the two cells' pooled spread) and the verdict:
"faster" or "slower" (B against A) where the p-value, corrected when there is a table, is below 5 %,
otherwise "no difference detected at n=…". The verdict rests on the test alone; the interval says
how large the difference is, and the two agree in all but borderline cases (they are different
methods), which is why one of them, the test, decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from orchestrator.stats import bootstrap, corrections, mannwhitney, planning, sample


@dataclass(frozen=True)
class Comparison:
    ratio: bootstrap.Ratio  # B/A
    p_value: float  # the test's own
    adjusted_p: float  # after the table's correction (the same where there is none)
    method: str  # the test, and the correction where there is one
    detectable: float | None  # the smallest relative difference these runs could detect
    alpha: float = planning.ALPHA

    @property
    def n(self) -> str:
        """The runs it rests on: "5", or "5/4" where the sides differ."""
        a, b = self.ratio.n_a, self.ratio.n_b
        return str(a) if a == b else f"{a}/{b}"

    @property
    def verdict(self) -> str:
        if self.adjusted_p < self.alpha:
            return "faster" if self.ratio.centre < 1 else "slower"
        return f"no difference detected at n={self.n}"

    def detectable_text(self) -> str:
        """What the runs could have seen, as a sentence's end."""
        if self.detectable is None:
            return f"at n={self.n} no difference could be detected (too few runs, or no spread known)"
        return f"the smallest difference these runs could detect is {self.detectable:.1%}"


def compare(
    a: Sequence[sample.RunLike],
    b: Sequence[sample.RunLike],
    seed: int = 0,
    resamples: int = bootstrap.RESAMPLES,
    alpha: float = planning.ALPHA,
) -> Comparison:
    """B against A on their runs (no correction: one comparison)."""
    cell_a, cell_b = sample.cell(a, "cell A"), sample.cell(b, "cell B")
    test = mannwhitney.mann_whitney(sample.figures(cell_a), sample.figures(cell_b))
    spread = planning.log_spread([cell_a, cell_b])
    return Comparison(
        ratio=bootstrap.ratio(cell_a, cell_b, seed, resamples),
        p_value=test.p_value,
        adjusted_p=test.p_value,
        method=test.method,
        detectable=planning.detectable(spread, len(cell_a), len(cell_b), alpha),
        alpha=alpha,
    )


def compare_table(
    pairs: Sequence[tuple[Sequence[sample.RunLike], Sequence[sample.RunLike]]],
    correction: str = "holm",
    seed: int = 0,
    resamples: int = bootstrap.RESAMPLES,
    alpha: float = planning.ALPHA,
) -> list[Comparison]:
    """Each (A, B) pair compared, the p-values corrected together by `correction` ("holm" or
    "bh", corrections.py), whose name each comparison's method then carries."""
    found = [compare(a, b, seed, resamples, alpha) for a, b in pairs]
    if not found:
        return []
    name, adjusted = corrections.correct([c.p_value for c in found], correction)
    return [
        replace(c, adjusted_p=p, method=f"{c.method}; {name} correction over {len(found)} comparisons")
        for c, p in zip(found, adjusted, strict=True)
    ]

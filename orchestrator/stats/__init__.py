"""Statistics over independent runs: a cell's figure and interval, ratios, tie groups, verdicts.

The unit is the run, one worker process: each lands on a speed of its own (docs/performance.md), so
a figure a reader will compare rests on several runs, and carries the interval and the n it rests
on. Figures are times per unit of work (seconds per image): lower is faster. Every function is pure
and deterministic given its seed; every value is checked as outside input (a row of a shared
database) and refused in one line (errors.StatsError). Methods and why: docs/reports.md,
"Statistics over runs".

    sample.py       a cell's runs checked, a run's and a cell's figure (medians), the content seed
    bootstrap.py    the hierarchical percentile bootstrap: a cell's interval, B/A, × the fastest
    ranking.py      tie groups (cells that cannot be told apart), rank labels, Kendall's tau-b
    mannwhitney.py  the two-sided Mann-Whitney U test on runs (exact for small n)
    comparison.py   B against A: ratio, p-value, verdict, the smallest detectable difference
    corrections.py  Holm and Benjamini-Hochberg, for a table of comparisons
    planning.py     runs needed for a difference at a between-run spread, and the reverse
    exactpower.py   the exact test's power over few runs (simulated), which planning.py uses there

May import: numpy and the standard library; of bench, errors.py only (report, sweep and cli import it).
"""

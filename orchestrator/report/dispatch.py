"""What `bench report` prints for its options: which report, over which sweeps and runs.

The results, crash and resources reports read one sweep; the research's tables (report_tables)
read any number; `--compare` reads exactly two. Option clashes are ConfigErrors, so the CLI stays
a thin shell over this function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from orchestrator.errors import ConfigError
from orchestrator.report import resources as report_resources
from orchestrator.report import results as reports
from orchestrator.report.compare import compare as compare_sweeps
from orchestrator.report.select import ALL, Selection, parse_sweeps, parse_where, selection
from orchestrator.report.tables import Table, accuracy, comparison, render_table
from orchestrator.report.throughput import batch, inference
from orchestrator.storage.db import Database

TABLES = ("results", "comparison", "batch", "inference", "accuracy", "resources")
BUILDERS: dict[str, Callable[[Database, Selection], Table]] = {
    "comparison": comparison,
    "batch": batch,
    "inference": inference,
    "accuracy": accuracy,
}
ONE_SWEEP = ("results", "resources")


def single_sweep(sweeps: Sequence[str], what: str) -> int | None:
    """The one sweep id of `--sweep` (None: the latest) for a report that reads one sweep."""
    wanted = parse_sweeps(sweeps)
    if wanted == ALL or (isinstance(wanted, list) and len(wanted) > 1):
        raise ConfigError(f"{what} reads one sweep; for several use --table comparison, batch or accuracy")
    return wanted[0] if isinstance(wanted, list) else None


def _check(table: str, crashes: bool, resources: bool, group_by: str | None) -> str:
    if resources and table not in ("results", "resources"):
        raise ConfigError(f"--resources is --table resources: it does not combine with --table {table}")
    table = "resources" if resources else table
    if crashes and table != "results":
        raise ConfigError(f"--crashes lists failed runs: it does not combine with --table {table}")
    if group_by and table != "resources":
        raise ConfigError("--group-by only applies with --resources (--table resources)")
    return table


def report(
    db: Database,
    table: str = "results",
    sweeps: Sequence[str] = (),
    where: str | None = None,
    fmt: str = "table",
    crashes: bool = False,
    resources: bool = False,
    group_by: str | None = None,
    compare: tuple[int, int] | None = None,
) -> str:
    table = _check(table, crashes, resources, group_by)
    if compare:
        if sweeps or table != "results" or crashes:
            raise ConfigError("--compare A B names its two sweeps: leave out --sweep, --table and --crashes")
        return render_table(compare_sweeps(db, compare[0], compare[1], parse_where(where)), fmt)
    if table in BUILDERS:
        return render_table(BUILDERS[table](db, selection(db, sweeps, where)), fmt)
    option = "--resources" if table == "resources" else ("--crashes" if crashes else "the results table")
    sweep_id = single_sweep(sweeps, option)
    if table == "resources":
        return report_resources.resources(db, sweep_id, fmt, group_by, parse_where(where))
    return reports.results(db, sweep_id, fmt, crashes, parse_where(where))

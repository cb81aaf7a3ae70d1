"""What `bench report` prints for its options, and which options clash: the one place that decides.

REPORTS lists the reports, each with the options it takes; `choose` picks the one the options ask
for; CLASHES, checked in order, are the combinations refused, each with its one-line message (a
ConfigError: the CLI makes it one line and exit status 1). The CLI (cli/report.py) only gathers
the options and prints what `report` returns.

The results, crash and resources reports read one sweep; the research's tables, --kernels and
--html read any number; --compare A B reads exactly the two sweeps it names, and --compare
version:A version:B the runs of two framework releases in any number (all by default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.report.notes import calibration
from orchestrator.report.postmortem.crashes import crashes
from orchestrator.report.query.select import ALL, Selection, parse_sweeps, parse_where, selection
from orchestrator.report.query.versions import Release
from orchestrator.report.tables import kernels, resources, results
from orchestrator.report.tables.accuracy import accuracy
from orchestrator.report.tables.base import Table, render_table
from orchestrator.report.tables.batch import batch
from orchestrator.report.tables.compare import compare as compare_sweeps
from orchestrator.report.tables.compare_versions import compare_versions
from orchestrator.report.tables.comparison import comparison
from orchestrator.report.tables.inference import inference
from orchestrator.report.tables.modes import modes
from orchestrator.report.tables.scaling import scaling
from orchestrator.report.tables.versions import versions
from orchestrator.storage.db import Database

TABLES = (
    "results",
    "comparison",
    "batch",
    "inference",
    "accuracy",
    "modes",
    "scaling",
    "versions",
    "resources",
)
# The research's tables (--table NAME): any number of sweeps, pooled per configuration and machine.
BUILDERS: dict[str, Callable[[Database, Selection], Table]] = {
    "comparison": comparison,
    "batch": batch,
    "inference": inference,
    "accuracy": accuracy,
    "modes": modes,
    "scaling": scaling,
    "versions": versions,
}


@dataclass(frozen=True)
class Options:
    """`bench report`'s options as given; the defaults are the command line's."""

    table: str = "results"
    fmt: str = "table"
    sweeps: tuple[str, ...] = ()
    where: str | None = None
    crashes: bool = False
    resources: bool = False
    group_by: str | None = None
    compare: tuple[int | Release, int | Release] | None = None
    html_dir: str | None = None
    timeline_config: str | None = None
    kernels: bool = False

    @property
    def table_asked(self) -> str:
        """The table wanted: --resources is --table resources."""
        return "resources" if self.resources else self.table

    def given(self) -> set[str]:
        """The options given other than at their defaults. An empty value (`--group-by ""`) counts
        as not given, as these checks have always read it."""
        return {f.name for f in fields(self) if getattr(self, f.name) and getattr(self, f.name) != f.default}


# A report made: from the open database, the options and, for a one-sweep report, its sweep id.
Make = Callable[[Database, Options, int | None], str]


@dataclass(frozen=True)
class Report:
    """One report: the options it reads, how it is made, and, for a report of one sweep, how the
    message that refuses several names it (None: it reads any number of sweeps)."""

    takes: frozenset[str]
    make: Make
    one_sweep: str | None = None


def _results(db: Database, o: Options, sweep_id: int | None) -> str:
    return results.results(db, sweep_id, o.fmt, parse_where(o.where))


def _crashes(db: Database, o: Options, sweep_id: int | None) -> str:
    return crashes(db, sweep_id, o.fmt, parse_where(o.where))


def _resources(db: Database, o: Options, sweep_id: int | None) -> str:
    return resources.resources(db, sweep_id, o.fmt, o.group_by, parse_where(o.where))


def _calibrated(db: Database, table: Table) -> Table:
    """The table with the notes on its sweeps' calibrations (notes/calibration.py)."""
    table.notes += calibration.notes(db, [s["id"] for s in table.sweeps])
    return table


def _research_table(db: Database, o: Options, _: int | None) -> str:
    return render_table(_calibrated(db, BUILDERS[o.table](db, selection(db, o.sweeps, o.where))), o.fmt)


def _compare(db: Database, o: Options, _: int | None) -> str:
    assert o.compare is not None  # choose() picks this report only then
    a, b = o.compare
    assert isinstance(a, int) and isinstance(b, int)  # CLASHES refuse a sweep against a release
    table = compare_sweeps(db, a, b, parse_where(o.where))
    return render_table(_calibrated(db, table), o.fmt)


def _compare_versions(db: Database, o: Options, _: int | None) -> str:
    assert o.compare is not None
    a, b = o.compare
    assert isinstance(a, Release) and isinstance(b, Release)
    # A release's runs are wherever they were made: every sweep unless --sweep names some.
    table = compare_versions(db, selection(db, o.sweeps or (ALL,), o.where), a, b)
    return render_table(_calibrated(db, table), o.fmt)


def _kernels(db: Database, o: Options, _: int | None) -> str:
    return kernels.report(db, o.sweeps, o.where, o.fmt)


def _html(db: Database, o: Options, _: int | None) -> str:
    from orchestrator.report.html import page  # matplotlib: imported only when a page is wanted

    assert o.html_dir is not None  # CLASHES refuse --timeline-config without it
    return str(page.write(db, selection(db, o.sweeps, o.where), Path(o.html_dir), o.timeline_config))


def _takes(*names: str) -> frozenset[str]:
    return frozenset(("sweeps", "where", *names))


REPORTS: dict[str, Report] = {
    # --timeline-config is taken, and not read, by --kernels: it has never been refused there.
    "kernels": Report(_takes("kernels", "fmt", "timeline_config"), _kernels),
    "html": Report(_takes("html_dir", "timeline_config"), _html),
    "compare": Report(frozenset(("compare", "where", "fmt")), _compare),
    "compare_versions": Report(_takes("compare", "fmt"), _compare_versions),
    "resources": Report(_takes("resources", "table", "group_by", "fmt"), _resources, "--resources"),
    **{name: Report(_takes("table", "fmt"), _research_table) for name in BUILDERS},
    "crashes": Report(_takes("crashes", "fmt"), _crashes, "--crashes"),
    "results": Report(_takes("fmt"), _results, "the results table"),
}


def choose(o: Options) -> str:
    """The report the options ask for: the first of --kernels, --html (or --timeline-config),
    --compare, --table (or --resources), --crashes; else the results table."""
    if o.kernels:
        return "kernels"
    if o.html_dir is not None or o.timeline_config is not None:
        return "html"
    if o.compare:
        return "compare_versions" if isinstance(o.compare[0], Release) else "compare"
    if o.table_asked != "results":
        return o.table_asked
    return "crashes" if o.crashes else "results"


def refused(o: Options, report: str) -> set[str]:
    """The options given that the report does not take."""
    return o.given() - REPORTS[report].takes


@dataclass(frozen=True)
class Clash:
    """A combination refused: `applies(options, chosen report)`; the message may name {table}."""

    applies: Callable[[Options, str], bool]
    message: str


# In order: the first that applies is the message. --kernels and --html refuse whatever they do not
# take before the rules between the table reports' options are asked; --compare refuses last.
CLASHES: tuple[Clash, ...] = (
    Clash(
        lambda o, r: o.crashes and o.resources,
        "--crashes and --resources are two different reports: choose one",
    ),
    Clash(
        lambda o, r: r == "kernels" and bool(refused(o, r)),
        "--kernels is a report of its own: it combines only with --sweep, --where and --format",
    ),
    Clash(lambda o, r: r == "html" and o.html_dir is None, "--timeline-config only applies with --html DIR"),
    Clash(
        lambda o, r: r == "html" and bool(refused(o, r)),
        "--html writes the whole page (tables, plots, crash list): leave out --crashes, --resources, "
        "--table, --group-by, --compare and --format",
    ),
    Clash(
        lambda o, r: o.resources and o.table not in ("results", "resources"),
        "--resources is --table resources: it does not combine with --table {table}",
    ),
    Clash(
        lambda o, r: o.crashes and o.table != "results",
        "--crashes lists failed runs: it does not combine with --table {table}",
    ),
    Clash(
        lambda o, r: bool(o.group_by) and o.table_asked != "resources",
        "--group-by only applies with --resources (--table resources)",
    ),
    Clash(
        lambda o, r: o.compare is not None and len({type(side) for side in o.compare}) > 1,
        "--compare takes two sweeps (3 5) or two releases (version:2.4.1 version:2.5.0), not one of each",
    ),
    Clash(
        lambda o, r: r == "compare" and bool(refused(o, r)),
        "--compare A B names its two sweeps: leave out --sweep, --table and --crashes",
    ),
    Clash(
        lambda o, r: r == "compare_versions" and bool(refused(o, r)),
        "--compare version:A version:B reads --sweep (default: all), --where and --format: leave out "
        "--table and --crashes",
    ),
)


def check(o: Options) -> str:
    """The report the options ask for, or the ConfigError of the first combination refused."""
    report = choose(o)
    for clash in CLASHES:
        if clash.applies(o, report):
            raise ConfigError(clash.message.format(table=o.table))
    return report


def single_sweep(sweeps: Sequence[str], what: str) -> int | None:
    """The one sweep id of `--sweep` (None: the latest) for a report that reads one sweep."""
    wanted = parse_sweeps(sweeps)
    if wanted == ALL or (isinstance(wanted, list) and len(wanted) > 1):
        several = "--table comparison, batch, accuracy or modes"
        raise ConfigError(f"{what} reads one sweep; for several use {several}")
    return wanted[0] if isinstance(wanted, list) else None


def report(db_url: str, o: Options) -> str:
    """`bench report`: the options checked (before the database is opened), the report made."""
    chosen = REPORTS[check(o)]
    db = Database(db_url, create=False)
    sweep_id = single_sweep(o.sweeps, chosen.one_sweep) if chosen.one_sweep else None
    return chosen.make(db, o, sweep_id)

"""report/dispatch.py: which report `bench report` prints for its options, and which options clash.

The decision needs no database: these tests ask it directly, then through the CLI (refused before
the database is opened, so no database is needed either)."""

from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.report.dispatch import BUILDERS, REPORTS, TABLES, Options, check, choose
from orchestrator.report.query.versions import Release

KERNELS = "--kernels is a report of its own: it combines only with --sweep, --where and --format"
HTML = "--html writes the whole page (tables, plots, crash list): leave out --crashes, --resources, "
COMPARE = "--compare A B names its two sweeps: leave out --sweep, --table and --crashes"
GROUP_BY = "--group-by only applies with --resources (--table resources)"
RESOURCES = "--resources is --table resources: it does not combine with --table"
CRASHES = "--crashes lists failed runs: it does not combine with --table"
BOTH = "--crashes and --resources are two different reports: choose one"
RELEASES = (Release("1.8.0"), Release("1.9.1"))
MIXED = "--compare takes two sweeps (3 5) or two releases (version:2.4.1 version:2.5.0), not one of each"
COMPARE_VERSIONS = "--compare version:A version:B reads --sweep (default: all), --where and --format"


@pytest.mark.parametrize(
    "options,report",
    [
        (Options(), "results"),
        (Options(crashes=True, sweeps=("3",)), "crashes"),
        (Options(resources=True, group_by="framework"), "resources"),
        (Options(table="resources", fmt="csv"), "resources"),
        (Options(table="batch", sweeps=("all",), where="device=cpu"), "batch"),
        (Options(compare=(1, 2), fmt="json", where="model=alexnet"), "compare"),
        (Options(compare=RELEASES, fmt="csv", sweeps=("3,5",), where="framework=jax"), "compare_versions"),
        (Options(table="versions", sweeps=("all",)), "versions"),
        (Options(kernels=True, sweeps=("3,5",), fmt="markdown"), "kernels"),
        (Options(html_dir="site", timeline_config="batch_size=8", sweeps=("3",)), "html"),
    ],
)
def test_the_report_the_options_ask_for(options, report):
    assert choose(options) == check(options) == report
    assert options.given() <= REPORTS[report].takes


@pytest.mark.parametrize(
    "options,message",
    [
        (Options(crashes=True, resources=True), BOTH),
        (Options(kernels=True, crashes=True, resources=True), BOTH),
        (Options(kernels=True, group_by="framework"), KERNELS),
        (Options(kernels=True, html_dir="site"), KERNELS),
        (Options(kernels=True, table="batch"), KERNELS),
        (Options(timeline_config="batch_size=8"), "--timeline-config only applies with --html DIR"),
        (Options(html_dir="site", fmt="csv"), HTML),
        (Options(html_dir="site", compare=(1, 2)), HTML),
        (
            Options(resources=True, table="batch"),
            f"{RESOURCES} batch",
        ),
        (
            Options(crashes=True, table="accuracy"),
            f"{CRASHES} accuracy",
        ),
        (Options(group_by="framework"), GROUP_BY),
        (Options(group_by="framework", table="comparison"), GROUP_BY),
        (Options(compare=(1, 2), sweeps=("3",)), COMPARE),
        (Options(compare=(1, 2), crashes=True), COMPARE),
        (Options(compare=(1, 2), resources=True), COMPARE),
        # Where two clashes apply, the order of CLASHES says which one is named.
        (Options(compare=(1, 2), table="batch", crashes=True), CRASHES),
        (Options(compare=(1, 2), group_by="framework"), GROUP_BY),
        (Options(kernels=True, group_by="framework", table="batch"), KERNELS),
        (Options(compare=(1, Release("1.9.1"))), MIXED),
        (Options(compare=(Release("1.9.1"), 2), sweeps=("3",)), MIXED),
        (Options(compare=RELEASES, table="versions"), COMPARE_VERSIONS),
        (Options(compare=RELEASES, crashes=True), COMPARE_VERSIONS),
    ],
)
def test_each_clash_is_its_own_message(options, message):
    with pytest.raises(ConfigError) as refused:
        check(options)
    assert str(refused.value).startswith(message), refused.value


def test_every_table_is_a_report():
    assert set(TABLES) - {"results"} == set(BUILDERS) | {"resources"}
    assert set(TABLES) <= set(REPORTS)


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ("--crashes", "--resources"),
            f"error: {BOTH}",
        ),
        (("--group-by", "framework"), f"error: {GROUP_BY}"),
        (
            ("--resources", "--table", "inference"),
            f"error: {RESOURCES} inference",
        ),
        (("--kernels", "--compare", "1", "2"), f"error: {KERNELS}"),
        (("--compare", "3", "version:1.9.1"), f"error: {MIXED}"),
    ],
)
def test_the_cli_refuses_a_clash_in_one_line_before_opening_the_database(workdir, cli, args, message):
    result = cli("report", *args)
    assert result.exit_code == 1 and result.output.strip() == message
    assert not (workdir / "bench.db").exists()

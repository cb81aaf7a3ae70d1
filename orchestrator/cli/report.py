"""`bench report`, `bench inspect` and `bench timeline`: what the database holds, read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.options import (
    IdType,
    db_option,
    echo,
)
from orchestrator.report import dispatch
from orchestrator.report.postmortem import inspect as postmortem
from orchestrator.report.query.versions import Release, parse_side

# The module as timeline_report: `timeline` is the command below.
from orchestrator.report.tables import timeline as timeline_report
from orchestrator.storage.db import Database
from orchestrator.text.formats import FORMATS


class CompareSide(click.ParamType):
    """A side of --compare: a sweep id, or version:V (a framework release the runs recorded)."""

    name = "side"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | Release:
        if isinstance(value, int | Release) and not isinstance(value, bool):
            return value  # a caller's own
        return parse_side(value if isinstance(value, str) else "a non-text value")


@click.command()
@click.option("--crashes", is_flag=True, help="Only configurations that did not end ok, with where and why.")
@click.option(
    "--resources",
    is_flag=True,
    help="The profiler's summary per configuration (CPU %, threads, RSS, GPU), then the "
    "multi-threading and batch-size comparisons.",
)
@click.option(
    "--group-by",
    default=None,
    metavar="KEY[,KEY]",
    help="With --resources: group the comparisons by these fields "
    "(default framework,model,device,batch_size,threads; each drops the axis it compares).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="table: aligned text; markdown: a GitHub table; csv and json: every column, for other tools.",
)
@click.option(
    "--table",
    type=click.Choice(dispatch.TABLES),
    default="results",
    show_default=True,
    help="results: one row per configuration; comparison: framework rows, model × device columns, "
    "seconds per epoch; batch: images/s and ms/image by batch size; accuracy: validation accuracy "
    "at epochs 5, 10, … by optimizer and lr; modes: ms/step, speed-up over the framework's eager fp32, "
    "compile seconds and time to target by execution mode and precision; versions: ms/image per "
    "framework release the runs recorded, and the releases where it changed beyond the noise; "
    "resources: as --resources (docs/reports.md, The tables).",
)
@click.option(
    "--where",
    default=None,
    metavar="KEY=VALUE[,KEY=VALUE]",
    help="Only configurations with these settings (a key given twice accepts either value).",
)
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="ID[,ID]|all",
    help="Sweeps to read (repeatable, or comma-separated, or all; default: the latest). "
    "results, --crashes and --resources read one.",
)
@click.option(
    "--compare",
    nargs=2,
    type=CompareSide(),
    default=None,
    metavar="SWEEP_A SWEEP_B",
    help="Per configuration in both sweeps: epoch seconds and peak RSS of each, B/A, and "
    "faster/slower where the difference exceeds the noise. Two releases of a framework as its "
    "runs recorded them: --compare version:0.4.30 version:0.4.35 (reads --sweep, default all).",
)
@click.option(
    "--html",
    "html_dir",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write one self-contained page of plots and tables to DIR/index.html (the plots also as "
    "DIR/plots/*.png); reads --sweep and --where. Example: bench report --html site/ --sweep 3",
)
@click.option(
    "--timeline-config",
    default=None,
    metavar="KEY=VALUE[,KEY=VALUE]",
    help="With --html: the configuration whose resource timelines the page draws, per framework "
    "(default: the one most frameworks ran ok). Example: --timeline-config model=resnet50,batch_size=32",
)
@click.option(
    "--kernels",
    is_flag=True,
    help="Where traced runs' time went (trace: kernels): per framework, time by kernel class side by "
    "side, GEMM tiles, top names (docs/kernels.md). Example: bench report --kernels --where model=alexnet",
)
@db_option
def report(
    crashes: bool,
    resources: bool,
    group_by: str | None,
    fmt: str,
    table: str,
    where: str | None,
    sweeps: tuple[str, ...],
    compare: tuple[int | Release, int | Release] | None,
    html_dir: str | None,
    timeline_config: str | None,
    kernels: bool,
    db_url: str,
) -> None:
    """One row per configuration: outcome, median epoch seconds, images/s, time per image;
    or, with --table, the research's comparison, batch-size, accuracy and modes tables.

    \b
    Examples:
      bench report
      bench report --crashes
      bench report --format markdown > results.md
      bench report --resources
      bench report --resources --group-by framework,batch_size --format csv
      bench report --table comparison --sweep all
      bench report --table batch --where framework=mxnet,device=cpu --format csv
      bench report --table accuracy --sweep 3,5
      bench report --table modes --format markdown
      bench report --compare 3 5
      bench report --compare version:0.4.30 version:0.4.35 --where framework=jax
      bench report --table versions --sweep all
      bench report --html report/ --sweep 3
      bench report --kernels --where framework=pytorch,framework=tensorflow
    """
    options = dispatch.Options(
        table=table,
        fmt=fmt,
        sweeps=sweeps,
        where=where,
        crashes=crashes,
        resources=resources,
        group_by=group_by,
        compare=compare or None,
        html_dir=html_dir,
        timeline_config=timeline_config,
        kernels=kernels,
    )
    echo(dispatch.report(db_url, options), markdown=fmt == "markdown")


@click.command()
@click.argument("run_id", type=IdType("inspect RUN_ID"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: for reading; json: every recorded field of the run, for other tools.",
)
@click.option(
    "--plot",
    "plot_path",
    default=None,
    metavar="FILE.png",
    type=click.Path(dir_okay=False),
    help="Also draw the run's resource timeline to FILE.png: CPU %, threads, RSS against time, phases "
    "shaded, how it ended marked. Example: bench inspect 12 --plot run12.png",
)
@db_option
def inspect(run_id: int, fmt: str, plot_path: str | None, db_url: str) -> None:
    """Post-mortem of run RUN_ID: configuration, outcome and evidence, resources and the last samples
    before the end, logs, environment, how to reproduce.

    \b
    Examples:
      bench inspect 12
      bench inspect 12 --plot run12.png
    """
    db = Database(db_url, create=False)
    if plot_path is not None:
        from orchestrator.report.html import figures_runs  # matplotlib: imported only for a plot

        figures_runs.plot_run(db, run_id, Path(plot_path))
        echo(f"timeline of run {run_id}: {plot_path}", err=True)
    data = postmortem.load_run(db, run_id)
    echo(json.dumps(data, indent=2, default=str) if fmt == "json" else postmortem.inspect_text(data))


@click.command()
@click.argument("run_id", type=IdType("timeline RUN_ID"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table: aligned text; csv and json: every column of the samples table, raw.",
)
@click.option("--phase", default=None, help="Only the samples taken in this phase (setup, epoch, eval, …).")
@db_option
def timeline(run_id: int, fmt: str, phase: str | None, db_url: str) -> None:
    """Every resource sample of run RUN_ID, in the order taken, for plotting.

    CSV and JSON carry every column of the samples table, raw: run_id; seq; t (seconds since the
    worker started); phase, repeat, epoch (where the worker was); cpu_percent (% of one core since
    the previous sample); cpu_percent_allowed (the same as % of the CPUs allowed); threads and
    processes (over the process tree); rss_bytes; uss_bytes (at most once a second, else empty);
    gpu_memory_bytes and gpu_util (% , empty without NVML); final (1: taken as the worker exited).

    \b
    Examples:
      bench timeline 12
      bench timeline 12 --format csv > run12.csv
      bench timeline 12 --format json --phase epoch
    """
    db = Database(db_url, create=False)
    echo(timeline_report.timeline(db, run_id, fmt, phase))

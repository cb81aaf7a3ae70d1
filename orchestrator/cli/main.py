"""The `bench` command: thin click commands over the orchestrator's library.

This is the only place that turns BenchError into a one-line message and an exit status.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from orchestrator.cli.executor_options import check_disturbance_options, executor_options, make_executor
from orchestrator.cli.hint import hint
from orchestrator.cli.options import (
    BenchGroup,
    IdType,
    db_option,
    echo,
    env_dir_option,
    prepare_data,
    runs_root,
)
from orchestrator.config import matrix
from orchestrator.config.checks import config_from_stored
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError
from orchestrator.launch.outcomes import OUTCOMES
from orchestrator.report import dispatch as report_cli
from orchestrator.report import kernels as kernel_reports
from orchestrator.report import results as reports
from orchestrator.report import timeline as timelines
from orchestrator.storage.db import Database
from orchestrator.sweep import recording as record
from orchestrator.sweep.eta import History
from orchestrator.sweep.progress import Progress
from orchestrator.sweep.run import SweepResult, finished_hashes, latest_sweep, run_configs, walls_of
from orchestrator.text.formats import FORMATS
from orchestrator.text.terminal import SafeFormatter

EXIT_INTERRUPTED = 130


@click.group(cls=BenchGroup)
@click.version_option(package_name="bench")
@click.option(
    "--debug",
    is_flag=True,
    help="Show the traceback of an internal error here instead of writing it to a file (env BENCH_DEBUG=1).",
)
def cli(debug: bool) -> None:
    """Benchmark deep learning frameworks against each other, honestly and reproducibly.

    \b
    Example:
      bench run --matrix matrices/quick.yaml && bench report
    """
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("bench: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def _parse_outcomes(text: str | None) -> set[str]:
    if not text:
        return set()
    wanted = {t.strip() for t in text.split(",") if t.strip()}
    unknown = wanted - set(OUTCOMES)
    if unknown:
        raise ConfigError(f"--fail-on: unknown outcome {sorted(unknown)[0]!r} (known: {', '.join(OUTCOMES)})")
    return wanted


def _dry_run(configs: list[RunConfig], done: set[str]) -> None:
    from orchestrator.cli.dry_run import listing

    for line in listing(configs, done):  # line by line: `| head` ends it as any listing (a pipe)
        echo(line)


def _finish(result: SweepResult, fail_on: set[str], resume_hint: str) -> None:
    counts: dict[str, int] = {}
    for outcome in result.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing run"
    echo(
        f"sweep {result.sweep_id}: {summary}"
        + (f"; {result.skipped} already finished" if result.skipped else "")
    )
    if result.interrupted:
        echo(f"interrupted: finish it with `{resume_hint}`", err=True)
        sys.exit(EXIT_INTERRUPTED)
    failed = sorted(k for k in counts if k in fail_on)
    if failed:
        echo(f"error: runs ended {', '.join(failed)} (--fail-on)", err=True)
        sys.exit(1)


@cli.command()
@click.option(
    "--matrix", "matrix_path", required=True, type=click.Path(dir_okay=False), help="Matrix YAML file."
)
@click.option(
    "--only",
    "only",
    default=None,
    metavar="KEY=VALUE[,KEY=VALUE...]",
    help="Run a subset: the configurations with these settings (KEY: any setting of a matrix, such as "
    "framework, model, batch_size, threads; a key given twice accepts either value).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List the expanded configurations, one column per setting in which they differ, and the "
    "settings common to all; run nothing.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Continue this matrix's latest sweep: run only what has no finished record.",
)
@click.option(
    "--fail-on",
    default=None,
    metavar="OUTCOME[,OUTCOME...]",
    help=f"Exit 1 if any run ends with one of these outcomes: {', '.join(OUTCOMES)} (docs/outcomes.md).",
)
@click.option(
    "--no-backstop",
    is_flag=True,
    help="Run every batch size even after the same configuration ran out of memory at a smaller one "
    "(by default those are recorded skipped: 'oom at batch B').",
)
@click.option(
    "--runs-dir", default=None, help="Where run folders go (default: bench-runs/ beside the database)."
)
@executor_options
@db_option
@env_dir_option
def run(
    matrix_path: str,
    only: str | None,
    dry_run: bool,
    resume: bool,
    fail_on: str | None,
    no_backstop: bool,
    runs_dir: str | None,
    executor: str,
    address: str,
    pack: bool,
    wait_idle: float | None,
    retry_disturbed: int,
    db_url: str,
    env_dir: str | None,
) -> None:
    """Run every configuration of a matrix, each in its own process and environment.

    \b
    Examples:
      bench run --matrix matrices/quick.yaml
      bench run --matrix m.yaml --only framework=pytorch,model=resnet50
      bench run --matrix m.yaml --resume
      bench run --matrix m.yaml --executor ray --address HEAD:6379
      bench run --matrix matrices/batch-sweep.yaml --no-backstop
      bench run --matrix m.yaml --wait-idle 300 --retry-disturbed 2
    """
    if pack and executor != "ray":
        raise ConfigError("--pack spreads runs over a Ray cluster's nodes: use it with --executor ray")
    check_disturbance_options(executor, wait_idle, retry_disturbed)
    m = matrix.load_matrix(Path(matrix_path))
    configs = list(m.configs)
    if only is not None:  # `--only ""` is an empty filter, an error: never the whole matrix
        configs = matrix.select(configs, matrix.parse_only(only))
        if not configs:
            raise ConfigError(f"--only {only}: matches none of the {len(m.configs)} configurations")
    wanted_fail = _parse_outcomes(fail_on)
    data_files = {} if dry_run else prepare_data(configs)
    if dry_run and not resume:
        _dry_run(configs, set())
        return
    db = Database(db_url, create=not dry_run)
    sweep = latest_sweep(db, m.name) if resume else None
    runner = None if dry_run else make_executor(executor, address, pack, env_dir, wait_idle)
    done = finished_hashes(db, sweep["id"], backstop=not no_backstop) if sweep else set()
    if dry_run:
        _dry_run(configs, done)
        return
    todo = [c for c in configs if c.config_hash not in done]
    history = History.from_db(db, todo)  # before the sweep is recorded: it may take seconds
    root = runs_root(db_url, runs_dir)
    if resume and sweep is None:
        echo(f"no earlier sweep named {m.name!r}: starting a new one", err=True)
    if sweep is not None:
        if sweep["matrix_hash"] != m.file_hash:
            echo(
                f"note: {matrix_path} changed since sweep {sweep['id']}; "
                "configurations are matched by their settings",
                err=True,
            )
        sweep_id = sweep["id"]
        record.reopen_sweep(db, sweep_id, len(configs))
    else:
        sweep_id = record.start_sweep(db, m.name, "matrix", len(configs), str(matrix_path), m.file_hash)
    progress = Progress(len(todo), plan=todo, history=history)
    try:
        result = run_configs(
            db,
            sweep_id,
            todo,
            root,
            env_dir,
            progress,
            first_index=len(configs) - len(todo) + 1,
            data_files=data_files,
            executor=runner,
            walls=None if no_backstop else walls_of(db, sweep_id),
            retry_disturbed=retry_disturbed,
        )
    finally:
        if runner is not None:
            runner.close()
    result.skipped = len(configs) - len(todo)
    _finish(result, wanted_fail, hint(extra=["--resume"]))


@cli.command()
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
    type=click.Choice(report_cli.TABLES),
    default="results",
    show_default=True,
    help="results: one row per configuration; comparison: framework rows, model × device columns, "
    "seconds per epoch; batch: images/s and ms/image by batch size; accuracy: validation accuracy "
    "at epochs 5, 10, … by optimizer and lr; resources: as --resources (docs/reports.md).",
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
    type=IdType("--compare"),
    default=None,
    metavar="SWEEP_A SWEEP_B",
    help="Per configuration in both sweeps: epoch seconds and peak RSS of each, B/A, and "
    "faster/slower where the difference exceeds the noise.",
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
    compare: tuple[int, int] | None,
    html_dir: str | None,
    timeline_config: str | None,
    kernels: bool,
    db_url: str,
) -> None:
    """One row per configuration: outcome, median epoch seconds, images/s, time per image;
    or, with --table, the research's comparison, batch-size and accuracy tables.

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
      bench report --compare 3 5
      bench report --html report/ --sweep 3
      bench report --kernels --where framework=pytorch,framework=tensorflow
    """
    if crashes and resources:
        raise ConfigError("--crashes and --resources are two different reports: choose one")
    db = Database(db_url, create=False)
    if kernels:
        other = crashes or resources or bool(group_by or compare or html_dir) or table != "results"
        echo(kernel_reports.from_cli(db, sweeps, where, fmt, other), markdown=fmt == "markdown")
        return
    if html_dir is not None or timeline_config is not None:
        other = crashes or resources or bool(group_by or compare) or table != "results" or fmt != "table"
        from orchestrator.report import html as html_report  # matplotlib: imported only when a page is wanted

        echo(html_report.from_cli(db, html_dir, timeline_config, sweeps, where, other))
        return
    echo(
        report_cli.report(db, table, sweeps, where, fmt, crashes, resources, group_by, compare or None),
        markdown=fmt == "markdown",
    )


@cli.command()
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
        from orchestrator.report import figures_runs as report_figures_runs  # matplotlib, as above

        report_figures_runs.plot_run(db, run_id, Path(plot_path))
        echo(f"timeline of run {run_id}: {plot_path}", err=True)
    data = reports.load_run(db, run_id)
    echo(json.dumps(data, indent=2, default=str) if fmt == "json" else reports.inspect_text(data))


@cli.command()
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
    echo(timelines.timeline(db, run_id, fmt, phase))


@cli.command()
@click.argument("run_id", type=IdType("rerun RUN_ID"))
@click.option(
    "--runs-dir", default=None, help="Where the run folder goes (default: bench-runs/ beside the database)."
)
@db_option
@env_dir_option
def rerun(run_id: int, runs_dir: str | None, db_url: str, env_dir: str | None) -> None:
    """Run the configuration of run RUN_ID again, in the foreground, with the same isolation.

    \b
    Example:
      bench rerun 12
    """
    db = Database(db_url, create=False, writing=True)
    old = reports.load_run(db, run_id)["run"]
    # The row is outside input: checked as strictly as a matrix, and before anything is recorded.
    config = config_from_stored(old["config_json"], f"{db.where}: run {run_id}: config_json")
    data_files = prepare_data([config])
    root = runs_root(db_url, runs_dir)
    sweep_id = record.start_sweep(db, f"rerun of run {run_id}", "rerun", 1, None, None)
    progress = Progress(1, follow=True, plan=[config], history=History.from_db(db, [config]))
    result = run_configs(db, sweep_id, [config], root, env_dir, progress, data_files=data_files)
    new_id = next(iter(result.outcomes), None)
    if new_id is not None:
        echo(
            f"run {run_id} was {old['outcome']}; this time {result.outcomes[new_id]}: bench inspect {new_id}"
        )
    _finish(result, set(), hint())


from orchestrator.cli.env import env, models_command  # noqa: E402  (needs `cli` defined above)
from orchestrator.cli.train import train  # noqa: E402

cli.add_command(env)
cli.add_command(models_command)
cli.add_command(train)


def main() -> None:
    cli(prog_name="bench")

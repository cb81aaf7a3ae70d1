"""`bench run` and `bench rerun`: a sweep of configurations, or one run again, in the foreground."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from orchestrator.cli.executor_options import check_disturbance_options, executor_options, make_executor
from orchestrator.cli.hint import hint
from orchestrator.cli.options import (
    IdType,
    calibrate_option,
    db_option,
    echo,
    env_dir_option,
    prepare_data,
    runs_dir_option,
)
from orchestrator.config import matrix
from orchestrator.config.checks import config_from_stored
from orchestrator.config.run_config import RunConfig
from orchestrator.config.values import cut
from orchestrator.errors import BenchError, ConfigError
from orchestrator.launch.outcomes import OUTCOMES
from orchestrator.report.postmortem import inspect as postmortem
from orchestrator.storage.db import Database
from orchestrator.sweep.folders import runs_root
from orchestrator.sweep.run import SweepResult
from orchestrator.sweep.session import Plan, earlier_sweep, run_sweep

EXIT_INTERRUPTED = 130  # an interrupted run, rerun or train: 128 + SIGINT, as a shell reports Ctrl-C


def _parse_outcomes(text: str | None) -> set[str]:
    if not text:
        return set()
    wanted = {t.strip() for t in text.split(",") if t.strip()}
    unknown = wanted - set(OUTCOMES)
    if unknown:
        raise ConfigError(f"--fail-on: unknown outcome {sorted(unknown)[0]!r} (known: {', '.join(OUTCOMES)})")
    return wanted


def _dry_run(
    configs: list[RunConfig], done: Mapping[str, set[int]], db: Database | None, detect: float | None
) -> None:
    from orchestrator.cli.dry_run import listing
    from orchestrator.report.query import spread

    plan = None
    if detect is not None:
        cells = spread.earlier_cells(db) if db is not None else spread.Cells({}, {}, [])
        plan = spread.plan_lines(configs, cells, detect)
    for line in listing(configs, done, plan):  # line by line: `| head` ends it as any listing (a pipe)
        echo(line)


def _difference(text: str | None, dry_run: bool) -> float | None:
    """--detect's difference as a fraction (5% or 5: 0.05)."""
    if text is None:
        return None
    if not dry_run:
        raise ConfigError("--detect plans runs: use it with --dry-run")
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not 0 < value < 1000:
        raise ConfigError(f"--detect {cut(text)}: expected a difference in percent above 0, such as 5%")
    return value / 100


def _existing(db_url: str) -> Database | None:
    """The database, if there is one to read earlier runs from (a dry run creates none)."""
    try:
        return Database(db_url, create=False)
    except BenchError:
        return None


def finish(result: SweepResult, fail_on: set[str], resume_hint: str) -> None:
    """The sweep's one-line summary; exit 130 if it was interrupted, 1 on a --fail-on outcome or
    with records pending (the database away at the end; one line says where they are); bench
    study run ends each of its sweeps the same way."""
    counts: dict[str, int] = {}
    for outcome in [*result.outcomes.values(), *result.pending.values()]:
        counts[outcome] = counts.get(outcome, 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing run"
    echo(
        f"sweep {result.sweep_id}: {summary}"
        + (f"; {result.skipped} already finished" if result.skipped else "")
    )
    if result.pending:
        echo(pending_line(result), err=True)
    if result.interrupted:
        echo(f"interrupted: finish it with `{resume_hint}`", err=True)
        sys.exit(EXIT_INTERRUPTED)
    failed = sorted(k for k in counts if k in fail_on)
    if failed:
        echo(f"error: runs ended {', '.join(failed)} (--fail-on)", err=True)
        sys.exit(1)
    if result.pending:
        sys.exit(1)


def pending_line(result: SweepResult) -> str:
    """Where the records the database has not taken are, and how they get there."""
    folders = sorted({str(p.parent) for p in result.pending})
    why = f" ({result.pending_why})" if result.pending_why else ""
    return (
        f"error: {len(result.pending)} record(s) not in the database yet{why}; their run folders hold "
        f"them, in {', '.join(folders)}: `bench run --resume` or `bench import FOLDER` adds them"
    )


@click.command()
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
    "--detect",
    default=None,
    metavar="PERCENT",
    help="With --dry-run: the runs each configuration needs to tell this difference apart (5%), from "
    "the spread between earlier runs in the database (docs/reports.md, Statistics over runs).",
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
@runs_dir_option
@calibrate_option
@executor_options
@db_option
@env_dir_option
def run(
    matrix_path: str,
    only: str | None,
    dry_run: bool,
    detect: str | None,
    resume: bool,
    fail_on: str | None,
    no_backstop: bool,
    runs_dir: str | None,
    calibrate: bool,
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
    difference = _difference(detect, dry_run)
    if dry_run and not resume:
        _dry_run(configs, {}, _existing(db_url) if difference is not None else None, difference)
        return
    db = Database(db_url, create=not dry_run)
    earlier = (
        earlier_sweep(
            db,
            m.name,
            backstop=not no_backstop,
            redo_disturbed=retry_disturbed > 0,
            runs_root=None if dry_run else runs_root(db_url, runs_dir),
        )
        if resume
        else None
    )
    if dry_run:
        _dry_run(configs, earlier.done if earlier else {}, db, difference)
        return
    runner = make_executor(executor, address, pack, env_dir, wait_idle)
    plan = Plan(
        m.name,
        "matrix",
        configs,
        db_url,
        runs_dir,
        env_dir,
        data_files,
        matrix_path=str(matrix_path),
        matrix_hash=m.file_hash,
        resume=resume,
        earlier=earlier,
        backstop=not no_backstop,
        retry_disturbed=retry_disturbed,
        calibrate=calibrate,
    )
    result = run_sweep(db, plan, runner, say=lambda line: echo(line, err=True))
    finish(result, wanted_fail, hint(extra=["--resume"]))


@click.command()
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
    old = postmortem.load_run(db, run_id)["run"]
    # The row is outside input: checked as strictly as a matrix, and before anything is recorded.
    config = config_from_stored(old["config_json"], f"{db.where}: run {run_id}: config_json")
    data_files = prepare_data([config])
    plan = Plan(
        f"rerun of run {run_id}", "rerun", [config], db_url, runs_dir, env_dir, data_files, follow=True
    )
    result = run_sweep(db, plan)
    new_id = next(iter(result.outcomes), None)
    if new_id is not None:
        echo(
            f"run {run_id} was {old['outcome']}; this time {result.outcomes[new_id]}: bench inspect {new_id}"
        )
    finish(result, set(), hint())

"""`bench study`: list the studies bench knows, run one's matrices, report it against its paper."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from orchestrator import shipped
from orchestrator.cli.executor_options import RETRY_DISTURBED, WAIT_IDLE, make_executor
from orchestrator.cli.hint import hint
from orchestrator.cli.options import (
    calibrate_option,
    db_option,
    echo,
    env_dir_option,
    prepare_data,
    runs_dir_option,
)
from orchestrator.cli.run import finish as finish_sweep
from orchestrator.errors import ConfigError
from orchestrator.storage import transfer
from orchestrator.storage.db import Database
from orchestrator.studies import committed, loader, measured
from orchestrator.studies import report as study_report
from orchestrator.studies.spec import Study, StudyMatrix
from orchestrator.sweep.folders import runs_root
from orchestrator.sweep.session import Plan, earlier_sweep, run_sweep
from orchestrator.text.formats import Column, render


def studies_option(f: Any) -> Any:
    return click.option(
        "--studies",
        "studies_dir",
        default=None,
        envvar="BENCH_STUDIES",
        help="The folder of study folders (env BENCH_STUDIES; default: the checkout's studies/).",
    )(f)


def scale_option(f: Any) -> Any:
    return click.option(
        "--scale",
        default=None,
        metavar="NAME",
        help="Which of the study's scales (bench study list shows them; default: its first, such as cpu).",
    )(f)


def _root(studies_dir: str | None) -> Path:
    return Path(studies_dir) if studies_dir else shipped.CHECKOUT / "studies"


def _scale(study: Study, scale: str | None) -> str:
    if scale is None:
        return study.scales[0]
    if scale not in study.scales:
        raise ConfigError(f"--scale {scale}: study {study.name} has the scales {', '.join(study.scales)}")
    return scale


@click.group()
def study() -> None:
    """Published framework comparisons re-run: list them, run one, set it beside its paper.

    \b
    Examples:
      bench study list
      bench study run umons --scale cpu
      bench study report umons --format markdown
    """


@study.command("list")
@studies_option
@click.option(
    "--db",
    "db_url",
    default=None,
    help="Also say how many of each scale's planned runs this database holds (what bench study run "
    "--resume would leave to run).",
)
def list_command(studies_dir: str | None, db_url: str | None) -> None:
    """The studies bench knows: name, title, matrices at each scale, runs planned, claims, and the
    results committed beside each (results/*.json: runs, scales, when, on what machine).

    \b
    Examples:
      bench study list --studies tests/data/studies
      bench study list --db umons.db
    """
    db = Database(db_url, create=False) if db_url else None
    rows: list[dict[str, Any]] = []
    try:
        for folder in loader.study_folders(_root(studies_dir)):
            s = loader.load_study(folder)
            matrices = ", ".join(f"{m.path.name} ({m.scale})" for m in s.matrices)
            runs = ", ".join(f"{scale} {s.runs_planned(scale)}" for scale in s.scales)
            found = committed.results(folder, s.name)
            row = {
                "name": s.name,
                "title": s.title,
                "matrices": matrices,
                "runs": runs,
                "claims": len(s.claims),
                "committed": "; ".join(r.line() for r in found) or "none",
            }
            if db is not None:
                row["held"] = ", ".join(_held(db, s, scale) for scale in s.scales)
            rows.append(row)
    finally:
        if db is not None:
            db.close()
    columns = [
        Column(h, k) for h, k in (("study", "name"), ("title", "title"), ("matrices (scale)", "matrices"))
    ]
    columns += [Column("runs planned", "runs"), Column("claims", "claims")]
    if db is not None:
        columns.append(Column("in --db", "held"))
    columns.append(Column("committed results", "committed"))
    echo(render(rows, columns, "table") if rows else "no studies")


def _held(db: Database, s: Study, scale: str) -> str:
    """Of the scale's planned runs, how many the latest sweep of each matrix finished, as --resume
    counts them (sweep/session.py's earlier_sweep): the rest is what it would run."""
    held = planned = 0
    for entry in s.at_scale(scale):
        configs = {c.config_hash: c for c in entry.matrix.configs}.values()
        earlier = earlier_sweep(db, entry.sweep_name(s.name), backstop=True)
        done = earlier.done if earlier else {}
        planned += sum(c.runs for c in configs)
        held += sum(len({i for i in done.get(c.config_hash, ()) if i < c.runs}) for c in configs)
    return f"{scale} {held}/{planned}" + (f" ({planned - held} to run)" if held < planned else "")


@study.command("run")
@click.argument("name")
@scale_option
@click.option(
    "--dry-run", is_flag=True, help="List each matrix's configurations and the runs planned; run nothing."
)
@click.option(
    "--resume", is_flag=True, help="Continue the study's latest sweeps: run only what has no finished record."
)
@WAIT_IDLE
@RETRY_DISTURBED
@runs_dir_option
@calibrate_option
@studies_option
@db_option
@env_dir_option
def run_command(
    name: str,
    scale: str | None,
    dry_run: bool,
    resume: bool,
    wait_idle: float | None,
    retry_disturbed: int,
    runs_dir: str | None,
    calibrate: bool,
    studies_dir: str | None,
    db_url: str,
    env_dir: str | None,
) -> None:
    """Run study NAME's matrices at one scale into the database, as bench run would, one sweep each
    (named for the study and the scale, which the report reads).

    \b
    Examples:
      bench study run umons --dry-run
      bench study run umons --scale cpu --db umons.db
      bench study run umons --resume
      bench study run umons --resume --retry-disturbed 2 --wait-idle 120
    """
    s = loader.load_named(_root(studies_dir), name)
    chosen = _scale(s, scale)
    how = How(resume, calibrate, wait_idle, retry_disturbed)
    for entry in s.at_scale(chosen):
        if dry_run:
            _dry_run(s, entry)
        else:
            _run(s, entry, Where(db_url, runs_dir, env_dir), how)


def _dry_run(s: Study, entry: StudyMatrix) -> None:
    from orchestrator.cli.dry_run import listing

    configs = list(entry.matrix.configs)
    runs = sum(c.runs for c in configs)
    echo(f"{entry.sweep_name(s.name)}: {len(configs)} configurations, {runs} runs ({entry.path})")
    for line in listing(configs, {}, None):
        echo(line)


@dataclass(frozen=True)
class Where:
    """Where a study's sweeps go: the database, the run folders, the framework environments."""

    db_url: str
    runs_dir: str | None
    env_dir: str | None


@dataclass(frozen=True)
class How:
    """How a study's sweeps run: resumed or not, calibrated, and the disturbance options of bench
    run (wait for a quiet machine before each run; run a disturbed one again)."""

    resume: bool
    calibrate: bool
    wait_idle: float | None = None
    retry_disturbed: int = 0


def _run(s: Study, entry: StudyMatrix, where: Where, how: How) -> None:
    configs = list(entry.matrix.configs)
    db = Database(where.db_url, create=True)
    sweep_name = entry.sweep_name(s.name)
    resume, redo = how.resume, how.retry_disturbed > 0
    root = runs_root(where.db_url, where.runs_dir) if resume else None
    earlier = (
        earlier_sweep(db, sweep_name, backstop=True, redo_disturbed=redo, runs_root=root) if resume else None
    )
    plan = Plan(
        sweep_name,
        "matrix",
        configs,
        where.db_url,
        where.runs_dir,
        where.env_dir,
        prepare_data(configs),
        matrix_path=os.fspath(entry.path),
        matrix_hash=entry.matrix.file_hash,
        resume=resume,
        earlier=earlier,
        backstop=True,
        retry_disturbed=how.retry_disturbed,
        calibrate=how.calibrate,
    )
    runner = make_executor("local", "auto", False, where.env_dir, how.wait_idle)
    result = run_sweep(db, plan, runner, say=lambda line: echo(line, err=True))
    finish_sweep(result, set(), hint(extra=["--resume"]))


@study.command("report")
@click.argument("name")
@scale_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(study_report.FORMATS),
    default="text",
    show_default=True,
    help="text, markdown, or html: one self-contained page with the figures (docs/studies.md).",
)
@click.option(
    "--committed",
    is_flag=True,
    help="Read the study's committed results (its results/*.json, files bench export wrote) instead "
    "of --db: what docs/studies/NAME.md is generated from.",
)
@studies_option
@db_option
def report_command(
    name: str, scale: str | None, fmt: str, committed: bool, studies_dir: str | None, db_url: str
) -> None:
    """Study NAME's published figures beside bench's runs, then each claim's verdict.

    \b
    Examples:
      bench study report umons
      bench study report umons --db umons.db --format markdown
      bench study report umons --committed --format markdown > docs/studies/umons.md
      bench study report msu --committed --format html > msu.html
    """
    s = loader.load_named(_root(studies_dir), name)
    if committed:
        text = _committed_report(s, scale, fmt)
    else:
        db = Database(db_url, create=False)
        try:
            text = study_report.report(s, measured.read(db, s, _scale(s, scale)), fmt)
        finally:
            db.close()
    echo(text, markdown=fmt == "markdown")


def _committed_report(s: Study, scale: str | None, fmt: str) -> str:
    """The report of the study's committed results, read through a database of their own."""
    files = sorted((s.folder / "results").glob("*.json"))
    if not files:
        raise ConfigError(f"study {s.name} has no committed results ({s.folder / 'results'}/*.json)")
    footer = ""
    if fmt != "text":
        made = f"bench study report {s.name} --committed --format {fmt}"
        names = ", ".join(f"studies/{s.name}/results/{p.name}" for p in files)
        footer = f"This page is generated by {made} from {names}; do not edit it by hand."
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(str(Path(tmp) / "committed.db"), create=True)
        try:
            for path in files:
                transfer.import_document(db, transfer.read(path), str(path.relative_to(s.folder.parent)))
            return study_report.report(s, measured.read(db, s, _scale(s, scale)), fmt, footer)
        finally:
            db.close()

"""`bench train`: one configuration from the command line — the research's single-run script,
with every setting of the matrix available as an option, run and recorded like any sweep."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.hint import hint
from orchestrator.cli.options import db_option, echo, env_dir_option, prepare_data
from orchestrator.cli.run import EXIT_INTERRUPTED
from orchestrator.config.checks import execution_problem, version_problem
from orchestrator.config.field_docs import field_help
from orchestrator.config.filters import parse_value
from orchestrator.config.matrix import LIST_FIELDS
from orchestrator.config.run_config import (
    FAULT_FIELDS,
    FEATURES_NEED_INFERENCE,
    RunConfig,
    synthetic_problem,
    validate_field,
)
from orchestrator.config.values import format_size
from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.sweep.session import Plan, run_sweep
from orchestrator.text.formats import number
from orchestrator.text.terminal import safe_line
from workers.models import check_image_size


def _option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _setting_options(f: Any) -> Any:
    for field in reversed(dataclasses.fields(RunConfig)):
        default = field.default if field.name != "framework" else None
        f = click.option(
            _option_name(field.name),
            field.name,
            default=None,
            metavar="VALUE",
            help=field_help(field.name, default),
            required=field.name == "framework",
        )(f)
    return f


def build_config(values: dict[str, str | None]) -> RunConfig:
    """Options as given on the command line → a validated configuration; errors name the option."""
    settings: dict[str, Any] = {}
    for key, raw in values.items():
        if raw is None:
            continue
        if key in LIST_FIELDS:  # "0,2" is one CPU list, not two settings
            try:
                settings[key] = validate_field(key, raw)
            except ValueError as exc:
                raise ConfigError(f"{_option_name(key)}: {exc}") from None
            continue
        # One value, never split on commas: `--lr "0.1,lr=0.2"` is a bad learning rate, not two.
        try:
            settings[key] = parse_value(key, raw.strip(), _option_name(key))
        except ConfigError as exc:
            raise ConfigError(
                str(exc).replace(f"{_option_name(key)}: {key}:", f"{_option_name(key)}:")
            ) from None
    if settings.get("data_dir"):
        settings["data_dir"] = str(Path(settings["data_dir"]).resolve())
    config = RunConfig(**settings)
    if config.memory_budget is not None and config.sample_interval == 0:
        raise ConfigError("--sample-interval: memory_budget needs the sampler, which 0 turns off")
    problem = execution_problem(config) or version_problem(config)
    if problem:
        keys, message = problem
        key = next((k for k in keys if k in settings), keys[0])
        raise ConfigError(f"{_option_name(key)}: {message}")
    if config.framework == "fault":
        return config
    stray = [k for k in FAULT_FIELDS if k in settings]
    if stray:
        raise ConfigError(f"{_option_name(stray[0])}: only applies to framework fault")
    _check(config)
    return config


def _check(config: RunConfig) -> None:
    try:
        check_image_size(config.model, config.image_size)
    except ValueError as exc:
        raise ConfigError(f"--image-size: {exc}") from None
    if config.batch_size > config.train_size:
        raise ConfigError(
            f"--batch-size: {config.batch_size} is larger than the training split of {config.train_size} "
            f"samples (dataset size {config.dataset_size}, validation fraction {config.val_fraction:g})"
        )
    problem = synthetic_problem(config)
    if problem:
        raise ConfigError(f"--dataset-size: {problem}")
    if config.dataset != "synthetic" and not config.data_dir:
        raise ConfigError(f"--data-dir: dataset {config.dataset} needs the folder that holds it")
    if config.features and config.task != "inference":
        raise ConfigError(f"--features: {FEATURES_NEED_INFERENCE}")
    if config.dataset == "synthetic" and config.data_dir:
        raise ConfigError("--data-dir: only applies to image_folder, cifar10 and cifar100 datasets")


def _summary(db: Database, run_id: int) -> str:
    from orchestrator.report.postmortem import crashes
    from orchestrator.report.postmortem import inspect as postmortem

    data = postmortem.load_run(db, run_id)
    run = data["run"]
    why = f": {safe_line(crashes.why(run))}" if run["outcome"] != "ok" else ""
    lines = [f"run {run_id}: {run['outcome']}{why}"]
    for e in data["epochs"]:
        repeat = f" (repeat {e['repeat']})" if run["repeats"] > 1 else ""
        unit = "sequences" if run.get("tokens_per_second") is not None else "images"
        rate = f"{number(e['seconds'])} s, {number(e['images_per_second'], 4)} {unit}/s, "
        if run.get("task") == "inference":
            what = f"{number(e['seconds_per_image'] * 1000)} s/1000 {unit}"
        else:
            what = f"train loss {number(e['train_loss'])}, val acc {number(e['val_accuracy'])}"
        lines.append(f"  epoch {e['epoch']}{repeat}: {rate}{what}")
    if run["median_epoch_seconds"] is not None:
        # A token model's sample is a sequence: say so, with its tokens/s.
        unit = "sequence" if run.get("tokens_per_second") is not None else "image"
        tokens = (
            f"{number(run['tokens_per_second'], 4)} tokens/s, "
            if run.get("tokens_per_second") is not None
            else ""
        )
        lines.append(
            f"median epoch {number(run['median_epoch_seconds'])} s, "
            f"{number(run['images_per_second'], 4)} {unit}s/s, {tokens}"
            f"{number(run['seconds_per_image'] * 1000)} ms/{unit}, {run['parameter_count']:,} parameters"
        )
    if run.get("samples_count"):
        lines.append(
            f"resources: CPU {number(run['cpu_percent_mean'])}% of one core "
            f"({number(run['cpu_percent_allowed'])}% of {run['cpu_allowed']} CPUs), "
            f"threads {run['threads_steady'] or '—'} steady ({run['threads_max']} max), "
            f"peak RSS {format_size(run['rss_peak_bytes'])}"
        )
    lines += [line.strip() for line in postmortem.execution_lines(run)[2:] if "time to target" in line]
    lines.append(f"details: bench inspect {run_id}")
    return "\n".join(lines)


@click.command()
@_setting_options
@click.option(
    "--runs-dir", default=None, help="Where the run folder goes (default: bench-runs/ beside the database)."
)
@db_option
@env_dir_option
def train(runs_dir: str | None, db_url: str, env_dir: str | None, **values: str | None) -> None:
    """Run one configuration, in its own process and environment, and record it.

    Every setting of a matrix is an option (--batch-size, --lr, --threads, ...).

    \b
    Example:
      bench train --device cpu --framework pytorch --model alexnet --epochs 5 \\
          --batch-size 250 --optimizer sgd --lr 0.01 --dataset-size 1000
    """
    config = build_config(values)
    data_files = prepare_data([config])
    db = Database(db_url, create=True)
    result = run_sweep(db, Plan("train", "train", [config], db_url, runs_dir, env_dir, data_files))
    for run_id in result.outcomes:
        echo(_summary(db, run_id))
    if result.interrupted:
        echo(f"interrupted: run it again with `{hint()}`", err=True)
        raise SystemExit(EXIT_INTERRUPTED)

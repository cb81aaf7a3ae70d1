"""Options and the error boundary shared by every bench command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from orchestrator.config import RunConfig
from orchestrator.db import DEFAULT_URL, normalise_url
from orchestrator.errors import BenchError
from orchestrator.terminal import safe_line


class BenchGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BenchError as exc:
            click.echo(f"error: {safe_line(exc)}", err=True)
            ctx.exit(1)


def db_option(f: Any) -> Any:
    return click.option(
        "--db",
        "db_url",
        default=DEFAULT_URL,
        show_default=True,
        envvar="BENCH_DB",
        help="Results database: a SQLAlchemy URL or a file path (env BENCH_DB).",
    )(f)


def env_dir_option(f: Any) -> Any:
    return click.option(
        "--env-dir",
        default=None,
        envvar="BENCH_ENV_DIR",
        help="Where framework environments live (env BENCH_ENV_DIR; default ~/.cache/bench/envs).",
    )(f)


def runs_root(db_url: str, runs_dir: str | None) -> Path:
    """Run folders go beside the SQLite file unless --runs-dir says otherwise."""
    if runs_dir:
        return Path(runs_dir).resolve()
    url = normalise_url(db_url)
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return Path(url[len("sqlite:///") :]).resolve().parent / "bench-runs"
    return Path("bench-runs").resolve()


def prepare_data(configs: list[RunConfig]) -> dict[str, Path]:
    """Decode the configurations' datasets (numpy and Pillow load only for commands that run)."""
    from orchestrator import datasets

    return datasets.prepare_all(configs)

"""Options and the error boundary shared by every bench command."""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import click

from orchestrator.config.filters import parse_id, parse_value
from orchestrator.config.run_config import SQLITE_INT_MAX, RunConfig
from orchestrator.errors import BenchError, ConfigError
from orchestrator.storage.db import DEFAULT_URL
from orchestrator.text.terminal import markdown_text, safe, safe_line

# Exceptions that already mean something to click or to the user: a usage error (exit 2), --help
# and --version (click's Exit), Ctrl-C (click's Abort), sys.exit. A broken pipe (`bench report |
# head`) is click's too: it exits 1 quietly.
_PASS_THROUGH = (click.ClickException, click.exceptions.Exit, click.Abort, BrokenPipeError)


class BenchGroup(click.Group):
    """The error boundary: a BenchError is one line and exit 1; anything else unexpected is one
    line naming the file that holds its traceback (or, with --debug, the traceback itself)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BenchError as exc:
            click.echo(f"error: {safe_line(exc)}", err=True)
            ctx.exit(1)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            if ctx.params.get("debug") or debug_from_env():
                raise
            click.echo(internal_error_line(exc), err=True)
            ctx.exit(1)


def debug_from_env() -> bool:
    return os.environ.get("BENCH_DEBUG", "") not in ("", "0")


def internal_error_line(exc: BaseException) -> str:
    message = safe_line(exc)
    if len(message) > 300:
        message = message[:300] + "..."
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    where, problem = write_traceback(exc)
    saved = f"the full traceback is in {safe_line(where)}" if where else f"no traceback file ({problem})"
    return f"bench: internal error ({what}); {saved}; run again with --debug to see it here"


def traceback_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "bench" / "tracebacks"


def write_traceback(exc: BaseException) -> tuple[str | None, str]:
    """Write the traceback to a new private file: its path, or None and why nothing was written.

    Tried in the state folder first, then as a fresh temporary file; never raises (this runs while
    reporting an error already).
    """
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    header = f"bench internal error at {time.strftime('%Y-%m-%d %H:%M:%S %z')}, pid {os.getpid()}\n\n"
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    problem = ""
    try:
        folder = traceback_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"{name}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as first:
        problem = str(first)
        try:  # mkstemp: a new file, owner-only, safe in a shared temporary folder
            fd, temp = tempfile.mkstemp(prefix=f"bench-traceback-{name}-", suffix=".txt")
            path = Path(temp)
        except OSError as second:
            return None, f"{problem}; {second}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(header + text)
    except OSError as exc_write:
        return None, str(exc_write)
    return str(path), problem


class IdType(click.ParamType):
    """A run or sweep id: checked as bench checks every id (ASCII digits, below 2**63), and a bad one
    is the one-line error, not a usage message."""

    name = "id"

    def __init__(self, what: str) -> None:
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= SQLITE_INT_MAX:
            return value  # a default, or a caller's int
        return parse_id(value if isinstance(value, str) else "a non-text value", self.what)


class FieldType(click.ParamType):
    """An option that is one configuration field, validated with that field's bounds."""

    name = "value"

    def __init__(self, key: str, option: str) -> None:
        self.key, self.option = key, option

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_value(self.key, str(value).strip(), self.option)
        except ConfigError as exc:  # "--classes: classes: ..." says the name twice
            raise ConfigError(str(exc).replace(f"{self.option}: {self.key}:", f"{self.option}:")) from None


def db_option(f: Any) -> Any:
    return click.option(
        "--db",
        "db_url",
        default=DEFAULT_URL,
        show_default=True,
        envvar="BENCH_DB",
        help="Results database: a SQLAlchemy URL or a file path (env BENCH_DB).",
    )(f)


def runs_dir_option(f: Any) -> Any:
    return click.option(
        "--runs-dir", default=None, help="Where run folders go (default: bench-runs/ beside the database)."
    )(f)


def calibrate_option(f: Any) -> Any:
    """Whether a sweep times bench's fixed calibration work at its ends (bench run, bench study run)."""
    return click.option(
        "--calibrate/--no-calibrate",
        default=True,
        show_default=True,
        envvar="BENCH_CALIBRATE",
        help="Time a fixed piece of work (about a second, one thread) before the first run and after the "
        "last, so reports can say whether the machine ran at the same speed in two sweeps "
        "(docs/profiler.md, Calibration; local executor; env BENCH_CALIBRATE=0 turns it off).",
    )(f)


def env_dir_option(f: Any) -> Any:
    return click.option(
        "--env-dir",
        default=None,
        envvar="BENCH_ENV_DIR",
        help="Where framework environments live (env BENCH_ENV_DIR; default ~/.cache/bench/envs).",
    )(f)


def prepare_data(configs: list[RunConfig]) -> dict[str, Path]:
    """Decode the configurations' datasets (numpy and Pillow load only for commands that run)."""
    from orchestrator.provision import datasets

    return datasets.prepare_all(configs)


def echo(text: object = "", err: bool = False, markdown: bool = False) -> None:
    """click.echo for every line the CLI prints: the text made safe on its way out
    (orchestrator/text/terminal.py)."""
    click.echo(markdown_text(text) if markdown else safe(text), err=err)

"""The command that finishes an interrupted `bench run` (or repeats `bench rerun` / `bench train`).

Built from the options the interrupted command was actually given (click's context: the values
and where each came from), never from a hand-written list: an option added to `bench run` later
is carried without a change here. Only ``NOT_CARRIED`` is left out: what does not change where
or how the runs go.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

import click
from click.core import ParameterSource

from orchestrator.storage.db import hide_passwords

# Options that say what to show rather than where or how to run; --resume is added by the hint.
NOT_CARRIED = frozenset({"dry_run", "resume", "help"})

# Given on the command line or taken from the environment (BENCH_DB, RAY_ADDRESS, ...): a hint
# pasted into another shell must go to the same place, so an environment value is written out.
_CARRIED_SOURCES = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def _option_words(param: click.Option, value: Any) -> list[str]:
    """The words that give ``param`` the value ``value`` on a command line."""
    name = max(param.opts, key=len)  # the long form: --db, not -d
    if param.count:  # -v -v -v
        return [name] * int(value or 0)
    if param.is_flag:
        if param.secondary_opts and not value:
            return [max(param.secondary_opts, key=len)]
        return [name] if value else []
    values = value if param.multiple else [value]
    words: list[str] = []
    for one in values:
        parts = one if isinstance(one, (tuple, list)) and param.nargs != 1 else [one]
        words += [name, *(str(p) for p in parts)]
    return words


def carried(ctx: click.Context) -> Iterable[tuple[click.Parameter, Any]]:
    """The command's parameters that the hint repeats, with their values, in the command's order."""
    for param in ctx.command.params:
        name = param.name
        if name is None or name in NOT_CARRIED or name not in ctx.params:
            continue
        if ctx.get_parameter_source(name) in _CARRIED_SOURCES:
            yield param, ctx.params[name]


def command_words(ctx: click.Context, extra: Iterable[str] = ()) -> list[str]:
    """`bench <command> ...` as words: arguments first, then options, then ``extra``."""
    words = ["bench", *(ctx.info_name or ctx.command.name or "").split()]
    options: list[str] = []
    for param, value in carried(ctx):
        if isinstance(param, click.Option):
            options += _option_words(param, value)
        else:  # an argument (bench rerun RUN_ID)
            words += [str(v) for v in (value if isinstance(value, (tuple, list)) else [value])]
    return words + options + list(extra)


def hint(ctx: click.Context | None = None, extra: Iterable[str] = ()) -> str:
    """The command line to paste, shell-quoted, with any database password masked.

    A masked password cannot be pasted as it is, and the hint says so rather than print a secret
    to a terminal or a CI log.
    """
    ctx = ctx or click.get_current_context()
    line = " ".join(shlex.quote(w) for w in command_words(ctx, extra))
    masked = hide_passwords(line)
    return masked + ("  (password hidden: give it again)" if masked != line else "")

"""Every option of every command says what it does and which values it takes (issue 22)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli
from orchestrator.config.field_docs import allowed
from orchestrator.config.run_config import FIELD_NAMES

Tree = Iterator[tuple[tuple[str, ...], click.Command]]


def _commands(command: click.Command, path: tuple[str, ...]) -> Tree:
    """The whole tree under ``command``: groups and their subcommands, found, not listed by hand."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(cli, ()))


def test_the_tree_is_walked():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"", "run", "report", "train", "env", "env setup", "env list", "models"} <= names


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "bench" for p, _ in COMMANDS])
def test_every_option_has_help_and_help_exits_0(path, command):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())  # click wraps lines
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"bench {' '.join(path)} {param.opts[0]}: no help"
            for choice in getattr(param.type, "choices", ()):
                assert str(choice) in shown, f"{param.opts[0]}: {choice} not shown"
        else:  # click's arguments take no help: the command's own text must name them
            assert param.human_readable_name in (command.help or ""), f"{param.name}: not described"


def test_train_options_give_the_values_of_their_setting():
    result = CliRunner().invoke(cli, ["train", "--help"])
    shown = " ".join(result.output.split())
    for field in FIELD_NAMES:
        option = "--" + field.replace("_", "-")
        assert option in shown
        for value in re.split(r" \| ", allowed(field)):  # each choice, or the format as a whole
            assert value in shown, f"{option}: {value!r} not in the help"


def test_the_matrix_page_describes_every_setting():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "matrix.md").read_text()
    for field in FIELD_NAMES:
        assert f"| `{field}` |" in page, field

"""CHANGELOG.md keeps up with what a user can type and run (issue 44): every command and option of
the click tree, and every matrix shipped in matrices/ and studies/, is named in it, so a new option
or matrix without its entry fails here, saying what to add."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import click

from benchmarks.tools.reference import cli as cli_page
from orchestrator.cli.main import cli

REPO = Path(__file__).resolve().parent.parent
ADD = "add an entry under ## Unreleased in CHANGELOG.md saying what it does"


def shipped_matrices(root: Path) -> list[str]:
    """The matrices a checkout ships: matrices/*.yaml and each study's (its study.yaml is not one)."""
    found = sorted(root.glob("matrices/*.yaml")) + sorted(root.glob("studies/*/*.yaml"))
    return [p.relative_to(root).as_posix() for p in found if p.name != "study.yaml"]


def names(tree: click.Group) -> Iterable[tuple[str, str]]:
    """(what, the text the changelog must hold) for every command and every long option of the tree."""
    for command, ctx in cli_page.commands(tree, click.Context(tree, info_name="bench")):
        if command is not tree:
            yield f"the command {ctx.command_path}", ctx.command_path
        for param in command.params:
            if isinstance(param, click.Option):
                for opt in [*param.opts, *param.secondary_opts]:
                    if opt.startswith("--"):
                        yield f"{ctx.command_path}'s option {opt}", opt


def named(text: str, name: str) -> bool:
    """Whether the text names it as a word of its own: --sweep is not named by --sweeps."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


def missing(changelog: str, tree: click.Group, matrices: list[str]) -> list[str]:
    found = [what for what, name in names(tree) if not named(changelog, name)]
    found += [f"the matrix {path}" for path in matrices if not named(changelog, path)]
    return found


def test_every_command_option_and_shipped_matrix_is_in_the_changelog():
    changelog = (REPO / "CHANGELOG.md").read_text()
    absent = missing(changelog, cli, shipped_matrices(REPO))
    assert not absent, f"CHANGELOG.md does not name {len(absent)}; {ADD}:\n" + "\n".join(absent)


def test_the_walk_sees_nested_commands_flags_and_study_matrices():
    every = dict(names(cli))
    assert {"the command bench study run", "bench study run's option --no-calibrate"} <= set(every)
    assert every["bench env setup's option --version"] == "--version"
    matrices = shipped_matrices(REPO)
    assert "matrices/quick.yaml" in matrices and "studies/umons/cpu-ranking.yaml" in matrices
    assert not any(path.endswith("study.yaml") for path in matrices)


def test_a_new_option_command_or_matrix_without_an_entry_fails_and_says_what_to_add(tmp_path: Path):
    report = click.Command("report", params=[click.Option(["--planted-option"])])
    planted = click.Group("bench", commands={"report": report, "planted": click.Command("planted")})
    (tmp_path / "matrices").mkdir()
    (tmp_path / "studies" / "s").mkdir(parents=True)
    for name in ("matrices/old.yaml", "matrices/new.yaml", "studies/s/study.yaml", "studies/s/cpu.yaml"):
        (tmp_path / name).write_text("name: m\n")
    changelog = (
        "- `bench report --planted-options`, `matrices/old.yaml`, `studies/s/cpu.yaml`, bench report.\n"
    )
    assert missing(changelog, planted, shipped_matrices(tmp_path)) == [
        "the command bench planted",
        "bench report's option --planted-option",
        "the matrix matrices/new.yaml",
    ]

"""docs/reference/cli.md: every command of the `bench` click tree, its usage, help and options.

Read from the tree itself (the group's commands, each command's params), so a command or an option
added without this page regenerated fails tests/test_reference.py. Usage lines and option names are
written here from the params' own attributes (their names, flags, types and choices), not through
click's help formatter, whose rendering changes between click releases: the page then changes only
when bench's commands do.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import click

TITLE = "# Command reference"
INTRO = (
    "Every `bench` command and option, as the code declares them (`orchestrator/cli/`): the same words "
    "`--help` prints. Commands are in the order `bench --help` lists them; a group's commands follow "
    "it. Every command also takes `--help`."
)


def commands(command: click.Command, ctx: click.Context) -> Iterator[tuple[click.Command, click.Context]]:
    """The whole tree under ``command``, depth first, each group's commands sorted as --help sorts them."""
    yield command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from commands(sub, click.Context(sub, info_name=name, parent=ctx))


def cell(text: str) -> str:
    """Text made one table cell: one line, pipes escaped (markdown would end the cell there)."""
    return " ".join(text.split()).replace("|", "\\|")


def prose(help_text: str) -> list[str]:
    """A command's help as markdown: paragraphs rewrapped as click does, ``\\b`` blocks kept verbatim."""
    out: list[str] = []
    for block in inspect.cleandoc(help_text).split("\n\n"):
        lines = block.split("\n")
        if lines[0].strip() == "\b":  # click's mark for a paragraph it must not rewrap
            out += ["```", *(line.rstrip() for line in lines[1:]), "```", ""]
        else:
            out += [" ".join(block.split()), ""]
    return out


def default(param: click.Parameter) -> str:
    """What the option is when it is not given, with the environment variable that can set it."""
    info = param.to_info_dict()
    value = info.get("default")
    if param.required:
        text = "required"
    elif info.get("is_flag") and isinstance(param, click.Option) and param.secondary_opts:
        text = f"`{param.opts[0] if value else param.secondary_opts[0]}`"
    elif info.get("is_flag"):
        text = "off"
    elif value is None or value == () or value == []:
        text = ""
    else:
        text = f"`{value}`"
    envvar = param.envvar
    if isinstance(envvar, str):
        text = f"{text} (env `{envvar}`)".strip()
    return text


def value_word(param: click.Parameter) -> str:
    """What an option's value is written as: its metavar, a choice's values, else its type's name."""
    if isinstance(param, click.Option) and param.metavar:
        return param.metavar
    if isinstance(param.type, click.Choice):
        return "[" + "|".join(str(c) for c in param.type.choices) + "]"
    return param.type.name.upper()


def option_name(param: click.Option) -> str:
    """`--db TEXT`, `--resume`, `--calibrate / --no-calibrate`: the names and the value's word."""
    names = ", ".join(param.opts)
    if param.secondary_opts:
        return f"{names} / {', '.join(param.secondary_opts)}"
    if param.is_flag or param.count:
        return names
    return f"{names} {value_word(param)}"


def usage(command: click.Command, ctx: click.Context) -> str:
    """The command's usage line, from its path and params."""
    words = [ctx.command_path]
    if any(isinstance(p, click.Option) for p in command.get_params(ctx)):
        words.append("[OPTIONS]")
    for arg in command.get_params(ctx):
        if isinstance(arg, click.Argument):
            word = arg.metavar or (arg.name or "").upper()
            word += "..." if arg.nargs == -1 else ""
            words.append(word if arg.required else f"[{word}]")
    if isinstance(command, click.Group):
        words.append("COMMAND [ARGS]...")
    return " ".join(words)


def options(command: click.Command, ctx: click.Context) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or param is command.get_help_option(ctx):
            continue  # every command has --help: the intro says so once
        rows.append(f"| `{cell(option_name(param))}` | {cell(param.help or '')} | {cell(default(param))} |")
    if not rows:
        return []
    return ["| option | what it does | default |", "|---|---|---|", *rows, ""]


def arguments(command: click.Command, ctx: click.Context) -> list[str]:
    found = [p for p in command.get_params(ctx) if isinstance(p, click.Argument)]
    if not found:
        return []
    words = []
    for arg in found:
        how = "one or more" if arg.nargs == -1 and arg.required else "any number" if arg.nargs == -1 else ""
        how = how or ("required" if arg.required else "optional")
        word = arg.metavar or (arg.name or "").upper()
        words.append(f"`{word}{'...' if arg.nargs == -1 else ''}` ({how})")
    return ["Arguments: " + ", ".join(words) + ".", ""]


def section(command: click.Command, ctx: click.Context) -> list[str]:
    path = ctx.command_path
    level = "#" * (2 + max(path.count(" ") - 1, 0))  # bench and its commands ##, a group's ###
    lines = [f"{level} {path}", "", f"Usage: `{cell(usage(command, ctx))}`", ""]
    lines += prose(command.help or "")
    lines += arguments(command, ctx)
    lines += options(command, ctx)
    return lines


def page(root: click.Command, name: str = "bench") -> str:
    lines = [TITLE, "", INTRO, ""]
    for command, ctx in commands(root, click.Context(root, info_name=name)):
        lines += section(command, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"

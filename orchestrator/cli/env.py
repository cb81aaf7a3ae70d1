"""`bench env` and `bench models`: the framework environments and what they build."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from orchestrator.cli.options import FieldType, echo, env_dir_option
from orchestrator.config import pins
from orchestrator.config.field_docs import allowed
from orchestrator.config.run_config import FRAMEWORKS
from orchestrator.config.values import format_size
from orchestrator.errors import ConfigError
from orchestrator.provision import env_build, envs
from orchestrator.text.terminal import safe_line
from workers import releases
from workers.models import check_image_size


@click.command("models")
@click.option(
    "--framework",
    "frameworks",
    multiple=True,
    help=f"Only this framework (repeatable): {allowed('framework')}.",
)
@click.option(
    "--model", "model_names", multiple=True, help=f"Only this model (repeatable): {allowed('model')}."
)
@click.option(
    "--classes",
    type=FieldType("classes", "--classes"),
    default=1000,
    show_default=True,
    help=f"Classes of the models' last layer; {allowed('classes')}.",
)
@click.option(
    "--image-size",
    type=FieldType("image_size", "--image-size"),
    default=224,
    show_default=True,
    help=f"Side of the square input images, in pixels; {allowed('image_size')}.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: for reading; json: for other tools.",
)
@env_dir_option
def models_command(
    frameworks: tuple[str, ...],
    model_names: tuple[str, ...],
    classes: int,
    image_size: int,
    fmt: str,
    env_dir: str | None,
) -> None:
    """Build every model in every framework's environment and compare trainable parameter counts.

    Each model is built for real, in its own process, in that framework's environment; the
    reference is the count computed from the one definition in workers/models/.

    \b
    Examples:
      bench models
      bench models --framework mxnet --format json
    """
    from orchestrator.config.run_config import MODELS
    from orchestrator.launch import probe

    names = _known(frameworks, [f for f in FRAMEWORKS if f != "fault"], "--framework")
    wanted = _known(model_names, list(MODELS), "--model")
    for model in wanted:
        try:
            check_image_size(model, image_size)
        except ValueError as exc:
            raise ConfigError(f"--image-size: {exc}") from None
    rows = probe.probe_all(
        names,
        wanted,
        classes,
        image_size,
        env_dir,
        echo=None if fmt == "json" else lambda t: echo(t, err=True),
    )
    if fmt == "json":
        echo(json.dumps(rows, indent=2))
        return
    echo(_models_table(rows, names, wanted, classes))


def _known(given: tuple[str, ...], known: list[str], option: str) -> list[str]:
    for name in given:
        if name not in known:
            raise ConfigError(f"{option}: unknown {name!r} (known: {', '.join(known)})")
    return list(given) or known


def _cell(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: str(row.get(key, "—"))


def _models_table(
    rows: list[dict[str, Any]], frameworks: list[str], model_names: list[str], classes: int
) -> str:
    from orchestrator.text.formats import Column, render

    table = []
    for model in model_names:
        mine = [r for r in rows if r["model"] == model]
        line: dict[str, Any] = {"model": model, "reference": f"{mine[0]['reference']:,}"}
        counts = set()
        for r in mine:
            if r["outcome"] == "ok" and r.get("output_shape") not in (None, r.get("expected_output")):
                line[r["framework"]] = f"output {r['output_shape']}"
                counts.add(-1)
            elif r["outcome"] == "ok":
                line[r["framework"]] = f"{r['parameters']:,}"
                counts.add(r["parameters"])
            else:
                line[r["framework"]] = r["outcome"]
        line["identical"] = "yes" if counts == {mine[0]["reference"]} else ("—" if not counts else "NO")
        table.append(line)
    columns = [
        Column("model", "model", lambda r: r["model"]),
        Column("reference", "reference", lambda r: r["reference"]),
    ]
    columns += [Column(f, f, _cell(f)) for f in frameworks]
    columns.append(Column("identical", "identical", lambda r: r["identical"]))
    notes = [
        safe_line(f"  {r['framework']}/{r['model']}: {r['outcome']}: {r['reason']}")
        for r in rows
        if r["outcome"] != "ok"
    ]
    return render(table, columns, "table") + ("\n" + "\n".join(notes) if notes else "")


@click.group()
def env() -> None:
    """Framework environments: one per framework, from pinned requirement files.

    \b
    Examples:
      bench env setup pytorch
      bench env list
    """


@env.command("setup")
@click.argument("frameworks", nargs=-1)
@click.option(
    "--python",
    "python",
    default=None,
    help="A Python 3.6 to build Singa's environment from (env BENCH_PYTHON36; "
    "default: pyenv's 3.6.x, then python3.6 on PATH).",
)
@click.option(
    "--variant",
    type=click.Choice(envs.VARIANTS),
    default="auto",
    show_default=True,
    help="Which builds: auto = GPU builds (envs/<framework>-cuda.txt) where an NVIDIA GPU is "
    "present and the framework has one, else CPU builds.",
)
@click.option(
    "--version",
    "version",
    type=FieldType("version", "--version"),
    default=None,
    help="Another release than the pinned one, from its pin set envs/FRAMEWORK@VERSION.txt, into its "
    "own environment FRAMEWORK@VERSION (one framework only).",
)
@env_dir_option
def env_setup(
    frameworks: tuple[str, ...], python: str | None, variant: str, version: str | None, env_dir: str | None
) -> None:
    """Create or update the environments of FRAMEWORKS (default: all that have pinned requirements).

    \b
    Examples:
      bench env setup                 # every framework
      bench env setup pytorch singa --python /usr/bin/python3.6
      bench env setup jax --version 0.4.30
    """
    if version is not None:
        if len(frameworks) != 1 or frameworks[0] not in envs.DISTRIBUTIONS:
            raise ConfigError(
                "bench env setup --version: name one framework, e.g. `bench env setup jax --version 0.4.30`"
            )
        env_build.setup(frameworks[0], env_dir, echo=echo, python=python, variant=variant, version=version)
        return
    names = frameworks or tuple(f for f in FRAMEWORKS if envs.requirements_file(f).exists())
    for name in names:
        if name not in FRAMEWORKS:
            raise ConfigError(f"bench env setup: unknown framework {name!r} (known: {', '.join(FRAMEWORKS)})")
        if name == "fault":
            echo("fault: runs on the orchestrator's own interpreter; nothing to set up")
            continue
        external = envs.registered(env_dir).get(name)
        if external and not os.environ.get(f"BENCH_PYTHON_{name.upper()}"):
            echo(
                f"{name}: uses {safe_line(external['python'])} (registered with bench env use); "
                f"`bench env forget {name}` to have bench make its own"
            )
            continue
        base, why = envs.base_python(name, python)
        if base is None and not frameworks:
            # Setting everything up goes on without it: its runs will be `unavailable`, saying this.
            echo(f"{name}: skipped: {why}", err=True)
            continue
        env_build.setup(name, env_dir, echo=echo, python=python, variant=variant)


@env.command("use")
@click.argument("framework")
@click.option("--python", "python", required=True, help="The interpreter that has the framework installed.")
@env_dir_option
def env_use(framework: str, python: str, env_dir: str | None) -> None:
    """Use an existing interpreter (a conda env, a cluster module, a vendor container's Python)
    as FRAMEWORK's environment instead of one bench makes.

    bench checks once that it runs bench's worker (Python 3.6 or newer) and builds a small model
    with the framework, and records the versions and build (cpu/cuda) the framework reports.

    \b
    Examples:
      bench env use pytorch --python /opt/conda/envs/torch/bin/python
      bench env use tensorflow --python "$(command -v python3)"
    """
    from orchestrator.launch import probe
    from orchestrator.provision import external_env

    entry = external_env.check(framework, python, probe.probe_with)
    envs.register(framework, entry, env_dir)
    # What the interpreter said of itself is its text, not bench's.
    echo(safe_line(f"{framework}: uses {entry['python']} ({external_env.describe(entry)})"))


@env.command("forget")
@click.argument("framework")
@env_dir_option
def env_forget(framework: str, env_dir: str | None) -> None:
    """Stop using the interpreter registered with `bench env use` for FRAMEWORK.

    \b
    Example:
      bench env forget pytorch
    """
    entry = envs.forget(framework, env_dir)
    if entry is None:
        raise ConfigError(f"bench env forget: no interpreter is registered for {framework!r}")
    echo(safe_line(f"{framework}: no longer uses {entry['python']}"))


@env.command("list")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: for reading; json: for other tools.",
)
@env_dir_option
def env_list(fmt: str, env_dir: str | None) -> None:
    """Each environment, the pinned release's and each other release's (FRAMEWORK@VERSION, where it
    has a pin set or an environment): status (ok, or unavailable and why), interpreter, versions,
    disk size, location.

    \b
    Example:
      bench env list --format json
    """
    wanted: list[tuple[str, str | None]] = [(name, None) for name in FRAMEWORKS]
    # Each other release that has a pin set or an environment: what can be made, and what was.
    pinned = [(name, release) for name in envs.DISTRIBUTIONS for release in pins.released_pins(name)]
    wanted += sorted(
        set(pinned) | set(env_build.made_here(env_dir)), key=lambda w: (w[0], releases.key(w[1]))
    )
    rows = [_list_row(envs.status(name, env_dir, release)) for name, release in wanted]
    if fmt == "json":
        echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        detail = (
            f"python {r['python_version']}, {r['framework']} {r['framework_version']}, {r['python']}"
            if r["status"] == "ok"
            else r["reason"]
        )
        if r["status"] == "ok" and r["build"]:
            detail += f", {r['build']} build"
        if r["location"] == "external":
            detail += ", external (bench env use)"
        elif r["disk_bytes"] is not None:
            detail += f", {format_size(r['disk_bytes'])} on disk"
        if r["up_to_date"] is False:
            again = f" --version {r['release']}" if r["release"] else ""
            detail += f" (out of date: its requirements changed; run bench env setup {r['framework']}{again})"
        name = f"{r['framework']}@{r['release']}" if r["release"] else r["framework"]
        echo(safe_line(f"{name:10s} {r['status']:12s} {detail}"))


def _list_row(status: envs.EnvStatus) -> dict[str, Any]:
    """A status as `bench env list` shows it: with the disk its folder takes (bench's own
    environments; a registered interpreter's is the user's, not counted)."""
    row = dict(status.__dict__)
    own = status.location not in (None, "external") and status.python is not None
    row["disk_bytes"] = env_build.disk_bytes(Path(status.location or "")) if own else None
    return row


@env.command("remove")
@click.argument("framework")
@click.option(
    "--version",
    "version",
    type=FieldType("version", "--version"),
    default=None,
    help="The release whose environment (FRAMEWORK@VERSION) to delete; default: the pinned release's.",
)
@env_dir_option
def env_remove(framework: str, version: str | None, env_dir: str | None) -> None:
    """Delete FRAMEWORK's environment that bench made (of the release --version names), and say how
    much space that freed. An interpreter registered with `bench env use` is not bench's to
    delete: `bench env forget` stops using it.

    \b
    Examples:
      bench env remove jax --version 0.4.30
      bench env remove mxnet
    """
    if framework not in envs.DISTRIBUTIONS:
        known = ", ".join(envs.DISTRIBUTIONS)
        raise ConfigError(f"bench env remove: unknown framework {framework!r} (known: {known})")
    folder, freed = env_build.remove(framework, env_dir, version)
    echo(safe_line(f"removed {folder.name} ({folder}): {format_size(freed)} freed"))

"""The `bench` command: the group, its commands gathered from one module per command group.

The error boundary, which turns a BenchError into a one-line message and an exit status, is
BenchGroup in orchestrator/cli/options.py.
"""

from __future__ import annotations

import logging

import click

from orchestrator.cli.calibrate import calibrate
from orchestrator.cli.env import env, models_command
from orchestrator.cli.options import BenchGroup
from orchestrator.cli.report import inspect, report, timeline
from orchestrator.cli.run import rerun, run
from orchestrator.cli.study import study
from orchestrator.cli.train import train
from orchestrator.cli.transfer import export_command, import_command
from orchestrator.text.terminal import SafeFormatter


@click.group(cls=BenchGroup)
@click.version_option(package_name="bench")
@click.option(
    "--debug",
    is_flag=True,
    help="Show the traceback of an internal error here instead of writing it to a file (env BENCH_DEBUG=1).",
)
def cli(debug: bool) -> None:
    """Benchmark deep learning frameworks against each other, honestly and reproducibly.

    \b
    Example:
      bench run --matrix matrices/quick.yaml && bench report
    """
    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter("bench: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


for command in (
    run,
    rerun,
    report,
    inspect,
    timeline,
    train,
    env,
    models_command,
    calibrate,
    export_command,
    import_command,
    study,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="bench")

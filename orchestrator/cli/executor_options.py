"""`bench run`'s choice of executor: its options, and the executor they make (docs/distributed.md)."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.errors import ConfigError
from orchestrator.executors.base import EXECUTORS, Executor
from orchestrator.executors.idle import MAX_WAIT_SECONDS
from orchestrator.executors.local import LocalExecutor

MAX_RETRIES = 100


class Bounded(click.ParamType):
    """A number within bounds; anything else is bench's one-line error (exit 1), naming the option."""

    def __init__(self, option: str, kind: type, high: float, what: str) -> None:
        self.option, self.kind, self.high, self.what = option, kind, high, what
        self.name = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = self.kind(value)
        except (TypeError, ValueError):
            number = None
        if number is None or not 0 <= number <= self.high:  # also refuses nan
            text = str(value)[:40]
            raise ConfigError(f"{self.option} {text!r}: expected {self.what}, 0 to {self.high:g}")
        return number


# The two disturbance options, shared with `bench study run` (cli/study.py).
WAIT_IDLE = click.option(
    "--wait-idle",
    type=Bounded("--wait-idle", float, MAX_WAIT_SECONDS, "seconds"),
    default=None,
    help="Before each run, wait up to SECONDS for the other load on its CPUs to drop below the "
    "threshold that flags a run disturbed; then run anyway (local executor; docs/profiler.md).",
)
RETRY_DISTURBED = click.option(
    "--retry-disturbed",
    type=Bounded("--retry-disturbed", int, MAX_RETRIES, "a count"),
    default=0,
    show_default=True,
    help="Run a configuration again, up to N more times, while its run is flagged disturbed "
    "(each attempt is recorded; reports take the latest). With --resume, a configuration whose "
    "latest run was flagged disturbed runs again too.",
)
OPTIONS = [
    click.option(
        "--executor",
        type=click.Choice(EXECUTORS),
        default="local",
        show_default=True,
        help="local: one run at a time on this machine; ray: each run a Ray task on a cluster's nodes "
        "(docs/distributed.md).",
    ),
    click.option(
        "--address",
        default="auto",
        show_default=True,
        envvar="RAY_ADDRESS",
        help="With --executor ray: the cluster (HOST:6379, ray://HOST:10001, or auto: the one `ray start` "
        "began here; env RAY_ADDRESS).",
    ),
    click.option(
        "--pack",
        is_flag=True,
        help="With --executor ray: as many runs per node as its CPUs and memory allow (throughput over "
        "timing fidelity; the report marks packed runs). Default: one run per node at a time.",
    ),
    WAIT_IDLE,
    RETRY_DISTURBED,
]


def executor_options(f: Any) -> Any:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


def check_disturbance_options(executor: str, wait_idle: float | None, retry_disturbed: int) -> None:
    """--wait-idle and --retry-disturbed are the local executor's (docs/profiler.md)."""
    if executor == "local":
        return
    if wait_idle is not None:
        raise ConfigError(
            "--wait-idle watches this machine's CPUs before each run: it works with the local executor "
            "only (a Ray run's node is not this machine; its runs are still flagged when disturbed)"
        )
    if retry_disturbed:
        raise ConfigError(
            "--retry-disturbed works with the local executor only (the Ray executor has taken every "
            "job by the time the last runs are flagged); bench report marks the disturbed runs"
        )


def make_executor(
    name: str, address: str, pack: bool, env_dir: str | None, wait_idle: float | None = None
) -> Executor:
    """Before the sweep starts, so that a cluster that cannot be used costs nothing recorded."""
    if name == "local":
        return LocalExecutor(env_dir, wait_idle)
    from orchestrator.executors.ray_cluster import (
        RayExecutor,  # ray is an extra: imported only when asked for
    )

    return RayExecutor(address, pack, env_dir)

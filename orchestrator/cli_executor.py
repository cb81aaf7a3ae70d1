"""`bench run`'s choice of executor: its options, and the executor they make (docs/distributed.md)."""

from __future__ import annotations

from typing import Any

import click

from orchestrator.executors import EXECUTORS, Executor, LocalExecutor

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
]


def executor_options(f: Any) -> Any:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


def make_executor(name: str, address: str, pack: bool, env_dir: str | None) -> Executor:
    """Before the sweep starts, so that a cluster that cannot be used costs nothing recorded."""
    if name == "local":
        return LocalExecutor(env_dir)
    from orchestrator.ray_executor import RayExecutor  # ray is an extra: imported only when asked for

    return RayExecutor(address, pack, env_dir)

"""The GPU verification in one command (issue 11, part 2; docs/gpu.md).

    python3 -m benchmarks.gpu.check --out gpu-check.md [--python PATH] [--budget SECONDS]
    python3 -m benchmarks.gpu.check --out gpu-check.md --phases matrix,oom,...
    python3 -m benchmarks.gpu.check --plan [--budget SECONDS]

Plans first (benchmarks/gpu/plan.py): the phases not yet done in its database (--work), in
order of value, each that fits the budget (default: one 10-minute call of the device tool) by its
recorded seconds; --phases names them instead. --plan prints that plan and exits, before anything
else (no GPU, no dependencies needed).

Then it checks, through the PyTorch interpreter (a child process), that CUDA is there. Without it,
it prints one line, "gpu_check: no CUDA device: <why>", writes only that line to --out and exits
with status 3. With it, it registers that interpreter as bench's pytorch environment (`bench env
use`, or BENCH_PYTHON_PYTORCH where bench has no such command), runs the phases below with `bench
run` into its own database (--work), and writes a markdown report of PASS / FAIL / NOTE checks
with their figures (benchmarks/gpu/report.py):

    matrix    small_cnn, alexnet, mobilenet_v2, resnet50, vgg16 at 224 px on cuda; resnet50 batch 1..512
    oom       out of device memory twice: a gpu_memory_budget, and a batch too large for the card
    kernels   trace: kernels for resnet50 and vgg16, then `bench report --kernels`
    overhead  benchmarks/harness/overhead.py: the harness against the bare loop, resnet50 224 px batch 64
    modes     PyTorch's modes and precisions (eager, graph, compiled; fp32, tf32, bf16, fp16) and
              JAX's where it has CUDA (benchmarks/gpu/modes.py)
    attention ViT-B/16 and GPT-2 small in fp32 and bf16, traced once: fused attention kernels
    transformers  matrices/transformers.yaml's cuda rows in PyTorch (and JAX where it has CUDA)

Exit status: 0 every check passed (NOTEs allowed), 1 some check failed, 2 it could not start
(a budget too short for any phase left, bench's dependencies missing and no wheel folder to
install them from, no interpreter),
3 no CUDA device. The orchestrator's pure-Python dependencies missing on the GPU machine are
installed from the wheel folder (--wheels, default .whl/, filled by benchmarks/gpu/wheels.sh)
into <work>/site, never into the machine's Python.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import site
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.gpu import plan as planning

REPO = Path(__file__).resolve().parents[2]
EXIT_FAILED, EXIT_SETUP, EXIT_NO_CUDA = 1, 2, 3
PHASES = planning.PHASES
# What the orchestrator imports, by module, and the distribution that provides it.
NEEDED = {
    "sqlalchemy": "SQLAlchemy",
    "click": "click",
    "yaml": "PyYAML",
    "psutil": "psutil",
    "pynvml": "nvidia-ml-py",
}
PROBE = r"""
import json, sys
out = {"python": sys.executable}
try:
    import torch
except Exception as exc:
    out["why"] = "cannot import torch ({}: {})".format(type(exc).__name__, exc)
else:
    out.update(torch=torch.__version__, cuda_build=torch.version.cuda, available=torch.cuda.is_available())
    if out["available"]:
        props = torch.cuda.get_device_properties(0)
        out.update(device=props.name, total_memory=props.total_memory, count=torch.cuda.device_count(),
                   capability="{}.{}".format(props.major, props.minor))
    elif torch.version.cuda is None:
        out["why"] = "torch {} is a CPU-only build ({})".format(torch.__version__, sys.executable)
    else:
        out["why"] = ("torch {} is built with CUDA {} but torch.cuda.is_available() is False "
                      "(no device visible, or no driver)".format(torch.__version__, torch.version.cuda))
print(json.dumps(out))
"""


class Stop(Exception):
    """The check cannot go on; the message is its one line, the code its exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="The GPU verification: cuda runs, NVML, OOM, kernels, energy, overhead; one report.",
        epilog="examples:\n  python3 -m benchmarks.gpu.check --plan\n"
        "  python3 -m benchmarks.gpu.check --out gpu-check.md --budget 560",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the report (markdown); needed but with --plan"
    )
    parser.add_argument("--work", type=Path, default=REPO / ".gpu-check", help="database, matrices, runs")
    parser.add_argument(
        "--python",
        default=None,
        help="PyTorch's interpreter (default: bench's pytorch environment, else this interpreter)",
    )
    parser.add_argument(
        "--phases",
        default=None,
        help=f"comma-separated, of {', '.join(PHASES)}: run these, in this order, done or not "
        "(default: the plan's, within --budget)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=planning.DEFAULT_BUDGET,
        help="seconds this call may take in all, its start and report included (at most "
        f"{planning.COMMAND_LIMIT} count; default {planning.DEFAULT_BUDGET}, one 10-minute call)",
    )
    parser.add_argument("--plan", action="store_true", help="print the plan and exit (no GPU needed)")
    parser.add_argument(
        "--jax-python",
        default=None,
        help="a JAX with CUDA for the modes phase (default: the PyTorch interpreter, if it has one)",
    )
    parser.add_argument("--wheels", type=Path, default=REPO / ".whl", help="wheels for missing dependencies")
    args = parser.parse_args(argv)
    if args.out is None and not args.plan:
        parser.error("--out is required (but with --plan)")
    if args.phases is not None:
        args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
        unknown = [p for p in args.phases if p not in PHASES]
        if unknown:
            parser.error(f"--phases: {unknown[0]} is not one of {', '.join(PHASES)}")
    return args


def make_plan(args: argparse.Namespace, started: float) -> planning.Plan:
    """This call's phases into args (phases, estimates, the time by which a phase must be done),
    the plan's markdown into args.plan_lines; Stop where the database cannot be read."""
    try:
        found = planning.recorded(args.work / "gpu-check.db", args.work)
    except ValueError as exc:
        raise Stop(str(exc), EXIT_SETUP) from None
    seconds = planning.estimates(found)
    estimated = {phase: s.seconds for phase, s in seconds.items()}
    order = planning.order_of_value()
    chosen = planning.plan(estimated, planning.done(found), args.budget, order, args.phases)
    args.plan_lines = planning.describe(chosen, seconds, args.budget)
    args.phases, args.estimates = list(chosen.chosen), estimated
    # A planned call starts a phase only while its estimate still fits (an earlier one may have
    # overrun its own); phases named by --phases all run.
    limit = min(args.budget, planning.COMMAND_LIMIT) - planning.REPORT_SECONDS
    args.deadline = None if chosen.forced else started + limit
    return chosen


def use_site(folder: Path) -> None:
    """Import from the wheel folder's installs in this process too. They may be installed after
    it started, so no launcher could have put them on its path; bench's own processes get them by
    PYTHONPATH. Appended: only what the machine's Python lacks is installed there."""
    site.addsitedir(str(folder))


def ensure_dependencies(wheels: Path, folder: Path) -> dict[str, str]:
    """The environment for bench's own processes; installs what is missing from the wheel folder."""
    env = dict(os.environ)
    paths = [str(REPO)]
    if folder.is_dir():
        paths.insert(0, str(folder))
        use_site(folder)
    missing = [dist for module, dist in NEEDED.items() if importlib.util.find_spec(module) is None]
    if missing:
        if not wheels.is_dir():
            raise Stop(
                f"missing {', '.join(missing)} and no wheel folder {wheels} (benchmarks/gpu/wheels.sh)",
                EXIT_SETUP,
            )
        # --no-deps: --target ignores what is installed, so pip would want every dependency again;
        # greenlet goes along where the folder has it (SQLAlchemy before 2.1 needs it).
        extra = ["greenlet"] if "SQLAlchemy" in missing and list(wheels.glob("greenlet-*.whl")) else []
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--find-links",
            str(wheels),
            "--target",
            str(folder),
            *missing,
            *extra,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            why = "; ".join(line.strip() for line in done.stderr.strip().splitlines()[-2:])
            raise Stop(f"installing {', '.join(missing)} from {wheels} failed: {why}", EXIT_SETUP)
        use_site(folder)
        paths.insert(0, str(folder))
        importlib.invalidate_caches()
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def pytorch_python(given: str | None) -> Path:
    if given:
        return Path(given)
    from orchestrator.provision import envs

    found, _ = envs.python_for("pytorch")
    return found if found is not None else Path(sys.executable)


def probe_cuda(python: Path) -> dict:
    """What the PyTorch interpreter says of CUDA; Stop with the one line where there is none."""
    if not python.exists():
        raise Stop(f"no PyTorch interpreter at {python}", EXIT_SETUP)
    try:
        done = subprocess.run(
            [str(python), "-c", PROBE], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise Stop("no CUDA device: the CUDA probe did not answer in 300 s", EXIT_NO_CUDA) from None
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        why = f"the probe exited {done.returncode}: {' '.join(done.stderr.split())[-300:]}"
        raise Stop(f"no CUDA device: {why}", EXIT_NO_CUDA) from None
    if not info.get("available"):
        raise Stop(f"no CUDA device: {info.get('why')}", EXIT_NO_CUDA)
    return info


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    try:
        chosen = make_plan(args, started)
        if args.plan:
            print("\n".join(args.plan_lines))
            return 0
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if not chosen.chosen and chosen.left:
            raise Stop(f"the plan runs no phase: {chosen.why}", EXIT_SETUP)
        env = ensure_dependencies(args.wheels, args.work / "site")
        cuda = probe_cuda(pytorch_python(args.python))
        print("\n".join(["gpu_check: plan", "", *args.plan_lines, ""]), flush=True)
    except Stop as stop:
        line = f"gpu_check: {stop}"
        print(line)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(line + "\n")
        return stop.code
    from benchmarks.gpu import phases  # after the dependencies: its report reads profiler/

    return phases.run_all(args, env, cuda)


if __name__ == "__main__":
    sys.exit(main())

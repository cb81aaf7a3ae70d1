"""What the orchestrator's own processes import while a command runs: the evidence for "the
orchestrator never imports a framework" (docs/architecture.md).

pytest's process cannot be asked: the project's .venv has no framework installed, so a framework
is never in its sys.modules whatever bench does, and what an earlier test imported hides the rest.
Instead the command runs in fresh processes of the .venv's interpreter, each recording every
module it imports or tries to (tests/import_record_site/sitecustomize.py): bench, and the
sampler and calibration processes it starts from the same environment. An attempt counts: the
.venv cannot import torch, so a guarded `import torch` would fail there and pass unseen.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SITE = Path(__file__).resolve().parent / "import_record_site"
# The frameworks' top-level packages, as their environments install them (envs/*.txt).
FRAMEWORK_MODULES = frozenset(
    {"torch", "torchvision", "tensorflow", "keras", "tf_keras", "mxnet", "paddle", "singa"}
    | {"jax", "jaxlib", "flax", "optax", "orbax"}
)
ADAPTERS = "workers.adapters"  # each framework's adapter: the orchestrator never imports one either


@dataclass(frozen=True)
class Recorded:
    """A command's exit status and output, and per process of the .venv it started, what it imported."""

    returncode: int
    stdout: str
    stderr: str
    imports: dict[str, frozenset[str]]  # "pid N: its command line" -> the dotted names it imported

    def importing(self, module: str) -> list[str]:
        """The processes that imported `module`."""
        return sorted(process for process, names in self.imports.items() if module in names)

    def forbidden(self) -> dict[str, list[str]]:
        """The processes that imported (or tried to import) a framework or an adapter, and what."""
        found = {
            process: sorted(n for n in names if _forbidden(n)) for process, names in self.imports.items()
        }
        return {process: names for process, names in found.items() if names}


def _forbidden(module: str) -> bool:
    return module.partition(".")[0] in FRAMEWORK_MODULES or (module + ".").startswith(ADAPTERS + ".")


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 1800) -> Recorded:
    """Run `command`; every process of this interpreter's environment it starts records its imports."""
    env = dict(os.environ if env is None else env)
    with tempfile.TemporaryDirectory(prefix="bench-imports-") as folder:
        env["BENCH_IMPORT_RECORD"], env["BENCH_IMPORT_RECORD_PREFIX"] = folder, sys.prefix
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))
        proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        imports = {}
        for path in Path(folder).iterdir():
            argv, *names = path.read_text().splitlines()
            imports[f"pid {path.name}: {' '.join(ast.literal_eval(argv))}"] = frozenset(names)
    return Recorded(proc.returncode, proc.stdout, proc.stderr, imports)


def bench(cwd: Path, *args: str, timeout: float = 1800) -> Recorded:
    """The bench CLI in a process of its own, as a user runs it, its imports recorded. BENCH_DEBUG:
    a bug shows its traceback in stderr instead of the one-line internal error."""
    command = [sys.executable, "-c", "from orchestrator.cli.main import main; main()", *args]
    return run(command, cwd, env={**os.environ, "BENCH_DEBUG": "1"}, timeout=timeout)


def sweep(folder: Path, matrix: str) -> tuple[Path, Recorded]:
    """`bench run` on `matrix` (YAML text) in `folder`, in a process of its own, its imports
    recorded; it must exit 0. The folder and the record, for a module's sweep fixture."""
    (folder / "m.yaml").write_text(matrix)
    recorded = bench(folder, "run", "--matrix", "m.yaml")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return folder, recorded


def assert_no_framework(recorded: Recorded, *expected: str) -> None:
    """bench's process was recorded (an empty record would prove nothing), and so were processes
    importing each of `expected` (profiler.sampler: the samplers bench started); no process of
    the orchestrator's environment imported or tried to import a framework or an adapter."""
    for module in ("orchestrator.cli.main", *expected):
        assert recorded.importing(module), f"no process imported {module}: {sorted(recorded.imports)}"
    found = recorded.forbidden()
    assert not found, f"processes of bench's environment imported a framework or an adapter: {found}"

"""What `fault_injection` counts, and the pieces its fault classes share.

The count, per sweep (a matrix's name: the sweep and its resumes): against the configurations its
matrix asked for (one run each), how many have no finished record (missing), how many finished
records there are beyond one (duplicated, or of a configuration the matrix did not ask for), and how
many finished runs were run again (redone: two or more of the configuration's run folders hold the
worker's result). A record is finished when its outcome is one `--resume` would not run again
(`interrupted` and the cluster faults are not).

The pieces: a matrix of short fault-worker runs (and tiny real PyTorch runs), `bench` as a process of
its own on one database and one folder of runs, and a run's end seen from outside (its worker's
result.json appearing in its folder: the moment just before bench writes its record).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from orchestrator.config.matrix import load_matrix
from orchestrator.launch.outcomes import RUN_AGAIN_ON_RESUME

BENCH = [sys.executable, "-c", "from orchestrator.cli.main import main; main()"]
POLL_S = 0.02  # how often a run's end is looked for: the record is written milliseconds after it
MOST_RESUMES = 8  # a sweep that still stops after this many --resume is reported, not retried forever


def short_matrix(folder: Path, name: str, runs: int, seconds: float = 1.0, real: int = 0) -> Path:
    """``runs`` fault-worker runs that sleep ``seconds`` and end ok, and ``real`` tiny PyTorch runs."""
    lines = [f"  - {{framework: fault, fault: sleep, seconds: {seconds}, seed: {i}}}" for i in range(runs)]
    lines += [
        f"  - {{framework: pytorch, model: small_cnn, dataset: synthetic, dataset_size: 32, image_size: 32,"
        f" classes: 3, batch_size: 16, warmup_steps: 1, seed: {i}}}"
        for i in range(real)
    ]
    path = folder / f"{name}.yaml"
    settings = (
        "{dataset_size: 16, batch_size: 8, epochs: 1, warmup_steps: 0, timeout: 300, sample_interval: 0.1}"
    )
    path.write_text(f"name: {name}\nsettings: {settings}\ninclude:\n" + "\n".join(lines) + "\n")
    return path


@dataclass
class Bench:
    """`bench run` of one matrix on one database, its run folders in ``runs``."""

    cwd: Path
    db: str
    matrix: Path
    runs: Path
    env: dict[str, str] | None = None

    def command(self, resume: bool) -> list[str]:
        extra = ["--resume"] if resume else []
        return [
            *BENCH,
            "run",
            "--matrix",
            str(self.matrix),
            "--db",
            self.db,
            "--runs-dir",
            str(self.runs),
            *extra,
        ]

    def start(self, resume: bool = False) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(resume),
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ended(self) -> set[Path]:
        """The run folders whose worker has written its result."""
        return {p.parent for p in self.runs.glob("sweep-*/*/result.json")}

    def next_end(self, proc: subprocess.Popen, seen: set[Path], timeout: float = 600) -> Path | None:
        """The next run to end (its folder), once its worker's result is there; None if bench ended
        first. ``seen`` gains it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            new = self.ended() - seen
            if new:
                found = min(new)
                seen.add(found)
                return found
            time.sleep(POLL_S)
        return None


@dataclass
class SweepCount:
    name: str
    asked: int
    missing: int
    duplicated: int
    redone: int


@dataclass
class Tally:
    """One fault class: the faults injected, how bench ended each time it stopped, the sweeps counted."""

    fault: str
    injected: int = 0
    stops: list[str] = field(default_factory=list)  # bench's last line, each time it ended non-zero
    resumes: int = 0
    sweeps: list[SweepCount] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def ended(self, proc: subprocess.Popen, what: str) -> None:
        """Note how a bench that has ended did: its exit status and last line where it was not 0."""
        _out, err = proc.communicate()
        if proc.returncode != 0:
            last = (err or "").strip().splitlines()[-1:] or ["(nothing on standard error)"]
            self.stops.append(f"{what}: exit {proc.returncode}: {last[0][:300]}")

    def finish(self, bench: Bench) -> None:
        """`bench run --resume` until the sweep finishes (exit 0), then count it. Always once at
        least: as a user catches up after a fault, --resume imports what was left pending."""
        for _ in range(MOST_RESUMES):
            proc = bench.start(resume=True)
            self.resumes += 1
            self.ended(proc, "--resume")
            if proc.returncode == 0:
                break
        self.sweeps.append(count(bench.db, bench.matrix, bench.runs))

    def summary(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "injected": self.injected,
            "stops": self.stops,
            "resumes": self.resumes,
            "missing": sum(s.missing for s in self.sweeps),
            "duplicated": sum(s.duplicated for s in self.sweeps),
            "redone": sum(s.redone for s in self.sweeps),
            "sweeps": [vars(s) for s in self.sweeps],
            "notes": self.notes,
        }


def count(db: str, matrix: Path, runs: Path) -> SweepCount:
    """The sweep of that matrix, counted against what the matrix asked for (see the docstring)."""
    m = load_matrix(matrix)
    wanted = {c.config_hash for c in m.configs}
    engine = sa.create_engine(db if "://" in db else f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT r.config_hash, r.outcome FROM runs r JOIN sweeps s ON s.id = r.sweep_id"
                    " WHERE s.name = :name"
                ),
                {"name": m.name},
            ).all()
    finally:
        engine.dispose()
    finished = Counter(h for h, outcome in rows if outcome not in RUN_AGAIN_ON_RESUME)
    missing = sum(1 for h in wanted if finished[h] == 0)
    duplicated = sum(n - 1 if h in wanted else n for h, n in finished.items() if n > 1 or h not in wanted)
    results = Counter(_config_of(p.parent) for p in runs.glob("sweep-*/*/result.json"))
    redone = sum(n - 1 for h, n in results.items() if h in wanted and n > 1)
    return SweepCount(m.name, len(wanted), missing, duplicated, redone)


def _config_of(run_dir: Path) -> str | None:
    try:
        return str(json.loads((run_dir / "spec.json").read_text())["config_hash"])
    except (OSError, ValueError, KeyError):
        return None

"""What writing one run's record costs on PostgreSQL against SQLite.

One real fault-worker run (its own process, the sidecar sampling it, epochs, events) gives the
record; `recording.store_run` then writes that same record, as `bench run` does after every run (one
transaction: the run, its epochs, environment, samples, phases), into a SQLite file and into a
PostgreSQL database, alternating between the two in blocks. Reported per run: median and 90th
percentile wall time, and the statements sent (on a real network each is one round trip more).

PostgreSQL: --postgres URL (an empty database), or a throwaway local server started here from
Debian's binaries (tests/postgres_server.py) with fsync on, like the SQLite file's commits.

    .venv/bin/python -m benchmarks.harness.db_write_cost [--runs 200 --hold-seconds 6 --epochs 10]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from orchestrator.config import matrix
from orchestrator.launch.execute import execute
from orchestrator.launch.run_record import RunRecord
from orchestrator.provision import datasets
from orchestrator.storage.db import Database
from orchestrator.sweep import recording

BLOCK = 10


def real_record(folder: Path, hold_seconds: float, epochs: int) -> RunRecord:
    """One fault-worker run, start to end, as the executor records it."""
    path = folder / "m.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            name: write-cost
            settings: {{framework: fault, fault: hold, hold_seconds: {hold_seconds}, hold_memory_mb: 50,
                       hold_threads: 2, epochs: {epochs}, dataset_size: 256, batch_size: 8}}
            """
        ).lstrip()
    )
    [config] = matrix.load_matrix(path).configs
    data = datasets.prepare_all([config]).get(config.config_hash)
    rec = execute(config, folder / "run", None, data_file=data)
    if rec.outcome.outcome != "ok":
        raise SystemExit(f"the fault worker's run ended {rec.outcome.outcome}: {rec.outcome.reason}")
    return rec


@contextlib.contextmanager
def postgres_url(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from tests import postgres_server

    bin_dir = postgres_server.binaries()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL binaries (apt-get install postgresql), and no --postgres URL")
    with postgres_server.running(bin_dir, fsync=True) as server:
        yield server.create_database("bench")


def count_statements(db: Database) -> list[int]:
    counter = [0]

    def seen(*_args: object) -> None:
        counter[0] += 1

    sa.event.listen(db.engine, "before_cursor_execute", seen)
    return counter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="records written to each backend")
    parser.add_argument("--hold-seconds", type=float, default=6.0, help="the run's length: its samples")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--postgres", default=None, help="an empty PostgreSQL database's URL")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-write-cost-") as tmp, postgres_url(args.postgres) as pg:
        rec = real_record(Path(tmp), args.hold_seconds, args.epochs)
        dbs = {
            "sqlite": Database(f"sqlite:///{tmp}/bench.db", create=True),
            "postgresql": Database(pg, create=True),
        }
        counters = {name: count_statements(db) for name, db in dbs.items()}
        sweeps = {
            name: recording.start_sweep(db, "write-cost", "matrix", args.runs, None, None)
            for name, db in dbs.items()
        }
        times: dict[str, list[float]] = {name: [] for name in dbs}
        statements: dict[str, int] = {}
        for block in range(0, args.runs, BLOCK):
            order = list(dbs) if (block // BLOCK) % 2 == 0 else list(reversed(dbs))
            for name in order:
                for _ in range(min(BLOCK, args.runs - block)):
                    before = counters[name][0]
                    start = time.perf_counter()
                    recording.store_run(dbs[name], sweeps[name], rec)
                    times[name].append(time.perf_counter() - start)
                    statements[name] = counters[name][0] - before
        for db in dbs.values():
            db.close()
    size = f"{len(rec.epochs)} epochs, {len(rec.timeline.samples)} samples, {len(rec.events)} events"
    print(f"one record: {size}; {args.runs} writes to each backend, alternating in blocks of {BLOCK}")
    print("statements: per record, besides the transaction's BEGIN and COMMIT")
    print(f"{'backend':<11} {'median ms':>10} {'p90 ms':>8} {'mean ms':>8} {'statements':>10}")
    for name, values in times.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(
            f"{name:<11} {1000 * statistics.median(values):>10.2f} {1000 * p90:>8.2f} "
            f"{1000 * statistics.fmean(values):>8.2f} {statements[name]:>10}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Nothing lost (issue 45's proof): sweeps of short runs while the database, the disk and bench
itself fail around them, then, per sweep, the runs whose record is missing or duplicated against
what the matrices asked for (fault_tally.py says how each is counted), and the faults survived.

Each fault class is a function of its own (``--only CLASS``; ``--quick`` does fewer repetitions):

    restart   PostgreSQL restarted (fast shutdown, start) the moment a run's worker ends (10 times)
    outage    PostgreSQL stopped at a run's end for longer than bench's retry bound (3 times)
    writers   4 sweeps at once into one SQLite file, and 4 into one PostgreSQL database
    full      a small file system under the run folders and the database, filled at a run's end
    kill      SIGKILL of `bench run` at a random moment, or the moment a worker ends (20 times),
              each followed by `bench run --resume`
    real      tiny real PyTorch runs (small_cnn) beside fault runs, under one restart and one kill

Where bench stops (exit status not 0), the sweep is finished with `bench run --resume`, as a user
would, and the stop is listed. PostgreSQL is a throwaway server of Debian's binaries
(tests/postgres_server.py) on the loopback address; a small file system is a tmpfs (root only: the
class is skipped, saying so, elsewhere). Nothing reaches beyond the loopback address.

    .venv/bin/python -m benchmarks.harness.fault_injection [--quick] [--only CLASS] [--json FILE]
        [--outage-seconds S]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness.fault_tally import Bench, Tally, count, short_matrix

WRITERS = 4


@contextlib.contextmanager
def postgres() -> Iterator[Any]:
    """A throwaway PostgreSQL server (tests/postgres_server.py), fsync on as a team's would be."""
    from tests import postgres_server

    bin_dir = postgres_server.binaries()
    if bin_dir is None:
        raise SystemExit(
            "PostgreSQL is not installed (apt-get install postgresql): the classes on it cannot run"
        )
    with postgres_server.running(bin_dir, fsync=True) as server:
        yield server


def _stop_each_end(work: Path, name: str, times: int, runs: int, down_s: float, real: int = 0) -> Tally:
    """A sweep on PostgreSQL whose server is stopped the moment a run's worker ends, ``times``
    times, and started again ``down_s`` later; a bench that stops meanwhile is resumed."""
    tally = Tally(name)
    with postgres() as server:
        bench = Bench(work, server.create_database(), short_matrix(work, name, runs, real=real), work / name)
        proc: subprocess.Popen | None = bench.start()
        seen: set[Path] = set()
        while proc is not None and tally.injected < times:
            if bench.next_end(proc, seen) is None:
                tally.ended(proc, "run")
                if proc.returncode == 0:
                    tally.notes.append(f"the sweep ended after {tally.injected} of {times} stops")
                    proc = None
                    break
                proc = bench.start(resume=True)
                tally.resumes += 1
                continue
            server.stop()
            time.sleep(down_s)
            server.start()
            tally.injected += 1
        if proc is not None:
            tally.ended(proc, "run")
        tally.finish(bench)
    return tally


def restart(work: Path, quick: bool) -> Tally:
    """PostgreSQL restarted at run ends: bench waits for it and goes on (R's retry), losing nothing."""
    times = 3 if quick else 10
    return _stop_each_end(work, "restart", times, runs=times + 2, down_s=0.0)


def outage(work: Path, quick: bool, outage_s: float = 60.0) -> Tally:
    """PostgreSQL down longer than the retry bound: records pending, imported by --resume (R's)."""
    times = 1 if quick else 3
    return _stop_each_end(work, "outage", times, runs=times + 2, down_s=outage_s)


def writers(work: Path, quick: bool) -> Tally:
    """Four sweeps at once into one SQLite file, then four into one PostgreSQL database."""
    tally = Tally("writers")
    rounds = 1 if quick else 2
    with postgres() as server:
        for round_ in range(rounds):
            for backend in ("sqlite", "postgresql"):
                folder = work / f"writers-{backend}-{round_}"
                folder.mkdir()
                db = server.create_database() if backend == "postgresql" else str(folder / "bench.db")
                benches = [
                    Bench(
                        folder,
                        db,
                        short_matrix(folder, f"w{round_}{backend[0]}{i}", 6, 0.3),
                        folder / f"runs{i}",
                    )
                    for i in range(WRITERS)
                ]
                procs = [b.start() for b in benches]
                for i, proc in enumerate(procs):
                    tally.ended(proc, f"{backend} writer {i}")
                tally.injected += 1
                tally.sweeps += [count(b.db, b.matrix, b.runs) for b in benches]
    return tally


@contextlib.contextmanager
def small_filesystem(folder: Path, size: str) -> Iterator[Path | None]:
    """A tmpfs on folder; None (the caller notes why) where it cannot be mounted."""
    folder.mkdir()
    if os.geteuid() != 0:
        yield None
        return
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if made.returncode != 0:
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _fill(place: Path) -> Path:
    filler = place / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def full(work: Path, quick: bool) -> Tally:
    """The file system of the run folders (and the database beside them) filled at a run's end;
    room made once bench has stopped (or after a few more runs), then --resume."""
    tally = Tally("full")
    for rep in range(1 if quick else 3):
        with small_filesystem(work / f"full-{rep}", "32m") as place:
            if place is None:
                tally.notes.append("skipped: a small file system needs root and mount (a tmpfs)")
                return tally
            bench = Bench(
                work, str(place / "bench.db"), short_matrix(work, f"full{rep}", 6, 0.5), place / "runs"
            )
            proc, seen = bench.start(), set()
            if bench.next_end(proc, seen) is not None:
                filler = _fill(place)
                tally.injected += 1
                for _ in range(2):  # two more run ends, or bench stopping
                    if bench.next_end(proc, seen) is None:
                        break
                filler.unlink()
            proc.wait()
            tally.ended(proc, "run")
            tally.finish(bench)
    return tally


def kill(work: Path, quick: bool, seed: int = 45) -> Tally:
    """SIGKILL of bench at a random moment, or the moment a worker ends (the worst: the run is
    finished and not yet recorded), then --resume; each repetition its own sweep."""
    tally = Tally("kill")
    chance = random.Random(seed)
    db = str(work / "kill.db")
    for rep in range(5 if quick else 20):
        bench = Bench(work, db, short_matrix(work, f"kill{rep:02d}", 4, 0.8), work / f"kill{rep:02d}")
        proc, seen = bench.start(), set()
        if rep % 2 == 0:
            moment = "at a worker's end"
            reached = bench.next_end(proc, seen) is not None
        else:
            moment = "at a random moment"
            time.sleep(chance.uniform(0.3, 5.0))
            reached = proc.poll() is None
        if reached:
            proc.send_signal(signal.SIGKILL)
            tally.injected += 1
        else:
            tally.notes.append(f"kill{rep:02d}: bench ended before the kill {moment}")
        proc.wait()
        proc.communicate()
        tally.finish(bench)
    return tally


def real(work: Path, quick: bool) -> Tally:
    """Tiny PyTorch runs under a restart of PostgreSQL at a run's end, then a SIGKILL at another's."""
    if not (Path.home() / ".cache" / "bench" / "envs" / "pytorch").exists():
        tally = Tally("real")
        tally.notes.append("skipped: no PyTorch environment (bench env setup pytorch)")
        return tally
    restarted = _stop_each_end(work, "real", 1, runs=1, down_s=0.0, real=2)
    killed = Tally("real-kill")
    bench = Bench(work, str(work / "real.db"), short_matrix(work, "realkill", 1, real=2), work / "realkill")
    proc, seen = bench.start(), set()
    if bench.next_end(proc, seen) is not None:
        proc.send_signal(signal.SIGKILL)
        killed.injected += 1
    proc.wait()
    proc.communicate()
    killed.finish(bench)
    restarted.injected += killed.injected
    restarted.stops += killed.stops
    restarted.resumes += killed.resumes
    restarted.sweeps += killed.sweeps
    return restarted


CLASSES: dict[str, Callable[[Path, bool], Tally]] = {
    "restart": restart,
    "outage": outage,
    "writers": writers,
    "full": full,
    "kill": kill,
    "real": real,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=sorted(CLASSES), action="append", help="run this class (repeatable)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions of each fault")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (its path is printed)")
    parser.add_argument(
        "--outage-seconds",
        type=float,
        default=60.0,
        help="how long `outage` keeps PostgreSQL down: longer than bench's retry bound (default 60)",
    )
    args = parser.parse_args(argv)
    classes = {**CLASSES, "outage": functools.partial(outage, outage_s=args.outage_seconds)}
    os.environ.setdefault("BENCH_CALIBRATE", "0")  # seconds a sweep, which measure nothing here
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    os.environ["BENCH_STATE_DIR"] = str(work / "in-flight")  # this script's killed benches, no one else's
    tallies = []
    try:
        for name in args.only or list(CLASSES):
            started = time.monotonic()
            tally = classes[name](work, args.quick)
            summary = tally.summary()
            summary["seconds"] = round(time.monotonic() - started, 1)
            tallies.append(summary)
            _print(summary)
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    total = {k: sum(t[k] for t in tallies) for k in ("injected", "missing", "duplicated", "redone")}
    total["stops"] = sum(len(t["stops"]) for t in tallies)
    # Survived means nothing lost: the count of runs missing or duplicated is the figure; a bench
    # that stopped on a fault and needed a --resume is said beside it, not hidden.
    print(
        f"\nfaults injected: {total['injected']}; bench stopped {total['stops']} times (each finished with "
        f"--resume); runs missing: {total['missing']}, duplicated: {total['duplicated']}, "
        f"run twice: {total['redone']}"
    )
    if args.json:
        args.json.write_text(json.dumps({"total": total, "classes": tallies}, indent=2) + "\n")
    return 0


def _print(summary: dict) -> None:
    asked = sum(s["asked"] for s in summary["sweeps"])
    print(
        f"{summary['fault']:8} faults {summary['injected']:3}  runs asked {asked:4}"
        f"  missing {summary['missing']}  duplicated {summary['duplicated']}"
        f"  run twice {summary['redone']}  bench stopped "
        f"{len(summary['stops'])}x, resumed {summary['resumes']}x  ({summary['seconds']} s)"
    )
    for line in summary["stops"] + summary["notes"]:
        print(f"    {line}")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())

"""What the ETA costs a sweep (issue 22): reading the history at the start, and each redraw.

Against a database from `make_big_db.py` (100,000 runs, 90,000 of them `ok`): the time
`History.from_db` takes for a plan of every configuration in it (the worst case: every framework
and model wanted), making the `Eta` (every configuration estimated), what one run's begin and
end cost it (its family estimated again), and one redraw's `Eta.text()` with one run in flight.

    .venv/bin/python -m benchmarks.harness.make_big_db /tmp/big.db --samples 0
    .venv/bin/python -m benchmarks.harness.eta_cost /tmp/big.db [--repeat 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness.make_big_db import configs
from orchestrator.storage.db import Database
from orchestrator.sweep.eta import Eta, History


def _timed(what, repeat: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = what()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    db = Database(str(args.path), create=False)
    plan = list(itertools.islice(configs(), 100_000))
    read, history = _timed(lambda: History.from_db(db, plan), args.repeat)
    assert isinstance(history, History)
    start, _ = _timed(lambda: Eta(len(plan), plan, history), args.repeat)
    eta = Eta(len(plan), plan, history)
    runs = iter(plan)

    def one_run() -> None:  # what a run's begin and end cost the ETA (its family summed again)
        config = next(runs)
        eta.begin(config)
        eta.end(config, "ok", 42.0)

    per_run, _ = _timed(one_run, args.repeat * 20)
    redraw, text = _timed(lambda: eta.text([(plan[-1], 3.0)]), args.repeat * 100)
    known = sum(len(v) for v in history.by_hash.values())
    print(f"plan: {len(plan)} configurations; history: {known} ok runs")
    print(f"History.from_db        {read:8.3f} s")
    print(f"Eta(...) (every sum)   {start:8.3f} s")
    print(f"a run's begin + end    {per_run * 1e3:8.2f} ms")
    print(f"Eta.text (a redraw)    {redraw * 1e6:8.1f} us   {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

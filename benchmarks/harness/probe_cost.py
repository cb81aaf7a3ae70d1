"""How long `bench models` takes per framework and model: each build-and-count is a process of its
own in the framework's environment (docs/performance.md, "The test suite's time").

    .venv/bin/python -m benchmarks.harness.probe_cost [--framework F ...] [--model M ...] [--image-size 64]

Prints one line per (framework, model): seconds, outcome, parameters; then each framework's total.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from orchestrator.config.run_config import FRAMEWORKS, MODELS
from orchestrator.launch import probe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--framework", action="append", choices=[f for f in FRAMEWORKS if f != "fault"])
    parser.add_argument("--model", action="append", choices=list(MODELS))
    parser.add_argument("--image-size", type=int, default=64)
    args = parser.parse_args()
    totals: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="probe-cost-") as tmp:
        for framework in args.framework or [f for f in FRAMEWORKS if f != "fault"]:
            for model in args.model or list(MODELS):
                start = time.perf_counter()
                row = probe.probe_one(framework, model, 1000, args.image_size, None, Path(tmp))
                took = time.perf_counter() - start
                totals[framework] = totals.get(framework, 0.0) + took
                print(f"{framework:<11} {model:<13} {took:6.1f} s  {row['outcome']} {row.get('parameters')}")
    for framework, total in totals.items():
        print(f"{framework:<11} total {total:6.1f} s")
    print(f"all         total {sum(totals.values()):6.1f} s")


if __name__ == "__main__":
    main()

"""`bench run --wait-idle SECONDS`: before each run, wait until the machine is quiet, for a while.

Quiet means the other load on the CPUs the next run may use (their busy time less this bench
process's own, over a window of WINDOW_SECONDS read from /proc/stat) is at most the threshold that
flags a run disturbed (profiler/disturbance.py): a machine quiet enough here is one on which the
run would not be flagged for what ran before it started. At the limit the run goes ahead anyway,
and is flagged if the load stays; the lines say so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from orchestrator.config.values import format_cpus
from profiler import disturbance

# Long enough for a steady figure (2 CPUs tick 200 times a second), short enough to cost little
# before every run of a sweep.
WINDOW_SECONDS = 1.0
# The longest wait --wait-idle accepts: a day.
MAX_WAIT_SECONDS = 86400.0


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system  # this process only: not the runs it has waited for


def other_load(cpus: set[int], window: float = WINDOW_SECONDS) -> float | None:
    """% of the CPUs' capacity that went to anything but this bench over the next ``window`` s."""
    before, own = disturbance.read_stat(), _own_seconds()
    time.sleep(window)
    found = disturbance.share(before, disturbance.read_stat(), cpus, _own_seconds() - own)
    return found.other_percent() if found else None


def wait_idle(
    cpus: set[int],
    limit: float,
    say: Callable[[str], None],
    measure: Callable[[set[int]], float | None] = other_load,
) -> bool:
    """Wait up to ``limit`` seconds for the other load on ``cpus`` to drop to the threshold;
    True if it did (or cannot be read), False if the machine stayed busy."""
    threshold, where = disturbance.OTHER_LIMIT, f"CPU {format_cpus(cpus)}"
    start = time.monotonic()
    figure = measure(cpus)
    if figure is None or figure <= threshold:
        return True
    say(
        f"waiting for a quiet machine: other load {figure:.0f}% of {where} (quiet: at most "
        f"{threshold:g}%), for up to {limit:g} s (--wait-idle)"
    )
    while time.monotonic() - start < limit:
        figure = measure(cpus)
        if figure is None or figure <= threshold:
            say(f"quiet after {time.monotonic() - start:.0f} s (other load {figure or 0:.0f}% of {where})")
            return True
    say(
        f"the machine stayed busy for {limit:g} s (--wait-idle): other load {figure:.0f}% of {where}, "
        f"above {threshold:g}%; running anyway (the run is flagged disturbed if the load stays)"
    )
    return False

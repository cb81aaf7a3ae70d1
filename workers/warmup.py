"""Warm-up to steady state, and the compile time it reveals (docs/architecture.md, "Timing").

A run's first steps pay for tracing, graph building, compiling and autotuning, and a graph or
compiled mode can take several steps to settle (a recompilation for a new shape, CUDA graphs
recorded on a later call). So warm-up runs at least ``warmup_steps`` steps, each timed on its own
(after a synchronisation: warm-up is untimed, so the syncs cost the measurement nothing), and goes
on until the last STEADY_WINDOW steps are steady, within bounds.

The rule: steady when each of the last STEADY_WINDOW steps is within STEADY_TOLERANCE of their
median. Three steps because one can be an outlier by chance (the median of three ignores it, but
"each within" then fails and waits for a clean window) while two would call a falling trend steady
too early; 10 % because a step that still compiles or autotunes costs several times a steady one,
far outside 10 %, while steady steps mostly lie within a few per cent of their median
(docs/performance.md, "Warm-up to steady state", says what was seen). The bounds
(MAX_EXTRA_STEPS beyond warmup_steps, and TIMEOUT_SHARE of the run's timeout spent in warm-up)
keep a step time that never settles from eating the run; the result then says it was not steady.

Standard library only and Python 3.6 code: every framework's interpreter runs it.
"""

import time

STEADY_WINDOW = 3
STEADY_TOLERANCE = 0.10
MAX_EXTRA_STEPS = 50
TIMEOUT_SHARE = 0.25
# Step times kept in the result: the first and the last KEPT_STEPS // 2 (warmup_steps may be 100,000).
KEPT_STEPS = 100

NO_WARMUP = "no warm-up (warmup_steps: 0): the first timed epoch includes any compilation"


def steady_median(seconds):
    """The median of the last STEADY_WINDOW step times when each is within STEADY_TOLERANCE of it;
    else None (too few steps, or not steady)."""
    if len(seconds) < STEADY_WINDOW:
        return None
    middle = median(seconds[-STEADY_WINDOW:])
    if all(abs(s - middle) <= STEADY_TOLERANCE * middle for s in seconds[-STEADY_WINDOW:]):
        return middle
    return None


def median(values):
    """The median of a non-empty list (the runner's time to target uses it too)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2.0


def _percent():
    return "{:g} %".format(100 * STEADY_TOLERANCE)


class Warmup(object):
    """Decides, step by step, whether warm-up goes on; then summarises it for the result.

    ``to_steady`` False (the fault worker, which measures nothing) runs exactly ``least`` steps.
    """

    def __init__(self, least, timeout, to_steady=True):
        self.least = least
        self.most = least + MAX_EXTRA_STEPS
        self.budget = TIMEOUT_SHARE * timeout if timeout else None  # None: no timeout, no share
        self.timeout = timeout
        self.to_steady = to_steady
        self.seconds = []
        self.steady = None  # the steady step's seconds, once steady
        self.stopped = None  # what ended a warm-up that never became steady
        self.began = time.perf_counter()

    def more(self):
        """Whether to run another warm-up step (call before each)."""
        done = len(self.seconds)
        if done < self.least:
            return True
        if not self.to_steady:
            return False
        self.steady = steady_median(self.seconds)
        if self.steady is not None:
            return False
        if done >= self.most:
            self.stopped = "the bound of {} warm-up steps (warmup_steps {} + {})".format(
                self.most, self.least, MAX_EXTRA_STEPS)
            return False
        # One more step must fit in the share, as the last one took.
        spent = time.perf_counter() - self.began + (self.seconds[-1] if self.seconds else 0)
        if self.budget is not None and spent > self.budget:
            self.stopped = "{:g} % of the run's timeout ({:g} s) spent in warm-up".format(
                100 * TIMEOUT_SHARE, self.timeout)
            return False
        return True

    def add(self, seconds):
        self.seconds.append(seconds)

    def steady_by(self):
        n = len(self.seconds)
        if self.steady is not None:
            return "{} consecutive steps within {} of their median after {} steps".format(
                STEADY_WINDOW, _percent(), n)
        if not self.to_steady:
            return ("a fixed warm-up of {} steps (warmup_steps; this adapter does not wait for a "
                    "steady state)".format(n))
        return "not steady: {}".format(self.stopped or "too few steps")

    def summary(self):
        """The result's "warmup" object (docs/architecture.md, "Timing")."""
        seconds = self.seconds
        n = len(seconds)
        # Not steady: the last steps' median is the best estimate of a steady step there is.
        steady = self.steady if self.steady is not None else median(seconds[-STEADY_WINDOW:])
        half = KEPT_STEPS // 2
        kept = seconds if n <= KEPT_STEPS else seconds[:half] + seconds[-half:]
        return {
            "steps": n,
            "least": self.least,
            "steady": self.steady is not None,
            "steady_by": self.steady_by(),
            "window": STEADY_WINDOW,
            "tolerance": STEADY_TOLERANCE,
            "step_seconds": kept,
            "step_seconds_cut": n - len(kept),
            "first_step_seconds": seconds[0],
            "steady_step_seconds": steady,
            # Time above what as many steady steps take: tracing, graph building, compiling,
            # autotuning, and anything else the first steps did that a steady step does not.
            "compile_seconds": max(0.0, sum(seconds) - n * steady),
        }


def none():
    """The "warmup" object of a run with warmup_steps 0."""
    return {"steps": 0, "least": 0, "steady": False, "steady_by": NO_WARMUP, "window": STEADY_WINDOW,
            "tolerance": STEADY_TOLERANCE, "step_seconds": [], "step_seconds_cut": 0,
            "first_step_seconds": None, "steady_step_seconds": None, "compile_seconds": None}

"""Which phases of benchmarks/gpu/check.py one call runs, in what order, within its time (issue 39;
docs/gpu.md, "What the check does").

The device machine comes in slots of 15 minutes of device time, machine start included, and at
most 600 s a command; the seven phases took about 1,550 s alone. So a call plans: the phases not
yet done in its database, in order of value (VALUE), each that still fits the budget once the
check's own start and report are set aside, from their recorded seconds (RECORDED, or what this
database recorded of them). What does not fit is left for the next slot, in the same order.

plan() is a pure function of those seconds, the phases done and the budget; recorded() and
estimates() read the database and weigh what it holds against the table. Standard library only:
`--plan` runs before the check installs its own dependencies, on a machine without a GPU.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

PHASES = ("matrix", "oom", "kernels", "overhead", "modes", "attention", "transformers")
COMMAND_LIMIT = 600  # the device tool's most seconds for one command
# The default budget: one call of the device tool's 600 s, less 40 s for the command around the check
# (its `timeout 575` backstop, copying the database back under $OUT; docs/gpu.md's first lines).
DEFAULT_BUDGET = 560
# Set aside from every budget, not measured on their own: the check's start (installing SQLAlchemy
# from the wheels on a fresh machine, the CUDA probe's torch import, `bench env use` for PyTorch and
# JAX) and its report (`bench report --kernels`, the NVTX probe). docs/gpu.md's fourth run bounds
# them: 673 s of device time for 525 s of phases, machine start and two calls' start and report.
STARTUP_SECONDS = 45
REPORT_SECONDS = 15


@dataclass(frozen=True)
class Seconds:
    seconds: float
    source: str


# Each phase's seconds alone on the NVIDIA H200 as docs/gpu.md recorded them (the longer where a
# phase has two runs); every run there was on the same card and software.
RECORDED = {
    "modes": Seconds(491, "docs/gpu.md, second run (session 36), call 1"),
    "transformers": Seconds(363, "docs/gpu.md, fourth run (session 40), call 2"),
    "matrix": Seconds(327, "docs/gpu.md, third run (session 38), call 1"),
    "overhead": Seconds(155, "docs/gpu.md, second run (session 36), call 2; the third run's call 1: 149 s"),
    "attention": Seconds(100, "docs/gpu.md, fourth run (session 40), call 1"),
    "kernels": Seconds(66, "docs/gpu.md, third run (session 38), call 2; the fourth run's call 1: 62 s"),
    "oom": Seconds(46, "docs/gpu.md, third run (session 38), call 2"),
}
# What a phase does now that its recorded run did not: added to the table's seconds.
ALLOWANCES = {
    "transformers": Seconds(
        119,
        "JAX's 3 traced rows, unsupported at once then, now compile as their untraced twins did "
        "(13.0 + 50.5 + 55.2 s; docs/performance.md, The attention models on a GPU)",
    ),
}

# The order of value, first first: what no GPU has seen yet, then what a GPU has never run, then
# what changed since its last run on one, then the re-checks (within a tier, the oldest evidence first).
TIERS = ("pending", "never run", "code changed", "re-check")


@dataclass(frozen=True)
class Value:
    phase: str
    tier: str
    why: str


VALUE = (
    Value(
        "transformers",
        "pending",
        "JAX's 3 traced cuda rows with the jax.profiler GPU tracer (session 40), never run on a GPU",
    ),
    Value(
        "modes",
        "code changed",
        "PyTorch's graph and compiled runs compile into a fresh cache of their own since its run "
        "(session 36): compile seconds not yet seen cold on a GPU",
    ),
    Value("matrix", "re-check", "14 of 14 ok, session 38"),
    Value("overhead", "re-check", "paired 0.9997, separate processes 0.9991, session 38"),
    Value("oom", "re-check", "both ways PASS, session 38"),
    Value("attention", "re-check", "PASS, session 40"),
    Value("kernels", "re-check", "PASS, sessions 38 and 40"),
)


def order_of_value(value: Sequence[Value] = VALUE) -> list[str]:
    """The phases, most valuable first: by tier, then as VALUE lists them."""
    return [v.phase for v in sorted(value, key=lambda v: TIERS.index(v.tier))]


@dataclass(frozen=True)
class Found:
    """A phase's latest record in the check's work folder."""

    seconds: float | None
    finished: bool  # False: cut off (by a time limit, a kill): its seconds are a lower bound


@dataclass(frozen=True)
class Plan:
    chosen: tuple[str, ...]  # run by this call, in this order
    left: tuple[str, ...]  # not done, not chosen: for the next slot, in order of value
    done: tuple[str, ...]  # finished in the database: skipped
    seconds: float  # the chosen phases' estimated seconds
    available: float  # what the budget leaves for phases
    forced: bool  # --phases named them
    why: str


def available(budget: float, limit: float = COMMAND_LIMIT) -> float:
    return min(budget, limit) - STARTUP_SECONDS - REPORT_SECONDS


def plan(
    estimated: Mapping[str, float],
    done: Collection[str],
    budget: float,
    order: Sequence[str],
    phases: Sequence[str] | None = None,
) -> Plan:
    """This call's phases: ``phases`` as given (--phases), else, in ``order``, each not done that
    fits what the budget still leaves (a phase too long for it does not stop a shorter one after it)."""
    room = available(budget)
    if phases is not None:
        chosen = tuple(phases)
        total = sum(estimated[p] for p in chosen)
        why = f"--phases: {', '.join(chosen) or 'none'}, as given, done or not ({total:.0f} s estimated"
        why += f", over the {room:.0f} s the budget leaves)" if total > room else ")"
        left = tuple(p for p in order if p not in done and p not in chosen)
        return Plan(chosen, left, tuple(p for p in order if p in done), total, room, True, why)
    picked: list[str] = []
    missed: list[str] = []
    for phase in order:
        if phase in done:
            continue
        if estimated[phase] <= room - sum(estimated[p] for p in picked):
            picked.append(phase)
        else:
            missed.append(phase)
    total = sum(estimated[p] for p in picked)
    if picked:
        why = f"runs {', '.join(picked)} ({total:.0f} s estimated)"
    elif missed:
        shortest = min(missed, key=lambda p: estimated[p])
        why = (
            f"nothing fits: the shortest phase left, {shortest}, needs {estimated[shortest]:.0f} s "
            f"of the {room:.0f} s the budget leaves"
        )
    else:
        why = "nothing left: every phase is done in this database"
    return Plan(tuple(picked), tuple(missed), tuple(p for p in order if p in done), total, room, False, why)


def estimates(
    found: Mapping[str, Found],
    recorded: Mapping[str, Seconds] = RECORDED,
    allowances: Mapping[str, Seconds] = ALLOWANCES,
) -> dict[str, Seconds]:
    """Each phase's expected seconds: what this database recorded of a finished run of it, else
    the table's (with its allowance), or more where a cut-off run here already took longer."""
    out = {}
    for phase, seconds in recorded.items():
        extra = allowances.get(phase)
        table = Seconds(seconds.seconds + (extra.seconds if extra else 0), seconds.source)
        if extra:
            table = Seconds(
                table.seconds,
                f"{seconds.source}: {seconds.seconds:.0f} s, + {extra.seconds:.0f} s: {extra.source}",
            )
        here = found.get(phase)
        if here is None or here.seconds is None:
            out[phase] = table
        elif here.finished:
            out[phase] = Seconds(here.seconds, "this database, its latest run")
        elif here.seconds > table.seconds:
            out[phase] = Seconds(here.seconds, "this database: a run cut off after as long")
        else:
            out[phase] = table
    return out


def _span(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def recorded(db: Path, work: Path) -> dict[str, Found]:
    """What the work folder holds of each phase: the latest sweep gpu-check-<phase> (finished, or
    cut off: its seconds until its last run ended), and the overhead phase's figures file."""
    found: dict[str, Found] = {}
    if db.exists():
        query = (
            "SELECT s.status, s.started_at, coalesce(s.ended_at, "
            "(SELECT max(r.ended_at) FROM runs r WHERE r.sweep_id = s.id)) "
            "FROM sweeps s WHERE s.name = ? ORDER BY s.id DESC LIMIT 1"
        )
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                for phase in PHASES:
                    row = conn.execute(query, (f"gpu-check-{phase}",)).fetchone()
                    if row is not None:
                        found[phase] = Found(_span(row[1], row[2]), row[0] == "finished")
        except (sqlite3.Error, ValueError) as exc:
            raise ValueError(f"cannot read the phases done from {db}: {exc}") from None
    if (work / "overhead.json").exists():  # written only when benchmarks/harness/overhead.py finished
        text = (work / "overhead.txt").read_text() if (work / "overhead.txt").exists() else ""
        wall = re.search(r"^benchmark wall time: ([0-9.]+) s$", text, re.M)
        found["overhead"] = Found(float(wall.group(1)) if wall else None, True)
    return found


def done(found: Mapping[str, Found]) -> set[str]:
    return {phase for phase, f in found.items() if f.finished}


def describe(chosen: Plan, seconds: Mapping[str, Seconds], budget: float) -> list[str]:
    """The plan as markdown: what this call runs, what is left, what is done, and why."""
    tiers = {v.phase: f"{v.tier}: {v.why}" for v in VALUE}
    capped = f", {COMMAND_LIMIT} s of it in one command" if budget > COMMAND_LIMIT else ""
    why = chosen.why[0].upper() + chosen.why[1:]
    lines = [
        f"Budget {budget:.0f} s{capped}, less {STARTUP_SECONDS + REPORT_SECONDS} s for the check's "
        f"own start and report: {chosen.available:.0f} s for phases. {why}.",
        "",
        "| phase | this call | estimated s | from | value |",
        "|---|---|---|---|---|",
    ]
    rows = [(p, "runs") for p in chosen.chosen] + [(p, "next slot") for p in chosen.left]
    rows += [(p, "done") for p in chosen.done if p not in chosen.chosen]
    for phase, what in rows:
        est = seconds[phase]
        lines.append(f"| {phase} | {what} | {est.seconds:.0f} | {est.source} | {tiers[phase]} |")
    return lines


def next_slot(db: Path, work: Path, budget: float = DEFAULT_BUDGET) -> list[str]:
    """The report's last section: what the database still lacks, in order of value, and what a
    call with the default budget would run of it."""
    lines = ["", "## Left for the next slot", ""]
    try:
        found = recorded(db, work)
    except ValueError as exc:  # the report is written all the same
        return lines + [str(exc)]
    seconds = estimates(found)
    following = plan({p: s.seconds for p, s in seconds.items()}, done(found), budget, order_of_value())
    if not following.chosen and not following.left:
        return lines + ["Nothing: every phase is done in this database."]
    left = [f"{p} ({seconds[p].seconds:.0f} s)" for p in following.chosen + following.left]
    lines.append(f"In order of value: {', '.join(left)}.")
    lines.append(
        f"A call with the default budget ({budget:.0f} s) on this database would run "
        f"{', '.join(following.chosen) or 'nothing'} (`python3 -m benchmarks.gpu.check --plan`)."
    )
    return lines

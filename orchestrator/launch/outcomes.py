"""Turn how a worker ended (exit status, result file, event stream, stderr) into one outcome.

Every run ends in exactly one outcome with its evidence; see docs/outcomes.md for the table.
"""

from __future__ import annotations

import json
import math
import re
import signal
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from orchestrator.config.values import format_size
from orchestrator.launch.process import Finished, memory_limit
from profiler.timeline import Timeline

OUTCOMES = (
    "ok",
    "error",
    "oom",
    "crash",
    "timeout",
    "unsupported",
    "unavailable",
    "interrupted",
    "invalid",
    "skipped",  # the backstop: not run, past its configuration's memory wall
    # Faults of a Ray cluster (docs/distributed.md); like interrupted, --resume runs them again.
    "node_lost",
    "ray_oom",
    "unschedulable",
    "cluster_error",
)
CLUSTER_OUTCOMES = ("node_lost", "ray_oom", "unschedulable", "cluster_error")
# Outcomes that say nothing about the configuration, only about how its run was stopped.
RUN_AGAIN_ON_RESUME = ("interrupted", *CLUSTER_OUTCOMES)
WORKER_STATUSES = {"ok", "error", "oom", "unsupported", "unavailable"}
STDERR_TAIL_BYTES = 8192
# What is read of a worker's files, whatever their size: the longest event line, how many events
# are kept (step events collapsed), and the largest result file.
EVENT_LINE_BYTES = 64 << 10
EVENTS_HEAD = 1000
EVENTS_TAIL = 10_000
# What bench reads of a worker's files and keeps of any text (docs/outcomes.md, "Bounds"): the
# worker is outside input; a 20 MB exception message must not become 76 MiB of database.
RESULT_LIMIT = 16 << 20  # bytes of result.json; a larger one makes the run `invalid`
EVIDENCE_LIMIT = 64 << 10  # bytes of each stored text: its head and tail, with what was cut between
EPOCH_KEYS = ("repeat", "epoch", "steps", "images")
EPOCH_NUMBERS = (
    "seconds",
    "steps",
    "images",
    "images_per_second",
    "seconds_per_image",
    "train_loss",
    "val_loss",
    "val_accuracy",
    "os_threads",
    "minor_faults",
    "extra",  # 1: an epoch added for min_time/min_steps (orchestrator/config/samples.py)
    "wall_seconds",  # since the repeat's reset: its training and evaluation so far (time to accuracy)
)
EPOCH_COLUMNS = ("repeat", "epoch", *EPOCH_NUMBERS)  # what the epochs table keeps of a record
# What frameworks print when they run out of memory without raising a Python exception.
# A SIGKILL that bench did not send counts as the kernel's OOM killer when the run's RSS in its last
# samples had come this close to the memory it could have.
NEAR_LIMIT = 0.9
OOM_TEXT = re.compile(r"out of memory|std::bad_alloc|cannot allocate memory|MemoryError", re.I)


@dataclass
class Outcome:
    outcome: str
    reason: str | None = None
    exit_code: int | None = None
    signal_number: int | None = None
    signal_name: str | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    traceback: str | None = None
    result: dict[str, Any] | None = field(default=None, repr=False)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def read_tail(path: Path, size: int = STDERR_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def bounded(text: Any, limit: int = EVIDENCE_LIMIT) -> str | None:
    """Text to store: at most ``limit`` bytes of UTF-8, its head and tail kept around a marker that
    says how much was cut; anything not text is stored as its JSON. None stays None."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = json.dumps(text, sort_keys=True, default=str)
    # "replace": a lone surrogate (valid in JSON, not in UTF-8) would fail the database's encoder.
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return data.decode("utf-8")
    cut = len(data) - limit
    marker = f"\n[... {cut:,} bytes cut by bench ...]\n"
    half = limit // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[len(data) - half :].decode("utf-8", "ignore")
    return head + marker + tail


def read_events(path: Path) -> list[dict[str, Any]]:
    """The well-formed events, bounded in memory whatever the file holds.

    A line cut short by the worker's death, longer than ``EVENT_LINE_BYTES`` or not a JSON object
    is skipped. Each run of step events is kept as its last (all that where_it_died reads, in
    sweep/result_fields.py); of the rest, the first ``EVENTS_HEAD`` and the last ``EVENTS_TAIL`` are kept.
    """
    head: list[dict[str, Any]] = []
    tail: deque[dict[str, Any]] = deque(maxlen=EVENTS_TAIL)
    try:
        with open(path, "rb") as f:
            for line in _lines(f):
                event = _event(line)
                if event is None:
                    continue
                kept = tail if tail or len(head) >= EVENTS_HEAD else head
                if event.get("event") == "step" and kept and kept[-1].get("event") == "step":
                    kept[-1] = event
                else:
                    kept.append(event)
    except OSError:
        pass
    return head + list(tail)


def _lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each at most EVENT_LINE_BYTES; a longer one is read past, not held."""
    while line := f.readline(EVENT_LINE_BYTES + 1):
        if len(line) <= EVENT_LINE_BYTES:
            yield line
            continue
        while line and not line.endswith(b"\n"):
            line = f.readline(EVENT_LINE_BYTES)


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def fatal_traceback(stderr: str) -> str | None:
    """The faulthandler dump ('Fatal Python error: ...' and its stacks) in stderr, if any."""
    start = stderr.rfind("Fatal Python error")
    if start < 0:
        start = stderr.rfind("Current thread")
    return stderr[start:].strip() if start >= 0 else None


def read_result(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The result, checked (bounded, its shape), or None and why it is not usable."""
    if not path.exists():
        return None, "the worker wrote no result"
    try:
        with open(path, "rb") as f:
            raw = f.read(RESULT_LIMIT + 1)
        if len(raw) > RESULT_LIMIT:
            return None, f"the result file is larger than bench reads ({format_size(RESULT_LIMIT)})"
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"the result file is malformed: {bounded(str(exc), 300)}"
    except RecursionError:
        return None, "the result file is malformed: nested too deep"
    if not isinstance(data, dict) or data.get("status") not in WORKER_STATUSES:
        return None, "the result file has no valid status"
    problem = _shape_problem(data)
    if problem:
        return None, problem
    if data["status"] == "ok" and data.get("task") != "probe":
        problem = _check_ok_result(data)
        if problem:
            return None, problem
    return data, None


def _shape_problem(data: dict[str, Any]) -> str | None:
    """What bench reads of a result must have the type bench reads it as (the rest is kept as text)."""
    for key in ("exception", "info", "device_memory"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            return f"the result file's {key} is not an object"
    memory = data.get("device_memory") or {}
    if any(not _is_number(v) for k, v in memory.items() if k != "source" and v is not None):
        return "the result file's device_memory holds a value that is not a number"
    if data.get("epochs") is not None:
        if not isinstance(data["epochs"], list):
            return "the result file's epochs is not a list"
        problem = next(filter(None, (epoch_problem(e) for e in data["epochs"])), None)
        if problem is None and len(unique_epochs(data["epochs"])) != len(data["epochs"]):
            problem = "the result has the same epoch of the same repeat twice"
        return problem
    return None


def unique_epochs(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (repeat, epoch), the last one reported: the epochs table's key."""
    return list({(r["repeat"], r["epoch"]): r for r in records}.values())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def epoch_problem(record: Any) -> str | None:
    """Why an epoch record (result or epoch_end event) cannot be stored, or None."""
    if not isinstance(record, dict):
        return "the result has an epoch that is not a record"
    for key in EPOCH_KEYS:  # the epochs table's NOT NULL columns: a row without one cannot be stored
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
            return f"the result has an epoch whose {key} is not a count"
    if not _is_number(record.get("seconds")) or record["seconds"] < 0:
        return "the result has an epoch without valid seconds"
    for key in EPOCH_NUMBERS:
        if record.get(key) is not None and not _is_number(record[key]):
            return f"the result has an epoch whose {key} is not a number"
    return None


def _check_ok_result(data: dict[str, Any]) -> str | None:
    epochs = data.get("epochs")
    if not isinstance(epochs, list) or not epochs:
        return "the result reports ok but has no epochs"
    for record in epochs:
        if not isinstance(record, dict):
            return "the result has an epoch that is not a record"
        seconds = record.get("seconds")
        if not isinstance(seconds, (int, float)) or seconds < 0:
            return "the result has an epoch without valid seconds"
    return None


def _phase_text(record: dict[str, Any]) -> str:
    phase = record.get("phase") or "start-up"
    return f"{phase} {record['epoch']}" if record.get("epoch") and phase in ("epoch", "eval") else phase


def _over_budget(finished: Finished, timeline: Timeline) -> Outcome:
    budget = timeline.budget or {}
    number = -finished.returncode if finished.returncode < 0 else None
    peak = max([budget.get("rss") or 0] + [s.get("rss") or 0 for s in timeline.samples])
    return Outcome(
        "oom",
        reason=f"memory budget {format_size(budget.get('budget'))} exceeded: RSS "
        f"{format_size(budget.get('rss'))} in phase {_phase_text(budget)} (peak seen {format_size(peak)}); "
        "bench killed the process tree (SIGKILL)",
        exit_code=finished.returncode,
        signal_number=number,
        signal_name=signal_name(number) if number else None,
    )


def _kernel_oom(finished: Finished, timeline: Timeline | None) -> str | None:
    """Why a SIGKILL bench did not send looks like the kernel's OOM killer, or None."""
    if finished.oom_kills > 0:
        return f"the kernel's OOM killer fired {finished.oom_kills} time(s) in this cgroup during the run"
    live = [s for s in (timeline.samples if timeline else []) if not s.get("final") and s.get("rss")]
    limit = memory_limit()
    if not live or not limit:
        return None
    last = max(live[-3:], key=lambda s: s["rss"])
    if last["rss"] < NEAR_LIMIT * limit:
        return None
    return (
        f"its RSS in the last samples reached {format_size(last['rss'])} of the {format_size(limit)} "
        f"it could have ({100 * last['rss'] / limit:.0f}%, in phase {_phase_text(last)})"
    )


def _oom_line(stderr: str) -> str | None:
    """The last line of stderr's tail that reports running out of memory (host or device), if any."""
    lines = [line.strip() for line in stderr[-4000:].splitlines() if OOM_TEXT.search(line)]
    return lines[-1][:300] if lines else None


def _from_signal(finished: Finished, stderr: str, timeline: Timeline | None) -> Outcome:
    number = -finished.returncode
    name = signal_name(number)
    line = _oom_line(stderr) if number == signal.SIGABRT else None
    if line:
        # A C++ allocator failure (std::bad_alloc, a CUDA "out of memory" not turned into a Python
        # exception) ends in abort(): the memory ran out; the abort is only how the process went.
        return Outcome(
            "oom",
            reason=f"aborted (SIGABRT) after running out of memory: {line}",
            signal_number=number,
            signal_name=name,
            traceback=fatal_traceback(stderr),
        )
    evidence = _kernel_oom(finished, timeline) if number == signal.SIGKILL else None
    if evidence:
        return Outcome(
            "oom",
            reason=f"killed by SIGKILL, not sent by bench; {evidence}",
            signal_number=number,
            signal_name=name,
        )
    reason = f"killed by {name}"
    live = [s for s in (timeline.samples if timeline else []) if not s.get("final") and s.get("rss")]
    if number == signal.SIGKILL and live:
        reason += f" (not by bench; RSS in the last sample {format_size(live[-1]['rss'])}, no sign of OOM)"
    return Outcome(
        "crash",
        reason=reason,
        signal_number=number,
        signal_name=name,
        traceback=fatal_traceback(stderr),
    )


def from_result(result: dict[str, Any], returncode: int | None) -> Outcome:
    """The outcome a checked result says; ``returncode`` None where the process's end was not seen
    (bench was killed before it): the result's word is then all there is."""
    status = result["status"]
    exc = result.get("exception") or {}
    outcome = Outcome(
        status,
        reason=result.get("reason"),
        exit_code=returncode,
        exception_type=exc.get("type"),
        exception_message=exc.get("message"),
        traceback=exc.get("traceback"),
        result=result,
    )
    if status == "ok" and returncode is not None and returncode != 0:
        outcome.outcome = "error"
        outcome.reason = f"exited with status {returncode} after reporting ok"
    if status == "oom" and result.get("device_memory"):
        outcome.reason = f"{outcome.reason}; {device_memory_text(result['device_memory'])}"
    return outcome


def device_memory_text(memory: dict[str, Any]) -> str:
    """The framework's own account of device memory at the end, in words."""
    parts = [
        f"{label} {format_size(memory[key])}"
        for key, label in (
            ("max_memory_reserved", "peak reserved"),
            ("max_memory_allocated", "peak allocated"),
            ("total_memory", "of a device of"),
        )
        if memory.get(key) is not None
    ]
    return f"device memory ({memory.get('source', 'framework')}): {', '.join(parts)}"


def classify(finished: Finished, run_dir: Path, timeout: float, timeline: Timeline | None = None) -> Outcome:
    """The one outcome of a finished worker process, with its evidence."""
    stderr = read_tail(run_dir / "stderr.log")
    if finished.interrupted:
        return Outcome(
            "interrupted",
            reason=f"the sweep was interrupted ({finished.interrupted_by or 'Ctrl-C'})",
            exit_code=finished.returncode,
            traceback=fatal_traceback(stderr),
        )
    if finished.timed_out:
        return Outcome(
            "timeout",
            reason=f"exceeded its time limit of {timeout:g} s; process group killed (TERM, then KILL)",
            exit_code=finished.returncode,
            traceback=fatal_traceback(stderr),
        )
    if timeline is not None and timeline.budget is not None:
        return _over_budget(finished, timeline)
    if finished.returncode < 0:
        return _from_signal(finished, stderr, timeline)
    result, problem = read_result(run_dir / "result.json")
    if result is not None:
        return from_result(result, finished.returncode)
    if finished.returncode != 0:
        line = _oom_line(stderr)
        return Outcome(
            "oom" if line else "error",
            reason=f"exited with status {finished.returncode} ({problem})" + (f": {line}" if line else ""),
            exit_code=finished.returncode,
        )
    return Outcome("invalid", reason=f"exited 0 but {problem}", exit_code=0)

"""The checks of benchmarks/gpu/check.py, read from its database, and their markdown report.

Each check is PASS, FAIL or NOTE (measured, but judged by a person: a figure to explain) with the
figures it rests on. Reading is plain sqlite3; nothing here runs a framework or writes the database.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import overhead_paired
from profiler import energy
from profiler import kernels as rules

MIB = 1 << 20
MEMORY_TOLERANCE = 0.10  # NVML's per-process peak against torch.cuda.max_memory_reserved
OVERHEAD_GOAL = 1.02


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | NOTE
    summary: str
    details: list[str] = field(default_factory=list)
    missing: str | None = None  # the phase whose sweep this check found no trace of


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def latest_sweep(db: Path, name: str) -> int | None:
    if not db.exists():
        return None
    with connect(db) as conn:
        row = conn.execute("SELECT max(id) FROM sweeps WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


def sweep_runs(db: Path, name: str) -> list[dict[str, Any]]:
    """The latest sweep of that name: each configuration's latest run (a resumed sweep runs an
    interrupted one again), with its environment's extra (device_memory)."""
    sweep = latest_sweep(db, name)
    if sweep is None:
        return []
    with connect(db) as conn:
        rows = conn.execute(
            "SELECT r.*, e.extra, e.gpu_name FROM runs r LEFT JOIN environments e ON e.run_id = r.id "
            "WHERE r.sweep_id = ? ORDER BY r.id",
            (sweep,),
        ).fetchall()
    latest: dict[Any, dict[str, Any]] = {}
    for row in rows:  # by id: a later attempt replaces an earlier one of the same configuration
        run = dict(row)
        run["device_memory"] = json.loads(run.get("extra") or "{}").get("device_memory") or {}
        latest[run.get("config_hash") or run["id"]] = run
    return sorted(latest.values(), key=lambda r: r["id"])


def mib(value: float | None) -> str:
    return "—" if value is None else f"{value / MIB:,.0f}"


def fig(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def not_run(name: str, phase: str) -> Check:
    return Check(
        name, "NOTE", f"phase {phase} has no sweep in this database (not run: --phases)", missing=phase
    )


def cuda_oom(run: dict[str, Any]) -> bool:
    """The run ran out of device memory, by its own evidence (PyTorch's error), not a host OOM."""
    text = " ".join(str(run.get(k) or "") for k in ("reason", "exception_type", "exception_message"))
    return run["outcome"] == "oom" and (
        "CUDA out of memory" in text or run.get("exception_type") == "OutOfMemoryError"
    )


def check_runs(runs: list[dict[str, Any]]) -> Check:
    name = "every cuda run ok, images/s and epoch seconds"
    if not runs:
        return not_run(name, "matrix")
    largest = max(r["batch_size"] for r in runs)
    rows, failed, card = [], [], []
    for r in runs:
        rows.append(
            [
                r["id"],
                r["model"],
                r["batch_size"],
                r["outcome"],
                fig(r["images_per_second"]),
                fig(r["median_epoch_seconds"]),
                (r["reason"] or "")[:120],
            ]
        )
        if r["outcome"] == "ok" and r["images_per_second"] and r["median_epoch_seconds"]:
            continue
        # The largest batch may be beyond the card: an oom with PyTorch's evidence is an answer.
        (card if cuda_oom(r) and r["batch_size"] == largest else failed).append(r)
    header = ["run", "model", "batch", "outcome", "images/s", "epoch s (median)", "reason"]
    details = table(header, rows)
    if failed:
        ids = ", ".join(str(r["id"]) for r in failed)
        return Check(
            name,
            "FAIL",
            f"{len(failed)} of {len(runs)} runs did not end ok with figures (runs {ids})",
            details,
        )
    if card:
        return Check(
            name,
            "NOTE",
            f"{len(runs) - len(card)} of {len(runs)} ok; batch {largest} is beyond the "
            "card (oom, PyTorch's CUDA error as evidence)",
            details,
        )
    return Check(name, "PASS", f"{len(runs)} of {len(runs)} runs ok", details)


def check_memory(runs: list[dict[str, Any]]) -> Check:
    name = "NVML per-process memory against torch.cuda.max_memory_reserved"
    ok = [r for r in runs if r["outcome"] == "ok"]
    if not ok:
        return not_run(name, "matrix") if not runs else Check(name, "FAIL", "no ok run to compare")
    rows, missing, gaps = [], [], []
    for r in ok:
        nvml, torch = r["gpu_memory_peak_bytes"], r["device_memory"].get("max_memory_reserved")
        gap = nvml - torch if nvml is not None and torch is not None else None
        share = gap / torch if gap is not None and torch else None
        rows.append(
            [
                r["id"],
                r["model"],
                r["batch_size"],
                mib(nvml),
                mib(torch),
                mib(gap),
                "—" if share is None else f"{share:+.1%}",
                fig(r["gpu_util_mean"], 3),
            ]
        )
        if gap is None:
            missing.append(r["id"])
        else:
            gaps.append((gap, share))
    header = [
        "run",
        "model",
        "batch",
        "NVML peak MiB",
        "torch reserved MiB",
        "NVML − torch MiB",
        "of torch",
        "GPU util % (mean)",
    ]
    details = table(header, rows)
    if missing:
        return Check(name, "FAIL", f"runs {missing} lack NVML's peak or torch's (sampler or worker)", details)
    within = [s for _, s in gaps if abs(s) <= MEMORY_TOLERANCE]
    low, high = min(g for g, _ in gaps), max(g for g, _ in gaps)
    summary = f"{len(within)} of {len(gaps)} within {MEMORY_TOLERANCE:.0%}; "
    summary += f"NVML − torch from {mib(low)} to {mib(high)} MiB"
    if len(within) == len(gaps):
        return Check(name, "PASS", summary, details)
    details.append("")
    details.append(
        "NVML counts the whole process on the device: the CUDA context, cuBLAS/cuDNN handles and "
        "workspaces outside PyTorch's caching allocator; torch counts its allocator's reservations "
        "only. A gap of about the same MiB on every run is that fixed cost; one that grows with "
        "the batch is not, and needs explaining."
    )
    return Check(name, "NOTE", summary, details)


def check_oom(runs: list[dict[str, Any]], budget: bool) -> Check:
    name = "oom under gpu_memory_budget" if budget else "oom at a batch too large for the card"
    chosen = [r for r in runs if bool(r.get("gpu_memory_budget")) == budget]
    if not chosen:
        return not_run(name, "oom")
    r = chosen[-1]
    memory = r["device_memory"]
    details = [
        f"- run {r['id']}: {r['model']} batch {r['batch_size']} at {r['image_size']} px"
        + (f", gpu_memory_budget {mib(r['gpu_memory_budget'])} MiB" if budget else ""),
        f"- outcome: {r['outcome']}; exception: {r['exception_type'] or '—'}",
        f"- reason: {(r['reason'] or '—')[:600]}",
        f"- NVML peak: {mib(r['gpu_memory_peak_bytes'])} MiB; torch peak reserved: "
        f"{mib(memory.get('max_memory_reserved'))} MiB of {mib(memory.get('total_memory'))} MiB",
    ]
    if cuda_oom(r):
        return Check(name, "PASS", f"run {r['id']} is oom with PyTorch's CUDA error as evidence", details)
    if r["outcome"] == "oom":
        return Check(
            name, "FAIL", f"run {r['id']} is oom, but its evidence does not name the device", details
        )
    return Check(name, "FAIL", f"run {r['id']} ended {r['outcome']}, not oom", details)


def kernel_classes(db: Path, run_id: int) -> tuple[dict[str, float], list[str]]:
    """Each class's share of the run's kernel time, and the names no rule matched (a deliberate
    "other" rule, for bookkeeping, is a classification)."""
    with connect(db) as conn:
        query = "SELECT class, sum(share) FROM kernels WHERE run_id = ? GROUP BY class ORDER BY 2 DESC"
        shares = {c: s or 0.0 for c, s in conn.execute(query, (run_id,))}
        query = "SELECT name FROM kernels WHERE run_id = ? AND class = ? ORDER BY total_seconds DESC"
        other = [n for (n,) in conn.execute(query, (run_id, rules.OTHER)) if rules.rule_for(n) is None]
    return shares, other


def check_kernels(db: Path, runs: list[dict[str, Any]], report_text: str) -> Check:
    name = "trace: kernels on cuda, classified (resnet50, vgg16)"
    if not runs:
        return not_run(name, "kernels")
    details, failed, unclassified = [], [], {}
    for r in runs:
        shares, other = kernel_classes(db, r["id"])
        classes = ", ".join(f"{c} {s:.1%}" for c, s in shares.items()) or "no kernels recorded"
        details.append(
            f"- run {r['id']} {r['model']}: {r['outcome']}, backend {r['trace_backend'] or '—'}, "
            f"trace {r['trace_status'] or '—'}; {classes}"
        )
        if r["outcome"] != "ok" or r["trace_status"] != "ok" or not shares:
            failed.append(r["id"])
        for kernel in other:
            unclassified.setdefault(kernel, []).append(r["model"])
    if unclassified:
        details += [
            "",
            f"kernel names the rule table (profiler/kernels.py) leaves unclassified ({len(unclassified)}):",
        ]
        details += [f"- `{k}` ({', '.join(v)})" for k, v in unclassified.items()]
    details += ["", "`bench report --kernels`:", "", report_text.strip() or "(no output)"]
    if failed:
        return Check(name, "FAIL", f"runs {failed} have no usable trace", details)
    if unclassified:
        return Check(name, "NOTE", f"{len(unclassified)} kernel names need a rule", details)
    return Check(name, "PASS", "every kernel name classified", details)


def check_nvtx(runs: list[dict[str, Any]], library: str) -> Check:
    name = "NVTX ranges in the tracer's output"
    backends = sorted({r["trace_backend"] for r in runs if r.get("trace_backend")}) or [
        "none (kernels not run)"
    ]
    details = [
        f"- NVTX as workers/nvtx.py finds it for a PyTorch cuda run (libnvToolsExt, else "
        f"torch.cuda.nvtx): {library}",
        f"- tracer used: {', '.join(backends)}",
    ]
    if library in ("none", "") or library.startswith("probe failed"):
        return Check(name, "FAIL", "no NVTX in the worker's interpreter: cuda runs push no ranges", details)
    if "nsys" in backends:
        return Check(name, "NOTE", "nsys traced: look for warmup / epoch N / step N in its report", details)
    return Check(
        name,
        "NOTE",
        "ranges are pushed, but CUPTI's kernel records and torch.profiler do not carry "
        "NVTX ranges: not visible in this tracer's output (nsys or ncu would show them)",
        details,
    )


def check_energy(runs: list[dict[str, Any]]) -> Check:
    name = "GPU energy per epoch and per image"
    ok = [r for r in runs if r["outcome"] == "ok"]
    if not ok:
        return not_run(name, "matrix") if not runs else Check(name, "FAIL", "no ok run to measure")
    rows = [
        [
            r["id"],
            r["model"],
            r["batch_size"],
            fig(r["gpu_joules_per_epoch"]),
            fig(None if r["gpu_joules_per_image"] is None else r["gpu_joules_per_image"] * 1000),
            energy.describe(r),
        ]
        for r in ok
    ]
    details = table(["run", "model", "batch", "J/epoch", "mJ/image", "as bench says it"], rows)
    missing = [r["id"] for r in ok if r["gpu_joules_per_epoch"] is None]
    if missing:
        return Check(name, "FAIL", f"runs {missing} have no energy figure", details)
    sources = sorted({r["gpu_energy_source"] for r in ok})
    return Check(name, "PASS", f"{len(ok)} runs measured ({', '.join(sources)})", details)


def check_overhead(work: Path, runs: list[dict[str, Any]]) -> Check:
    name = "harness overhead against the bare loop (resnet50, 224 px, batch 64)"
    path = work / "overhead.json"
    if not path.exists():
        text = (work / "overhead.txt").read_text()[-1500:] if (work / "overhead.txt").exists() else ""
        return Check(
            name,
            "NOTE" if not text else "FAIL",
            "overhead not measured" if not text else "benchmarks/harness/overhead.py wrote no figures",
            ["```", text, "```"] if text else [],
            missing=None if text else "overhead",
        )
    saved = json.loads(path.read_text())
    harness = [r["harness"]["step_seconds"] for r in saved["rounds"]]
    bare = [r["bare"]["step_seconds"] for r in saved["rounds"]]
    details = [
        f"- separate processes, {len(harness)} rounds: harness median {statistics.median(harness) * 1e3:.2f} "
        f"ms/step, bare {statistics.median(bare) * 1e3:.2f} ms/step, ratio "
        f"{statistics.median(harness) / statistics.median(bare):.4f}"
    ]
    ratio = None
    if saved.get("paired"):
        times = saved["paired"]["paired"]
        h = [t for chunk in times["harness"] for t in chunk]
        b = [t for chunk in times["bare"] for t in chunk]
        ratio = overhead_paired.median_ratio(h, b)
        details.append(
            f"- paired, in one process ({len(h)} chunks a side): harness/bare median "
            f"{ratio:.4f}, 95% {overhead_paired.interval(h, b, overhead_paired.median_ratio)}"
        )
    ips = [
        r["images_per_second"]
        for r in runs
        if r["model"] == "resnet50" and r["batch_size"] == 64 and r["outcome"] == "ok"
    ]
    if ips:
        details.append(
            f"- the matrix's resnet50 batch 64 run: {ips[0]:.0f} images/s (fp32, TF32 where PyTorch "
            "allows it); set it beside NVIDIA's published PyTorch ResNet50 training figure for "
            "the same precision and card by hand: this script has no network to fetch it"
        )
    if ratio is None:
        return Check(name, "NOTE", "no paired figure (--paired-passes 0)", details)
    status = "PASS" if ratio <= OVERHEAD_GOAL else "FAIL"
    return Check(name, status, f"paired harness/bare {ratio:.4f} (goal ≤ {OVERHEAD_GOAL})", details)


def checks(db: Path, work: Path, context: dict[str, Any]) -> list[Check]:
    matrix, kernels = sweep_runs(db, "gpu-check-matrix"), sweep_runs(db, "gpu-check-kernels")
    oom = sweep_runs(db, "gpu-check-oom")
    found = [
        check_runs(matrix),
        check_memory(matrix),
        check_oom(oom, budget=True),
        check_oom(oom, budget=False),
        check_kernels(db, kernels, context.get("kernels_report", "")),
        check_nvtx(kernels, context.get("nvtx_library", "not probed")),
        check_energy(matrix),
        check_overhead(work, matrix),
    ]
    for c in found:
        if c.missing in context.get("phases", []):  # asked for, yet nothing recorded: bench failed
            c.status, c.summary = "FAIL", f"phase {c.missing} ran but left no sweep (commands.log says why)"
    return found


def tally(found: list[Check]) -> str:
    counts = {s: sum(c.status == s for c in found) for s in ("PASS", "FAIL", "NOTE")}
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def markdown(found: list[Check], context: dict[str, Any]) -> str:
    cuda = context.get("cuda", {})
    lines = [
        "# bench GPU check",
        "",
        f"- device: {cuda.get('device')} ({fig(cuda.get('total_memory', 0) / (1 << 30), 4)} GiB, compute "
        f"capability {cuda.get('capability')}, {cuda.get('count')} visible)",
        f"- PyTorch {cuda.get('torch')} built with CUDA {cuda.get('cuda_build')}: {cuda.get('python')}",
        f"- registered as bench's pytorch environment by {context.get('registered')}",
        f"- JAX: {context.get('jax', 'not probed (no modes phase)')}",
        f"- phases: {', '.join(context.get('phases', []))}; "
        + ", ".join(f"{p} {s:.0f} s" for p, s in context.get("timings", {}).items()),
        f"- result: {tally(found)}",
        "",
        "| check | status | summary |",
        "|---|---|---|",
    ]
    lines += [f"| {c.name} | {c.status} | {c.summary} |" for c in found]
    for c in found:
        lines += ["", f"## {c.status}: {c.name}", "", c.summary, ""] + c.details
    return "\n".join(lines) + "\n"

"""The profiler's records read back, summarised and judged (no processes: the rules on their own),
and the upgrade of a schema-2 database to the current schema."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from orchestrator.launch import outcomes
from orchestrator.launch.process import Finished
from orchestrator.storage.db import Database, schema_version
from profiler import timeline as timelines

MIB = 1 << 20
V2_SCHEMA = Path(__file__).parent / "data" / "schema_v2.sql"


def sample(t: float, phase: str | None, **values) -> dict:
    record = {"kind": "sample", "t": t, "phase": phase, "epoch": None, "repeat": None}
    record.update({"cpu": 0.0, "threads": 1, "rss": 10 * MIB, "uss": None, "procs": 1})
    record.update({"gpu_mem": None, "gpu_util": None})
    record.update(values)
    return record


def write(path: Path, records: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def test_a_line_cut_short_is_skipped_and_status_says_what_happened(tmp_path):
    start = {"kind": "start", "pid": 1, "interval": 0.1}
    cut = '{"kind": "sample", "t": 0.2, "ph'
    path = write(tmp_path / "s.jsonl", [start, sample(0.1, "import")], tail=cut)
    timeline = timelines.read(path)
    assert len(timeline.samples) == 1
    assert timeline.status.startswith("died after 1 samples")
    write(path, [start, sample(0.1, "import"), {"kind": "end", "cpu_seconds": 0.01}])
    assert timelines.read(path).status == "ok"
    assert timelines.read(tmp_path / "none.jsonl").status == "off"
    write(path, [{"kind": "start", "missed": "the worker had ended before the first sample"}])
    assert timelines.read(path).status.startswith("missed")


def test_cpu_times_that_advance_in_lumps_do_not_make_the_maximum_or_the_mean():
    """The first GPU check (gVisor): samples 4 ms apart saw almost no CPU, the next 0.09 s one saw
    11.7 CPU seconds on 16 CPUs (12,730 %). Weighted by span and taken over 1 s, both figures say
    what the process used."""
    timeline = timelines.Timeline(found=True, start={"kind": "start"}, end={"cpu_seconds": 0.5})
    timeline.samples = [sample(0.1 * k, "epoch", cpu=400.0) for k in range(1, 21)]
    timeline.samples += [sample(2.004, "epoch", cpu=10.0), sample(2.1, "epoch", cpu=4000.0)]
    timeline.samples += [sample(2.1 + 0.1 * k, "epoch", cpu=400.0) for k in range(1, 21)]
    summary = timelines.summarise(timeline, cpus_allowed=16)
    assert summary["cpu_percent_max"] < 1600  # 16 CPUs: never more than all of them
    assert summary["cpu_percent_max"] == pytest.approx(
        (0.004 * 10 + 0.096 * 4000 + 0.9 * 400) / 1.0, rel=0.05
    )
    spans = [0.1] * 20 + [0.004, 0.096] + [0.1] * 20
    cpus = [400.0] * 20 + [10.0, 4000.0] + [400.0] * 20
    weighted = sum(c * s for c, s in zip(cpus, spans, strict=True)) / sum(spans)
    assert summary["cpu_percent_mean"] == pytest.approx(weighted)


def test_summary_prefers_the_timed_epochs():
    timeline = timelines.Timeline(found=True, start={"kind": "start"}, end={"cpu_seconds": 0.5})
    timeline.samples = [
        sample(0.1, "import", cpu=100.0, threads=1, rss=50 * MIB),
        sample(0.2, "epoch", cpu=180.0, threads=9, rss=300 * MIB),
        sample(0.3, "epoch", cpu=190.0, threads=9, rss=320 * MIB),
        sample(0.4, "epoch", cpu=170.0, threads=8, rss=310 * MIB),
        sample(0.5, "eval", cpu=90.0, threads=12, rss=400 * MIB),
        sample(0.6, "eval", cpu=0.0, threads=0, rss=0, procs=0, final=True),
    ]
    summary = timelines.summarise(timeline, cpus_allowed=2)
    assert summary["cpu_percent_mean"] == pytest.approx(180.0)
    assert summary["cpu_percent_allowed"] == pytest.approx(90.0)
    # Shorter than a CPU_MAX_WINDOW: the whole run's CPU %, each sample over its span.
    assert summary["cpu_percent_max"] == pytest.approx((100 + 180 + 190 + 170 + 90 + 0) / 6)
    assert (summary["threads_steady"], summary["threads_max"]) == (9, 12)
    assert summary["rss_peak_bytes"] == 400 * MIB
    assert summary["rss_mean_bytes"] == pytest.approx(310 * MIB)
    assert summary["sampler_cpu_seconds"] == 0.5 and summary["samples_count"] == 6
    phases = timelines.phases(timeline, cpus_allowed=2)
    assert [p["phase"] for p in phases] == ["import", "epoch", "eval"]
    assert phases[1]["samples"] == 3 and phases[1]["rss_peak_bytes"] == 320 * MIB


def killed(**kwargs) -> Finished:
    return Finished(returncode=-signal.SIGKILL, wall_seconds=1.0, **kwargs)


def test_a_budget_kill_is_oom_with_the_budget_the_peak_and_the_phase(tmp_path):
    timeline = timelines.Timeline(found=True, samples=[sample(0.1, "epoch", rss=120 * MIB)])
    timeline.budget = {"budget": 100 * MIB, "rss": 130 * MIB, "phase": "epoch", "epoch": 2}
    outcome = outcomes.classify(killed(), tmp_path, 60, timeline)
    assert outcome.outcome == "oom" and outcome.signal_name == "SIGKILL"
    assert outcome.reason.startswith("memory budget 100 MiB exceeded: RSS 130 MiB in phase epoch 2")


def test_a_sigkill_near_the_memory_limit_is_the_kernels_oom_killer(tmp_path, monkeypatch):
    monkeypatch.setattr(outcomes, "memory_limit", lambda: 1000 * MIB)
    near = timelines.Timeline(found=True, samples=[sample(0.1, "epoch", rss=950 * MIB)])
    outcome = outcomes.classify(killed(), tmp_path, 60, near)
    assert outcome.outcome == "oom" and "not sent by bench" in outcome.reason and "95%" in outcome.reason
    far = timelines.Timeline(found=True, samples=[sample(0.1, "epoch", rss=100 * MIB)])
    outcome = outcomes.classify(killed(), tmp_path, 60, far)
    assert outcome.outcome == "crash" and "no sign of OOM" in outcome.reason
    outcome = outcomes.classify(killed(oom_kills=1), tmp_path, 60, far)
    assert outcome.outcome == "oom" and "OOM killer fired 1 time(s)" in outcome.reason


def _columns(path: Path) -> dict[str, set[str]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    conn.close()
    return found


def test_a_schema_2_database_is_upgraded_and_keeps_what_it_had(tmp_path):
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript(V2_SCHEMA.read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
        " VALUES ('s', 'now', 'finished', 1, 'h', 'm', '0', 'bench run')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    fresh = tmp_path / "fresh.db"
    Database(str(fresh), create=True).close()
    assert _columns(old) == _columns(fresh)
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version()
    assert conn.execute("SELECT name, status FROM sweeps").fetchall() == [("s", "finished")]
    conn.close()

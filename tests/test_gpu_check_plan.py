"""benchmarks/gpu/plan.py: which phases of the GPU check one call of the device tool runs
(issue 39). The plan is a pure function of the phases' seconds, the phases done and the budget;
its seconds come from docs/gpu.md's runs, or from the check's own database (bench's schema)."""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu import phases
from benchmarks.gpu import plan as planning

REPO = Path(__file__).resolve().parent.parent

# Run as the GPU session runs it (docs/gpu.md), from the repository root.
CHECK = ("-m", "benchmarks.gpu.check")
ORDER = planning.order_of_value()
# docs/gpu.md's phase times, the allowance for JAX's traced rows on top of transformers' 363 s
TABLE = {p: s.seconds for p, s in planning.estimates({}).items()}


def test_the_order_of_value_is_data_and_covers_every_phase_once():
    assert ORDER == ["transformers", "modes", "matrix", "overhead", "oom", "attention", "kernels"]
    assert sorted(ORDER) == sorted(planning.PHASES) and sorted(planning.RECORDED) == sorted(planning.PHASES)
    assert all(v.tier in planning.TIERS and v.why for v in planning.VALUE)
    assert {v.phase: v.tier for v in planning.VALUE} == {
        "transformers": "pending",  # docs/gpu.md's one pending item: JAX's traced cuda rows
        "modes": "code changed",
        **{p: "re-check" for p in ("matrix", "overhead", "oom", "attention", "kernels")},
    }
    # a phase never run on a GPU goes before one whose code changed, wherever VALUE lists it
    value = [planning.Value("a", "re-check", "x"), planning.Value("b", "never run", "y")]
    value.append(planning.Value("c", "code changed", "z"))
    assert planning.order_of_value(value) == ["b", "c", "a"]


def test_every_recorded_duration_names_the_run_it_came_from():
    assert TABLE == {
        "transformers": 363 + 119,
        "modes": 491,
        "matrix": 327,
        "overhead": 155,
        "attention": 100,
        "kernels": 66,
        "oom": 46,
    }
    assert planning.estimates({})["transformers"].source.startswith(
        "docs/gpu.md, fourth run (session 40), call 2: 363 s, + 119 s: JAX's 3 traced rows"
    )
    for seconds in planning.RECORDED.values():
        assert seconds.source.startswith("docs/gpu.md, ") and " run (session " in seconds.source


def test_on_the_recorded_times_it_picks_what_fits_in_order_of_value_and_names_the_rest():
    plan = planning.plan(TABLE, set(), planning.DEFAULT_BUDGET, ORDER)
    assert plan.available == 500  # 560 s less 60 s for the check's start and report
    assert plan.chosen == ("transformers",) and plan.seconds == 482
    assert plan.left == ("modes", "matrix", "overhead", "oom", "attention", "kernels")
    assert plan.why == "runs transformers (482 s estimated)" and not plan.forced
    # a phase too long for what is left does not stop a shorter one after it; more than one
    # command's 600 s counts as 600
    plan = planning.plan(TABLE, set(), 3600, ORDER)
    assert plan.available == 540 and plan.chosen == ("transformers", "oom") and plan.seconds == 528
    plan = planning.plan(TABLE, {"transformers", "modes"}, 560, ORDER)
    assert plan.chosen == ("matrix", "overhead") and plan.left == ("oom", "attention", "kernels")


def test_a_budget_smaller_than_any_phase_picks_nothing_and_says_so():
    plan = planning.plan(TABLE, set(), 105, ORDER)  # 45 s for phases; oom needs 46
    assert plan.chosen == () and plan.left == tuple(ORDER)
    assert plan.why == "nothing fits: the shortest phase left, oom, needs 46 s of the 45 s the budget leaves"


def test_done_phases_are_skipped():
    plan = planning.plan(TABLE, {"transformers"}, 560, ORDER)
    assert plan.chosen == ("modes",) and plan.done == ("transformers",)
    assert "transformers" not in plan.left
    plan = planning.plan(TABLE, set(ORDER), 560, ORDER)
    assert plan.chosen == plan.left == () and plan.why == "nothing left: every phase is done in this database"


def test_phases_override_the_budget_and_what_is_done():
    plan = planning.plan(TABLE, {"oom"}, 90, ORDER, phases=["kernels", "oom"])
    assert plan.chosen == ("kernels", "oom") and plan.forced and plan.seconds == 112
    assert (
        plan.why
        == "--phases: kernels, oom, as given, done or not (112 s estimated, over the 30 s the budget leaves)"
    )
    assert plan.left == ("transformers", "modes", "matrix", "overhead", "attention")


def _database(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.executescript((REPO / "schema.sql").read_text())
    return conn


def _sweep(conn: sqlite3.Connection, name: str, status: str, start: str, end: str | None) -> int:
    cursor = conn.execute(
        "INSERT INTO sweeps (name, started_at, ended_at, status, total_configs, host, machine, "
        "bench_version, command) VALUES (?, ?, ?, ?, 1, 'h', 'm', '0', 'bench run')",
        (name, start, end, status),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _run(conn: sqlite3.Connection, sweep: int, ended_at: str) -> None:
    """A run row: every column bench requires, filled with a placeholder of its type."""
    values: dict[str, object] = {"sweep_id": sweep, "started_at": ended_at, "ended_at": ended_at}
    values["outcome"] = "ok"
    for _, name, kind, notnull, default, key in conn.execute("PRAGMA table_info(runs)"):
        if notnull and default is None and not key and name not in values:
            values[name] = 0 if kind in ("INTEGER", "REAL") else "x"
    names = ", ".join(values)
    conn.execute(f"INSERT INTO runs ({names}) VALUES ({', '.join('?' * len(values))})", list(values.values()))


def test_seconds_recorded_in_its_own_database_come_first(tmp_path):
    db, t0 = tmp_path / "gpu-check.db", "2026-11-27T10:00:00+00:00"
    with _database(db) as conn:
        _sweep(conn, "gpu-check-matrix", "interrupted", t0, "2026-11-27T10:01:00+00:00")  # older
        _sweep(conn, "gpu-check-matrix", "finished", t0, "2026-11-27T10:05:00+00:00")
        # cut off past the table's estimate (killed: no end of its own, its last run's end)
        killed = _sweep(conn, "gpu-check-transformers", "running", t0, None)
        _run(conn, killed, "2026-11-27T10:09:00+00:00")
        _sweep(conn, "gpu-check-oom", "interrupted", t0, "2026-11-27T10:00:10+00:00")  # cut short
    conn.close()
    (tmp_path / "overhead.json").write_text("{}")
    (tmp_path / "overhead.txt").write_text("...\nbenchmark wall time: 150 s\n")
    found = planning.recorded(db, tmp_path)
    assert found == {
        "matrix": planning.Found(300.0, True),
        "transformers": planning.Found(540.0, False),
        "oom": planning.Found(10.0, False),
        "overhead": planning.Found(150.0, True),
    }
    assert planning.done(found) == {"matrix", "overhead"}
    seconds = planning.estimates(found)
    assert seconds["matrix"] == planning.Seconds(300.0, "this database, its latest run")
    assert seconds["transformers"] == planning.Seconds(540.0, "this database: a run cut off after as long")
    assert seconds["oom"] == planning.RECORDED["oom"] and seconds["modes"] == planning.RECORDED["modes"]
    # the overhead phase is done only where benchmarks/harness/overhead.py left its figures
    (tmp_path / "overhead.json").unlink()
    assert "overhead" not in planning.recorded(db, tmp_path)


def test_a_database_it_cannot_read_is_said(tmp_path):
    (tmp_path / "gpu-check.db").write_text("not a database")
    with pytest.raises(ValueError, match="cannot read the phases done from "):
        planning.recorded(tmp_path / "gpu-check.db", tmp_path)
    # the report is still written, and says so; a call stops before anything runs
    assert planning.next_slot(tmp_path / "gpu-check.db", tmp_path)[-1].startswith("cannot read the phases")
    done = gpu_check("--plan", "--work", str(tmp_path))
    assert done.returncode == 2 and done.stdout.startswith("gpu_check: cannot read the phases done from ")


def gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *CHECK, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_plan_prints_the_plan_and_exits_without_a_gpu(tmp_path):
    work = tmp_path / "work"
    done = gpu_check("--plan", "--work", str(work))
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "Budget 560 s, less 60 s for the check's own start and report: 500 s for phases. "
        "Runs transformers (482 s estimated)."
    )
    assert lines[4].startswith("| transformers | runs | 482 | docs/gpu.md, fourth run (session 40)")
    assert [line.split(" | ")[1] for line in lines[5:]] == ["next slot"] * 6
    assert not work.exists()  # nothing run, nothing written
    work.mkdir()
    with _database(work / "gpu-check.db") as conn:
        _sweep(
            conn,
            "gpu-check-transformers",
            "finished",
            "2026-11-27T10:00:00+00:00",
            "2026-11-27T10:06:00+00:00",
        )
    conn.close()
    done = gpu_check("--plan", "--work", str(work), "--budget", "300")
    assert done.returncode == 0
    assert done.stdout.startswith("Budget 300 s, less 60 s for the check's own start and report: 240 s")
    assert "for phases. Runs overhead, oom (201 s estimated).\n" in done.stdout
    assert "| transformers | done | 360 | this database, its latest run |" in done.stdout
    done = gpu_check("--work", str(work))
    assert done.returncode == 2 and "--out is required (but with --plan)" in done.stderr


def test_a_budget_that_fits_nothing_stops_before_anything_runs(tmp_path):
    out, work = tmp_path / "gpu-check.md", tmp_path / "work"
    done = gpu_check("--out", str(out), "--work", str(work), "--budget", "60")
    line = "gpu_check: the plan runs no phase: nothing fits: the shortest phase left, oom, needs 46 s "
    line += "of the 0 s the budget leaves"
    assert done.returncode == 2 and done.stdout == line + "\n"
    assert out.read_text() == line + "\n" and not work.exists()


def test_a_planned_call_has_a_deadline_and_one_with_phases_none(tmp_path):
    from benchmarks.gpu import check as gpu_check

    args = gpu_check.parse_args(["--plan", "--work", str(tmp_path)])
    chosen = gpu_check.make_plan(args, 1000.0)
    assert args.phases == ["transformers"] == list(chosen.chosen) and args.estimates == TABLE
    assert args.deadline == 1000.0 + 560 - 15  # the budget less the final report's seconds
    assert args.plan_lines[0].startswith("Budget 560 s, less 60 s")
    args = gpu_check.parse_args(["--out", "r.md", "--work", str(tmp_path), "--phases", "oom,matrix"])
    gpu_check.make_plan(args, 1000.0)
    assert args.phases == ["oom", "matrix"] and args.deadline is None


def test_a_planned_phase_that_no_longer_fits_is_left_for_the_next_slot(tmp_path, monkeypatch, capsys):
    """An earlier phase may overrun its estimate: a planned call starts a phase only while its
    estimate still ends before the call's deadline; --phases (no deadline) runs them all."""
    ran, reported = [], []
    monkeypatch.setattr(phases, "register", lambda *a: "registered")
    monkeypatch.setattr(phases, "run_bench", lambda env, log, *a: ran.append(a[2]))
    monkeypatch.setattr(
        phases, "write_report", lambda args, *a, **k: reported.append(list(args.phases)) or []
    )
    args = argparse.Namespace(phases=["oom", "kernels"], work=tmp_path, out=tmp_path / "r.md")
    args.estimates, args.deadline = {"oom": 46, "kernels": 66}, time.monotonic() + 50
    assert phases.run_all(args, {}, {"python": sys.executable, "total_memory": 1 << 30}) == 0
    assert ran == [str(tmp_path / "oom.yaml")] and args.phases == reported[-1] == ["oom"]
    assert "gpu_check: phase kernels left for the next slot: 66 s estimated, " in capsys.readouterr().out
    args.phases, args.deadline, ran[:] = ["oom", "kernels"], None, []
    phases.run_all(args, {}, {"python": sys.executable, "total_memory": 1 << 30})
    assert ran == [str(tmp_path / "oom.yaml"), str(tmp_path / "kernels.yaml")]


def test_the_report_says_this_call_s_plan_and_what_is_left_for_the_next_slot(tmp_path):
    out = tmp_path / "gpu-check.md"
    args = argparse.Namespace(phases=["oom"], out=out, registered="x", nvtx="none", plan_lines=["PLAN LINE"])
    common = (
        args,
        {},
        tmp_path / "commands.log",
        tmp_path / "absent.db",
        tmp_path,
        {"python": sys.executable},
    )
    phases.write_report(*common, None, {"oom": 1.0}, 0.0, final=True)
    text = out.read_text()
    assert "\n## This call's plan\n\nPLAN LINE\n" in text
    assert text.endswith(
        "\n## Left for the next slot\n\nIn order of value: transformers (482 s), modes (491 s), "
        "matrix (327 s), overhead (155 s), oom (46 s), attention (100 s), kernels (66 s).\n"
        "A call with the default budget (560 s) on this database would run transformers "
        "(`python3 -m benchmarks.gpu.check --plan`).\n"
    )

"""Progress and ETA (issue 22): estimates from the runs a database holds, an ETA that moves while a
run is in flight, and a live line that says step n of N."""

from __future__ import annotations

import io
import sqlite3
import statistics
from pathlib import Path

import pytest

from orchestrator.config.run_config import RunConfig
from orchestrator.storage.db import Database
from orchestrator.sweep.eta import Eta, History, images
from orchestrator.sweep.progress import Progress

pytestmark = pytest.mark.slow  # the history comes from real (fault worker) runs

SWEEP = """
name: history
settings: {framework: fault, fault: sleep, dataset_size: 40, batch_size: 8, warmup_steps: 1}
axes:
  seconds: [0.2, 0.6]
  seed: [1, 2]
"""


def _config(seconds: float, seed: int, **more) -> RunConfig:
    settings = dict(framework="fault", fault="sleep", dataset_size=40, batch_size=8, warmup_steps=1)
    return RunConfig(**{**settings, "seconds": seconds, "seed": seed, **more})


@pytest.fixture
def recorded(write_matrix, cli, workdir) -> Path:
    """A real database: four real runs of the fault worker, recorded by bench itself, run twice."""
    write_matrix(SWEEP)
    for _ in range(2):
        assert cli("run", "--matrix", "m.yaml").exit_code == 0
    return workdir / "bench.db"


def _walls(db: Path, config: RunConfig) -> list[float]:
    with sqlite3.connect(db) as conn:
        query = "SELECT wall_seconds FROM runs WHERE config_hash = ? AND outcome = 'ok'"
        return [r[0] for r in conn.execute(query, (config.config_hash,))]


def test_a_configuration_run_before_is_estimated_from_its_own_runs(recorded):
    slow = _config(0.6, 1)
    history = History.from_db(Database(str(recorded), create=False), [slow])
    walls = _walls(recorded, slow)
    assert len(walls) == 2
    assert history.estimate(slow) == pytest.approx(statistics.median(walls))


def test_a_new_configuration_of_a_known_family_is_scaled_by_its_work(recorded):
    bigger = _config(0.2, 9, dataset_size=400, epochs=2)  # never run: ten times the data, twice
    history = History.from_db(Database(str(recorded), create=False), [bigger])
    with sqlite3.connect(recorded) as conn:
        rows = conn.execute("SELECT config_json, wall_seconds FROM runs WHERE outcome = 'ok'").fetchall()
    assert len(rows) == 8
    per_image = statistics.median(wall / images(_config(0.2, 1)) for _, wall in rows)  # same work each
    assert history.estimate(bigger) == pytest.approx(per_image * images(bigger))
    assert images(bigger) == 1 * 8 + 320 * 2  # warm-up images, then the training split per epoch


def test_a_configuration_nothing_is_known_of_is_said_to_be_unknown(recorded):
    other = RunConfig(framework="pytorch", model="resnet50")
    known = _config(0.6, 2)
    history = History.from_db(Database(str(recorded), create=False), [other, known])
    assert history.estimate(other) is None
    eta = Eta(2, [other, known], history)
    text = eta.text([])
    assert text.startswith("ETA 00:0") and text.endswith(" + 1 run without history")
    assert Eta(1, [other], history).text([]) == "ETA unknown (1 run without history)"


def test_the_eta_moves_while_a_run_is_in_flight(tmp_path):
    """Injected clock: the line drawn at t and at t + 40 s differ, with no run ending between."""
    now = [1000.0]
    first, second = _config(0.6, 1), _config(0.6, 2)
    history = History()
    history.add(first, 60.0)
    history.add(second, 60.0)
    out = io.StringIO()
    progress = Progress(2, stream=out, live=True, plan=[first, second], history=history, clock=lambda: now[0])
    progress.begin(first, tmp_path / "no-events-yet")
    lines = []
    for step in (0, 40, 90):
        now[0] = 1000.0 + step
        progress.tick()
        lines.append(out.getvalue().split("\r\x1b[2K")[-1])
    assert "00:00 elapsed, ETA 02:00 |" in lines[0]
    assert "00:40 elapsed, ETA 01:20 |" in lines[1]
    # A hang: the run is past its estimate; what remains is the other run, and the line says so.
    assert "01:30 elapsed, ETA 01:00 (a run 00:30 past its estimate) |" in lines[2]


def test_the_live_line_says_step_n_of_n_from_a_real_runs_events(write_matrix, cli, workdir):
    write_matrix("settings: {framework: fault, dataset_size: 40, batch_size: 8, epochs: 3, warmup_steps: 2}")
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    (events,) = workdir.glob("bench-runs/sweep-1/*/events.jsonl")
    lines = events.read_text().splitlines(keepends=True)
    in_flight = workdir / "in-flight"
    in_flight.mkdir()
    config = RunConfig(framework="fault", dataset_size=40, batch_size=8, epochs=3, warmup_steps=2)
    out = io.StringIO()
    progress = Progress(1, stream=out, live=True)
    progress.begin(config, in_flight)
    seen = []
    for line in lines:  # the events as the worker wrote them, one by one
        with open(in_flight / "events.jsonl", "a") as f:
            f.write(line)
        if '"step"' in line:
            progress.tick()
            seen.append(out.getvalue().split("\r\x1b[2K")[-1].split("| fault/ok ")[-1])
    assert seen[:3] == ["warmup step 1/2", "warmup step 2/2", "epoch 1/3 step 1/4"]
    assert "epoch 2/3 step 3/4" in seen and seen[-1] == "epoch 3/3 step 4/4"


def test_a_row_that_cannot_be_read_costs_the_estimate_not_the_sweep(recorded, write_matrix, cli, caplog):
    with sqlite3.connect(recorded) as conn:
        conn.execute("UPDATE runs SET wall_seconds = 'soon' WHERE id = 2")
    history = History.from_db(Database(str(recorded), create=False), [_config(0.6, 1)])
    assert history.estimate(_config(0.6, 1)) is None
    assert "ETA: earlier runs not read" in caplog.text and "run 2" in caplog.text
    result = cli("run", "--matrix", "m.yaml")  # the sweep itself goes on
    assert result.exit_code == 0 and "4 ok" in result.output


def test_the_events_tail_stays_bounded_on_a_file_without_newlines(tmp_path):
    from orchestrator.sweep.progress import _Events

    events = _Events(tmp_path / "events.jsonl")
    with open(events.path, "wb") as f:
        for _ in range(40):  # 40 redraws, 100 KB of bytes that never end a line
            f.write(b"x" * 100_000)
            f.flush()
            events.read()
            assert len(events.partial) <= 64 << 10
        f.write(b'\n{"event": "step", "epoch": 1, "step": 7}\n')
    events.read()
    assert events.last == {"event": "step", "epoch": 1, "step": 7}

"""Warm-up to steady state, compile seconds, the first step's loss and time to accuracy, in the
shared runner itself (workers/runner.py, workers/warmup.py): a scripted adapter on a scripted clock,
so each rule and bound is reached exactly, where reaching it for real would depend on the machine.
The same runner with the fault worker and real frameworks, through bench and its database, is in
tests/test_execution_record.py and tests/test_time_to_accuracy.py."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

from workers import runner, warmup
from workers.events import EventWriter


class Clock:
    """A perf_counter that only the scripted adapter moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    scripted = types.SimpleNamespace(perf_counter=fake.perf_counter)
    monkeypatch.setattr(runner, "time", scripted)
    monkeypatch.setattr(warmup, "time", scripted)
    return fake


class Scripted:
    """Steps that take the given seconds (the last repeats), a loss of 2.0 then 1.0, and the given
    validation accuracy after each epoch since reset; evaluation takes ``eval_seconds``."""

    def __init__(self, clock: Clock, steps: list[float], accuracy=(), eval_seconds: float = 0.0) -> None:
        self.clock, self.steps, self.accuracy, self.eval_seconds = clock, steps, list(accuracy), eval_seconds
        self.done = 0
        self.epochs_since_reset = 0
        self.losses: list[float] = []
        self.resets = 0

    def setup(self) -> dict[str, Any]:
        return {"framework_version": "scripted", "threads": {}, "device_name": "none"}

    def build_model(self) -> int:
        return 1

    def load_data(self) -> tuple[int, int]:
        return 40, 10

    def prepare_epoch(self, order: list[int]) -> int:
        return len(order) // 8

    def _step(self) -> None:
        self.clock.now += self.steps[min(self.done, len(self.steps) - 1)]
        self.losses.append(2.0 if self.done == 0 else 1.0)
        self.done += 1

    def train_step(self, index: int) -> None:
        self._step()

    def infer_step(self, index: int) -> None:
        self._step()

    def synchronize(self) -> None:
        pass

    def epoch_loss(self) -> float:
        value = sum(self.losses) / len(self.losses)
        self.losses = []
        return value

    def reset(self) -> None:
        self.resets += 1
        self.epochs_since_reset = 0
        self.losses = []

    def evaluate(self) -> tuple[float, float | None]:
        self.epochs_since_reset += 1
        self.clock.now += self.eval_seconds
        n = self.epochs_since_reset
        return 1.0, self.accuracy[n - 1] if n <= len(self.accuracy) else None

    def execution_info(self) -> dict[str, Any]:
        return {"mode": "eager", "precision": "fp32", "mode_default": True}

    def device_memory(self) -> None:
        return None


def run(adapter: Scripted, tmp_path, **settings: Any) -> dict[str, Any]:
    config = {
        "framework": "scripted",
        "seed": 0,
        "batch_size": 8,
        "epochs": 1,
        "repeats": 1,
        "warmup_steps": 2,
        "timeout": 1000.0,
        "min_time": 0,
        "min_steps": 1,
        "task": "train",
    }
    config.update(settings)
    events = EventWriter(str(tmp_path / "events.jsonl"))
    try:
        return runner.run(adapter, config, events)
    finally:
        events.close()


# --- the rule --------------------------------------------------------------------------------


def test_steady_means_each_of_the_last_three_steps_within_ten_percent_of_their_median():
    assert warmup.steady_median([9.0, 1.0, 1.05, 0.96]) == 1.0
    assert warmup.steady_median([1.0, 1.0]) is None  # too few to say
    assert warmup.steady_median([1.0, 1.2, 1.0]) is None  # 1.2 is 20 % above the median
    assert warmup.steady_median([1.0, 1.09, 1.0]) == 1.0  # 9 % above: within
    assert warmup.steady_median([3.0, 1.0, 1.0]) is None  # a slow step in the window


# --- warm-up -------------------------------------------------------------------------------


def test_warmup_runs_past_warmup_steps_until_steady_and_measures_the_compile(clock, tmp_path):
    adapter = Scripted(clock, [5.0, 2.0, 1.0, 1.02, 0.99, 1.0])
    result = run(adapter, tmp_path, warmup_steps=2)
    warm = result["warmup"]
    assert warm["steps"] == 5 and warm["steady"] is True
    assert warm["step_seconds"] == pytest.approx([5.0, 2.0, 1.0, 1.02, 0.99])
    assert warm["first_step_seconds"] == pytest.approx(5.0)
    assert warm["steady_step_seconds"] == pytest.approx(1.0)
    # 10.01 s of warm-up, 5 steady steps' worth (5 × 1.0) of it the steps themselves.
    assert warm["compile_seconds"] == pytest.approx(5.01)
    assert warm["steady_by"] == "3 consecutive steps within 10 % of their median after 5 steps"
    assert result["first_step_loss"] == 2.0  # read after step 1, before any other step
    # The timed epoch starts after warm-up: 5 steps of 1.0 s, no compile in it.
    assert result["epochs"][0]["seconds"] == pytest.approx(5 * 1.0)


def test_what_an_adapter_compiled_ahead_of_time_counts_in_the_compile_seconds(clock, tmp_path):
    """JAX compiles its step before the first one (lower().compile() in prepare_epoch): its first
    step is a steady one, so without the adapter's ahead_of_time_seconds the compile would be 0."""

    class AheadOfTime(Scripted):
        ahead_of_time_seconds = 0.0
        phase_while_compiling = None

        def prepare_epoch(self, order: list[int]) -> int:
            if not self.ahead_of_time_seconds:
                self.clock.now += 20.0
                self.ahead_of_time_seconds = 20.0
                lines = (tmp_path / "events.jsonl").read_text().splitlines()
                phases = [json.loads(line) for line in lines if '"phase"' in line]
                self.phase_while_compiling = [p for p in phases if p.get("event") == "phase"][-1]["phase"]
            return super().prepare_epoch(order)

    adapter = AheadOfTime(clock, [1.0])
    result = run(adapter, tmp_path, warmup_steps=3)
    # Compiled inside the warm-up phase, where the sampler judges the compile figure (profiler.md).
    assert adapter.phase_while_compiling == "warmup"
    warm = result["warmup"]
    assert warm["ahead_of_time_seconds"] == pytest.approx(20.0)
    assert warm["compile_seconds"] == pytest.approx(20.0)
    assert result["epochs"][0]["seconds"] == pytest.approx(5 * 1.0)  # none of it in a timed epoch


def test_warmup_steps_is_the_least_even_when_steady_sooner(clock, tmp_path):
    result = run(Scripted(clock, [1.0]), tmp_path, warmup_steps=6)
    assert result["warmup"]["steps"] == 6 and result["warmup"]["compile_seconds"] == 0.0
    assert result["warmup"]["steady_by"].endswith("after 6 steps")


def test_a_step_time_that_never_settles_stops_at_the_bound_of_steps(clock, tmp_path):
    adapter = Scripted(clock, [1.0 + (i % 2) for i in range(200)])
    warm = run(adapter, tmp_path, warmup_steps=4)["warmup"]
    assert warm["steps"] == 4 + warmup.MAX_EXTRA_STEPS and warm["steady"] is False
    assert warm["steady_by"] == "not steady: the bound of 54 warm-up steps (warmup_steps 4 + 50)"


def test_warmup_never_takes_more_than_a_quarter_of_the_timeout(clock, tmp_path):
    adapter = Scripted(clock, [10.0 + (i % 2) * 5 for i in range(200)])
    warm = run(adapter, tmp_path, warmup_steps=1, timeout=200.0)["warmup"]
    assert sum(warm["step_seconds"]) <= 0.25 * 200 and warm["steady"] is False
    assert warm["steady_by"] == "not steady: 25 % of the run's timeout (200 s) spent in warm-up"


def test_warmup_steps_zero_is_no_warmup(clock, tmp_path):
    result = run(Scripted(clock, [1.0]), tmp_path, warmup_steps=0)
    assert result["warmup"]["steps"] == 0 and result["warmup"]["compile_seconds"] is None
    assert result["warmup"]["steady_by"] == warmup.NO_WARMUP
    assert result["first_step_loss"] is None


def test_inference_warms_up_the_same_way_without_a_loss(clock, tmp_path):
    result = run(Scripted(clock, [3.0, 1.0]), tmp_path, task="inference", warmup_steps=1)
    assert result["warmup"]["steps"] == 4 and result["warmup"]["compile_seconds"] == pytest.approx(2.0)
    assert result["first_step_loss"] is None


def test_a_long_warmup_keeps_the_first_and_last_step_times(clock, tmp_path):
    warm = run(Scripted(clock, [1.0]), tmp_path, warmup_steps=300)["warmup"]
    assert warm["steps"] == 300 and len(warm["step_seconds"]) == 100 and warm["step_seconds_cut"] == 200


# --- time to accuracy ------------------------------------------------------------------------


def test_wall_seconds_count_training_and_evaluation_since_the_reset(clock, tmp_path):
    adapter = Scripted(clock, [1.0], accuracy=[0.3, 0.6, 0.9], eval_seconds=0.5)
    result = run(adapter, tmp_path, warmup_steps=3, epochs=3, target_accuracy=0.6)
    epochs = result["epochs"]
    # 5 steps of 1 s and 0.5 s of evaluation an epoch; warm-up (3 s) is not in it.
    assert [e["wall_seconds"] for e in epochs] == pytest.approx([5.5, 11.0, 16.5])
    assert [e["seconds"] for e in epochs] == pytest.approx([5.0, 5.0, 5.0])  # the timed epochs as before
    target = result["target"]
    assert target["reached"] is True and target["epoch"] == 2 and target["seconds"] == pytest.approx(11.0)
    assert len(epochs) == 3  # without stop_at_target every epoch runs


def test_stop_at_target_ends_each_repeat_at_its_target_and_adds_no_extra_epochs(clock, tmp_path):
    adapter = Scripted(clock, [1.0], accuracy=[0.3, 0.6, 0.9])
    result = run(
        adapter,
        tmp_path,
        warmup_steps=3,
        epochs=3,
        repeats=2,
        target_accuracy=0.6,
        stop_at_target=True,
        min_time=1000,
    )
    assert [(e["repeat"], e["epoch"]) for e in result["epochs"]] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert result["target"]["repeats"] == [
        {"repeat": 0, "reached": True, "epoch": 2, "seconds": pytest.approx(10.0)},
        {"repeat": 1, "reached": True, "epoch": 2, "seconds": pytest.approx(10.0)},
    ]
    assert result["target"]["seconds"] == pytest.approx(10.0) and adapter.resets == 2
    assert result["samples_stopped_by"].startswith("stop_at_target")


def test_a_target_not_reached_in_every_repeat_is_not_reached(clock, tmp_path):
    adapter = Scripted(clock, [1.0], accuracy=[0.3, 0.5])
    result = run(
        adapter, tmp_path, warmup_steps=3, epochs=2, repeats=2, target_accuracy=0.5, stop_at_target=True
    )
    assert result["target"]["reached"] is True
    result = run(
        Scripted(clock, [1.0], accuracy=[0.3, 0.4]),
        tmp_path,
        warmup_steps=3,
        epochs=2,
        target_accuracy=0.5,
        stop_at_target=True,
    )
    target = result["target"]
    assert target["reached"] is False and target["seconds"] is None and target["epoch"] is None
    assert len(result["epochs"]) == 2  # all of them ran


def test_without_a_target_there_is_no_target_object(clock, tmp_path):
    result = run(Scripted(clock, [1.0], accuracy=[0.9]), tmp_path)
    assert result["target"] is None and result["epochs"][0]["wall_seconds"] == pytest.approx(5.0)

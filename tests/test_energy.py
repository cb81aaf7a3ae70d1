"""GPU energy: the joules per epoch and per image from a timeline shaped as the sampler writes it
(unit), and a real run on this machine (no GPU) whose report and inspect say there is no counter
and why, never 0."""

from __future__ import annotations

import json
import sqlite3

import pytest

from profiler import energy
from profiler import timeline as timelines

MIB = 1 << 20
START = {"kind": "start", "pid": 1, "interval": 0.1, "gpu": "NVML: 1 device(s)", "energy": energy.NONE}


def sample(t: float, phase: str | None, epoch: int | None = None, **values) -> dict:
    """One record as profiler/sampler.py writes it (repeat 0 from the worker's first epoch on)."""
    record = {"kind": "sample", "t": t, "phase": phase, "epoch": epoch, "repeat": 0 if epoch else None}
    record.update({"cpu": 99.0, "threads": 12, "rss": 900 * MIB, "uss": None, "procs": 1})
    record.update({"gpu_mem": 2000 * MIB, "gpu_util": 97.0, "gpu_energy": None, "gpu_power": None})
    record.update(values)
    return record


def run_timeline(source: str, readings) -> timelines.Timeline:
    """import, warm-up, two epochs each followed by evaluation, the final sample.

    ``readings(t, phase)`` gives the sample's energy fields."""
    plan = [(0.1, "import", None), (0.2, "build", None), (0.3, "warmup", None)]
    plan += [(0.5 + 0.25 * i, "epoch", 1) for i in range(9)]  # 0.50 .. 2.50
    plan += [(2.7, "eval", 1)]
    plan += [(2.9 + 0.25 * i, "epoch", 2) for i in range(9)]  # 2.90 .. 4.90
    plan += [(5.1, "eval", 2)]
    timeline = timelines.Timeline(found=True, start={**START, "energy": source}, end={"cpu_seconds": 0.3})
    timeline.samples = [sample(t, phase, epoch, **readings(t, phase, epoch)) for t, phase, epoch in plan]
    timeline.samples.append(sample(5.2, "eval", 2, procs=0, final=True, **readings(5.2, "eval", 2)))
    return timeline


EPOCHS = [
    {"repeat": 0, "epoch": 1, "seconds": 1.9, "images": 512, "steps": 8},
    {"repeat": 0, "epoch": 2, "seconds": 1.9, "images": 512, "steps": 8},
]


def counter(t: float, phase: str, epoch: int | None) -> dict:
    """A counter (J since first seen) rising at 300 W in epoch 1, 250 W in epoch 2, 80 W elsewhere."""
    joules = 80.0 * min(t, 0.5) + 300.0 * max(0.0, min(t, 2.5) - 0.5)
    joules += (
        80.0 * max(0.0, min(t, 2.9) - 2.5) + 250.0 * max(0.0, min(t, 4.9) - 2.9) + 80.0 * max(0.0, t - 4.9)
    )
    return {"gpu_energy": round(joules, 3), "gpu_power": 300.0 if epoch == 1 else 250.0}


def test_counter_gives_mean_power_times_the_timed_seconds():
    timeline = run_timeline("NVML total energy counter", counter)
    joules = energy.epoch_joules(timeline, EPOCHS)
    assert joules == [pytest.approx(300.0 * 1.9), pytest.approx(250.0 * 1.9)]
    summary = energy.summary(timeline, EPOCHS)
    assert summary["gpu_energy_source"] == "NVML total energy counter"
    assert summary["gpu_joules_per_epoch"] == pytest.approx((570.0 + 475.0) / 2)
    assert summary["gpu_joules_per_image"] == pytest.approx((570.0 / 512 + 475.0 / 512) / 2)


def test_power_readings_are_integrated_over_the_phase():
    # No counter: power ramps from 200 W to 400 W across epoch 1 (mean 300 W), flat 250 W in epoch 2.
    def power(t: float, phase: str, epoch: int | None) -> dict:
        if epoch == 1 and phase == "epoch":
            return {"gpu_power": 200.0 + 100.0 * (t - 0.5)}
        return {"gpu_power": 250.0 if epoch == 2 else 60.0}

    timeline = run_timeline("NVML power, integrated", power)
    assert energy.epoch_joules(timeline, EPOCHS) == [pytest.approx(300.0 * 1.9), pytest.approx(250.0 * 1.9)]


def test_an_epoch_with_too_few_readings_has_no_figure_not_zero():
    timeline = run_timeline("NVML total energy counter", counter)
    timeline.samples = [s for s in timeline.samples if not (s["epoch"] == 2 and s["phase"] == "epoch")]
    timeline.samples.append(sample(3.0, "epoch", 2, gpu_energy=700.0))  # one counter reading, no power
    assert energy.epoch_joules(timeline, EPOCHS)[1] is None
    run = {k: v for k, v in energy.summary(timeline, EPOCHS).items() if k != "epoch_joules"}
    assert run["gpu_joules_per_epoch"] == pytest.approx(570.0)  # the one epoch measured


def test_without_a_counter_the_reason_is_given_in_words():
    no_nvml = "none: no NVML (NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    timeline = run_timeline(no_nvml, lambda t, p, e: {})
    summary = energy.summary(timeline, EPOCHS)
    assert summary["gpu_joules_per_epoch"] is None and summary["epoch_joules"] == [None, None]
    assert energy.describe(summary) == f"no GPU energy counter: {no_nvml[len(energy.NONE) :]}"
    # NVML works but the run never showed up on a device (a cpu run on a GPU machine).
    timeline = run_timeline("NVML total energy counter", lambda t, p, e: {})
    assert energy.describe(energy.summary(timeline, EPOCHS)).startswith(
        "no GPU energy counter: the run's processes were never seen on a GPU"
    )
    off = energy.summary(timelines.Timeline(), EPOCHS, sampled=False)
    assert energy.describe(off) == "no GPU energy counter: the sampler was off (sample_interval: 0)"
    assert energy.describe({"gpu_energy_source": None}).startswith("not recorded")


@pytest.mark.slow
def test_a_real_run_here_says_there_is_no_counter_and_why(write_matrix, cli, workdir):
    matrix = write_matrix(
        """
        name: energy
        settings: {framework: fault, dataset_size: 64, batch_size: 8, epochs: 2}
        include:
          - {fault: sleep, seconds: 1.0}
          - {fault: ok, sample_interval: 0}
        """
    )
    assert cli("run", "--matrix", str(matrix)).exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    rows = conn.execute("SELECT id, gpu_energy_source, gpu_joules_per_epoch, run_dir FROM runs ORDER BY id")
    (sampled, source, joules, run_dir), (off, off_source, _, _) = rows.fetchall()
    epoch_joules = [j for (j,) in conn.execute("SELECT gpu_joules FROM epochs WHERE run_id = ?", (sampled,))]
    conn.close()
    # The sleep keeps the worker alive long enough to be watched: what the sampler itself said in
    # its start record is what the database keeps.
    start = json.loads((workdir / run_dir / "samples.jsonl").read_text().splitlines()[0])
    assert start["kind"] == "start" and start["energy"].startswith(energy.NONE)
    assert source == start["energy"] and joules is None and epoch_joules == [None, None]
    assert off_source == "none: the sampler was off (sample_interval: 0)"
    reason = source[len(energy.NONE) :]
    inspect = cli("inspect", str(sampled)).output
    assert f"GPU energy: no GPU energy counter: {reason}" in inspect
    resources = cli("report", "--resources").output
    assert f"GPU energy, runs {sampled}: no GPU energy counter: {reason}" in resources
    assert f"GPU energy, runs {off}: no GPU energy counter: the sampler was off" in resources
    assert "GPU J/epoch" not in resources  # no run has a figure: no column of dashes or zeros
    csv = cli("report", "--resources", "--format", "csv").output.splitlines()
    assert "gpu_energy_source" in csv[0].split(",")

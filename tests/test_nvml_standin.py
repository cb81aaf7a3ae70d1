"""profiler/nvml.py's bookkeeping against a stand-in NVML (tests/standins/nvml.py): stand-in, not a GPU.

The real pynvml runs; only libnvidia-ml.so is played in Python, with made-up device data. These
check what the sampler makes of NVML's answers: whose memory counts (the run's process tree only),
the units (bytes; percent; millijoules to joules since first seen; milliwatts to watts), which
energy source a machine gets, and what a sample says when NVML fails for a device or a process
(unknown, never 0). Whether a real card answers this way is the GPU check's (docs/gpu.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pynvml
import pytest

from profiler import energy, nvml
from profiler import timeline as timelines
from tests.standins.nvml import StandInGpu, StandInLibNvml, install

MIB = 1 << 20
GIB = 1 << 30
RUN, CHILD, OTHER = 4242, 4343, 999  # the worker, its child, a process of someone else's


def standin(monkeypatch: pytest.MonkeyPatch, *gpus: StandInGpu, init_error: int = pynvml.NVML_SUCCESS):
    return install(monkeypatch, StandInLibNvml(list(gpus), init_error))


def test_only_the_runs_processes_count_in_bytes_and_only_their_devices_utilisation(monkeypatch):
    """Another process's memory on the same card is not the run's, nor is a card the run is not on."""
    standin(
        monkeypatch,
        StandInGpu(processes=[(RUN, 11_380 * MIB), (OTHER, 40 * GIB)], util=87),
        StandInGpu(processes=[(OTHER, 70 * GIB)], util=100),
        StandInGpu(processes=[(CHILD, 760 * MIB)], util=41),
    )
    gpu = nvml.Gpu()
    assert gpu.status == "NVML: 3 device(s)"
    got = gpu.measure({RUN, CHILD})
    assert got["gpu_mem"] == 11_380 * MIB + 760 * MIB
    assert got["gpu_util"] == pytest.approx((87 + 41) / 2)
    assert gpu.measure({12345}) == {"gpu_mem": 0, "gpu_util": None, "gpu_energy": None, "gpu_power": None}


def test_the_sampler_counts_its_workers_tree_and_not_the_process_that_started_it(monkeypatch, tmp_path):
    """The whole sample, with the sampler's real process tree (psutil): a worker and its child on
    the device count; pytest's own process, listed on the same device, is not in the tree."""
    from profiler import sampler as sampler_module

    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(worker.stdout.readline())  # type: ignore[union-attr]
        standin(
            monkeypatch,
            StandInGpu(
                processes=[(worker.pid, 2 * GIB), (child, 300 * MIB), (os.getpid(), 5 * GIB)], util=64
            ),
        )
        args = sampler_module.parse_args(["--pid", str(worker.pid), "--out", str(tmp_path / "s.jsonl")])
        args.pid = worker.pid
        with open(tmp_path / "s.jsonl", "w") as out:
            sampler_module.Sampler(args, out, gpu=nvml.Gpu()).sample()
    finally:
        worker.kill()
        worker.wait()
        subprocess.run(["kill", str(child)], check=False)
    written = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[0])
    assert written["procs"] == 2
    assert written["gpu_mem"] == 2 * GIB + 300 * MIB and written["gpu_util"] == 64


def test_the_energy_counter_becomes_joules_since_the_run_was_first_seen_and_power_watts(monkeypatch):
    card = StandInGpu(processes=[(OTHER, GIB)], util=30, energy_mj=9_000_000_000, power_mw=120_500)
    standin(monkeypatch, card)
    gpu = nvml.Gpu()
    assert gpu.energy == nvml.COUNTER
    before = gpu.measure({RUN})  # the run is not on the card yet: no energy of its own
    assert before["gpu_energy"] is None and before["gpu_power"] is None
    card.processes.append((RUN, GIB))
    card.energy_mj += 1_000  # first seen here: the counter's rise is counted from this reading
    assert gpu.measure({RUN})["gpu_energy"] == 0.0
    card.energy_mj += 312_500
    card.power_mw = 412_345
    got = gpu.measure({RUN})
    assert got["gpu_energy"] == 312.5 and got["gpu_power"] == 412.345


def test_one_card_without_the_counter_puts_every_card_on_power(monkeypatch):
    """Joules are never part counter, part integrated power: one card without the counter, and
    every card's figure is its power."""
    standin(
        monkeypatch,
        StandInGpu(processes=[(RUN, GIB)], energy_mj=5_000_000, power_mw=300_000),
        StandInGpu(processes=[(RUN, GIB)], energy_mj=None, power_mw=250_000),
    )
    gpu = nvml.Gpu()
    assert gpu.energy == nvml.POWER and gpu.sources == ["power", "power"]
    got = gpu.measure({RUN})
    assert got["gpu_energy"] is None and got["gpu_power"] == 550.0


def test_a_card_with_neither_counter_nor_power_says_so(monkeypatch):
    standin(monkeypatch, StandInGpu(processes=[(RUN, GIB)], util=50))
    gpu = nvml.Gpu()
    assert gpu.energy == (
        "none: NVML reports neither total energy nor power on any device "
        "(NVMLError_NotSupported: Not Supported)"
    )
    got = gpu.measure({RUN})
    assert got == {"gpu_mem": GIB, "gpu_util": 50, "gpu_energy": None, "gpu_power": None}


def test_no_driver_is_no_nvml_and_every_gpu_column_empty(monkeypatch):
    standin(monkeypatch, StandInGpu(processes=[(RUN, GIB)]), init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    gpu = nvml.Gpu()
    assert gpu.status == "no NVML (NVMLError_DriverNotLoaded: Driver Not Loaded)"
    assert gpu.energy == "none: " + gpu.status
    assert gpu.measure({RUN}) == {"gpu_mem": None, "gpu_util": None, "gpu_energy": None, "gpu_power": None}


def test_a_card_lost_mid_run_leaves_its_figures_unknown_never_zero(monkeypatch):
    """NVML_ERROR_GPU_IS_LOST for the card the run is on: the sample's memory, energy and power
    are unknown (None), not 0 bytes and a fall in the card's energy."""
    card = StandInGpu(processes=[(RUN, 3 * GIB)], util=90, energy_mj=1_000_000, power_mw=400_000)
    standin(monkeypatch, card)
    gpu = nvml.Gpu()
    gpu.measure({RUN})
    card.energy_mj += 40_000
    assert gpu.measure({RUN})["gpu_energy"] == 40.0
    card.lost = True
    assert gpu.measure({RUN}) == {"gpu_mem": None, "gpu_util": None, "gpu_energy": None, "gpu_power": None}


def test_a_lost_card_of_two_makes_the_sums_unknown_and_one_the_run_never_used_changes_nothing(monkeypatch):
    used, other, idle = (
        StandInGpu(processes=[(RUN, GIB)], util=80, energy_mj=2_000_000, power_mw=300_000),
        StandInGpu(processes=[(RUN, 2 * GIB)], util=60, energy_mj=7_000_000, power_mw=200_000),
        StandInGpu(processes=[(OTHER, GIB)], util=10, energy_mj=1_000, power_mw=50_000),
    )
    standin(monkeypatch, used, other, idle)
    gpu = nvml.Gpu()
    idle.lost = True  # a card the run never appeared on: its loss is not the run's
    assert gpu.measure({RUN}) == {"gpu_mem": 3 * GIB, "gpu_util": 70.0, "gpu_energy": 0.0, "gpu_power": 500.0}
    used.energy_mj += 10_000
    other.energy_mj += 20_000
    assert gpu.measure({RUN})["gpu_energy"] == 30.0
    other.lost = True  # the sum without it would read as the run's memory and energy falling
    got = gpu.measure({RUN})
    assert got["gpu_mem"] is None and got["gpu_energy"] is None and got["gpu_power"] is None
    assert got["gpu_util"] == 80  # a mean over the cards it could read


def test_a_process_whose_memory_nvml_cannot_give_is_unknown_not_zero(monkeypatch):
    """pynvml turns NVML_VALUE_NOT_AVAILABLE into usedGpuMemory None (Windows' WDDM, some
    virtualised cards): the run's memory is then unknown, while its utilisation still counts."""
    standin(monkeypatch, StandInGpu(processes=[(RUN, None), (CHILD, GIB)], util=55))
    got = nvml.Gpu().measure({RUN, CHILD})
    assert got["gpu_mem"] is None and got["gpu_util"] == 55


def test_the_counter_read_through_nvml_gives_an_epochs_joules(monkeypatch):
    """From the stand-in's millijoules to profiler/energy.py's joules per epoch: a card drawing
    400 W (40,000 mJ a 0.1 s sample) over a 0.5 s epoch is 200 J."""
    card = StandInGpu(processes=[(RUN, GIB)], energy_mj=50_000_000, power_mw=400_000)
    standin(monkeypatch, card)
    gpu = nvml.Gpu()
    samples = []
    for i in range(7):
        record = {"kind": "sample", "t": 1.0 + 0.1 * i, "phase": "epoch", "epoch": 1, "repeat": 0}
        record.update(gpu.measure({RUN}))
        samples.append(record)
        card.energy_mj += 40_000
    timeline = timelines.Timeline(found=True, start={"kind": "start", "energy": gpu.energy})
    timeline.samples = samples
    assert energy.source(timeline) == nvml.COUNTER
    assert energy.epoch_joules(timeline, [{"epoch": 1, "seconds": 0.5}]) == [pytest.approx(200.0)]


def test_a_counter_that_fails_at_first_sight_counts_from_its_first_reading(monkeypatch):
    """The counter's reading when the run is first seen is its zero; where that reading fails, the
    next that works is (it used to stay None, and the card's energy was never counted)."""
    card = StandInGpu(processes=[(RUN, GIB)], energy_mj=8_000_000, power_mw=100_000)
    standin(monkeypatch, card)
    gpu = nvml.Gpu()
    card.energy_mj = None  # NVML_ERROR_NOT_SUPPORTED, this once
    assert gpu.measure({RUN})["gpu_energy"] is None
    card.energy_mj = 8_050_000
    assert gpu.measure({RUN})["gpu_energy"] == 0.0
    card.energy_mj += 25_000
    assert gpu.measure({RUN})["gpu_energy"] == 25.0

"""The sampler's view of the GPUs, through NVML (nvidia-ml-py's pynvml), where there is one.

Imported by the sampler only: NVML never enters a framework's environment.
"""

from __future__ import annotations

from typing import Any

# The energy sources, as the sampler's start record ("energy") and runs.gpu_energy_source name them.
COUNTER = "NVML total energy counter"
POWER = "NVML power, integrated"


class Gpu:
    """Device memory, utilisation and energy of the run's GPUs through NVML, where there is one.

    Energy is the device's, not the process's (NVML has no per-process energy): the total energy
    counter (millijoules since the driver loaded) where the card has one, else its power draw
    (milliwatts), which the report integrates over time. Only devices the run's processes have
    appeared on count, each from the first sample it was seen on.
    """

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        self.sources: list[str | None] = []  # per device: "counter", "power" or None
        self.used: dict[int, float | None] = {}  # device index -> counter when first seen (mJ)
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.nvml = pynvml
            self.status = f"NVML: {len(self.handles)} device(s)"
        except Exception as exc:  # no library, no driver, no device: GPU columns stay empty
            self.status = f"no NVML ({type(exc).__name__}: {exc})".strip()
            self.energy = f"none: {self.status}"
            return
        self.energy = self._probe_energy()

    def _probe_energy(self) -> str:
        """Which energy source each device offers; the sampler's start record says which."""
        why = "no device"
        for handle in self.handles:
            source = None
            for name, call in (
                ("counter", "nvmlDeviceGetTotalEnergyConsumption"),
                ("power", "nvmlDeviceGetPowerUsage"),
            ):
                try:
                    getattr(self.nvml, call)(handle)
                    source = name
                    break
                except Exception as exc:  # NVMLError_NotSupported on cards without it
                    why = f"{type(exc).__name__}: {exc}"
            self.sources.append(source)
        kinds = {s for s in self.sources if s}
        if not kinds:
            return f"none: NVML reports neither total energy nor power on any device ({why})"
        if kinds == {"counter"}:
            return COUNTER
        # One source for every device, so the run's joules are never part counter, part power.
        self.sources = ["power" if s else None for s in self.sources]
        return POWER

    def measure(self, pids: set[int]) -> dict[str, Any]:
        """Bytes of device memory the pids hold, the mean utilisation of the devices they use,
        and those devices' energy (J since first seen) and power (W), summed.

        A sum is None (unknown) where a part of it could not be read: a device the run is on that
        NVML cannot answer for (lost, reset), or a process of the run whose memory NVML does not
        give (pynvml's None). A sum without that part would read as the run's memory or energy
        falling. A device the run has never been seen on does not count, readable or not.
        """
        record: dict[str, Any] = {"gpu_mem": None, "gpu_util": None, "gpu_energy": None, "gpu_power": None}
        if self.nvml is None:
            return record
        used: int | None = 0
        utils = []
        for index, handle in enumerate(self.handles):
            try:
                mine = [p for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid in pids]
            except self.nvml.NVMLError:
                if index in self.used:
                    used = None
                continue
            if not mine:
                continue
            if index not in self.used:
                self.used[index] = self._counter(index)
            memory = [p.usedGpuMemory for p in mine]
            used = None if used is None or None in memory else used + sum(memory)
            try:
                utils.append(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except self.nvml.NVMLError:
                continue
        record["gpu_mem"] = used
        record["gpu_util"] = sum(utils) / len(utils) if utils else None
        record.update(self._energy())
        return record

    def _counter(self, index: int) -> float | None:
        if self.sources[index] != "counter":
            return None
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handles[index]))
        except self.nvml.NVMLError:
            return None

    def _energy(self) -> dict[str, float | None]:
        """Joules since first seen and watts, summed over the run's devices; each None where a
        device that should give it could not be read this time."""
        joules: float | None = None
        watts: float | None = None
        lost_joules = lost_watts = False
        for index, base in list(self.used.items()):
            if self.sources[index] is None:
                continue
            if self.sources[index] == "counter":
                now = self._counter(index)
                if base is None:  # its first reading failed: counted from the first that works
                    self.used[index] = base = now
                if now is None or base is None:
                    lost_joules = True
                else:
                    joules = (joules or 0.0) + (now - base) / 1000.0
            try:
                watts = (watts or 0.0) + self.nvml.nvmlDeviceGetPowerUsage(self.handles[index]) / 1000.0
            except self.nvml.NVMLError:
                lost_watts = True
        return {
            "gpu_energy": None if joules is None or lost_joules else round(joules, 3),
            "gpu_power": None if watts is None or lost_watts else round(watts, 3),
        }

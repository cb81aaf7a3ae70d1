"""Stand-in, not a GPU: libnvidia-ml.so played in Python, under the real `pynvml` (nvidia-ml-py).

profiler/nvml.py calls pynvml, and pynvml calls the C library through ctypes: each wrapper looks
the C function up on `pynvml.nvmlLib`, passes it ctypes objects to fill, and turns its return
code into a Python value or an `NVMLError` subclass. `StandInLibNvml` takes that library's place,
so the whole of pynvml's Python runs as on a GPU machine: its units (bytes, percent, millijoules,
milliwatts), its `None` for a process whose memory NVML cannot give (NVML_VALUE_NOT_AVAILABLE),
its error classes from the codes (NVML_ERROR_GPU_IS_LOST is `NVMLError_GpuIsLost`). Only the
device data are made up, in `StandInGpu`; they are illustrative, not recorded from a card.

Installed with `install(monkeypatch, lib)`, which also empties pynvml's cache of function
pointers, so no real library is loaded and nothing leaks into another test.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

import pynvml
import pytest

SUCCESS = pynvml.NVML_SUCCESS
NOT_AVAILABLE = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value  # usedGpuMemory NVML cannot give


@dataclass
class StandInGpu:
    """One stand-in device: what NVML would answer about it (stand-in, not a GPU).

    processes: (pid, bytes of device memory, or None where NVML cannot give it); util: percent;
    energy_mj: the total energy counter in millijoules since the driver loaded (None: the card has
    none, NVML_ERROR_NOT_SUPPORTED); power_mw: the power draw in milliwatts (None: not supported);
    lost: every call about it fails with NVML_ERROR_GPU_IS_LOST, as for a card that fell off the bus.
    """

    processes: list[tuple[int, int | None]] = field(default_factory=list)
    util: int = 0
    energy_mj: int | None = None
    power_mw: int | None = None
    lost: bool = False


def _out(ref: Any) -> Any:
    """The ctypes object a wrapper passed by reference (byref) for the library to fill."""
    return ref._obj


class StandInLibNvml:
    """Stand-in, not a GPU: the C functions of libnvidia-ml.so that bench's sampler reaches.

    Each method has the C function's name and its calling convention as pynvml uses it: it fills
    the ctypes objects passed to it and returns an NVML return code. `calls` records
    (function, device index) in order.
    """

    def __init__(self, gpus: list[StandInGpu], init_error: int = SUCCESS) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.calls: list[tuple[str, int | None]] = []

    def _gpu(self, name: str, handle: Any) -> tuple[StandInGpu | None, int]:
        index = (ctypes.cast(handle, ctypes.c_void_p).value or 0) - 1
        self.calls.append((name, index))
        if not 0 <= index < len(self.gpus):
            return None, pynvml.NVML_ERROR_INVALID_ARGUMENT
        gpu = self.gpus[index]
        return (None, pynvml.NVML_ERROR_GPU_IS_LOST) if gpu.lost else (gpu, SUCCESS)

    def nvmlInitWithFlags(self, flags: int) -> int:
        self.calls.append(("nvmlInitWithFlags", None))
        return self.init_error

    def nvmlShutdown(self) -> int:
        return SUCCESS

    def nvmlDeviceGetCount_v2(self, count: Any) -> int:
        _out(count).value = len(self.gpus)
        return SUCCESS

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int:
        # A handle is an opaque pointer; the stand-in's is the device's index + 1 (never NULL).
        ctypes.c_void_p.from_address(ctypes.addressof(_out(device))).value = index.value + 1
        return SUCCESS

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any, count: Any, infos: Any) -> int:
        gpu, code = self._gpu("nvmlDeviceGetComputeRunningProcesses_v3", handle)
        if gpu is None:
            return code
        if not gpu.processes:
            return SUCCESS  # pynvml reads a success to the size query as "no processes"
        if infos is None or _out(count).value < len(gpu.processes):
            _out(count).value = len(gpu.processes)
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        for i, (pid, used) in enumerate(gpu.processes):
            infos[i].pid = pid
            infos[i].usedGpuMemory = NOT_AVAILABLE if used is None else used
        _out(count).value = len(gpu.processes)
        return SUCCESS

    def nvmlDeviceGetUtilizationRates(self, handle: Any, util: Any) -> int:
        gpu, code = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        if gpu is None:
            return code
        _out(util).gpu = gpu.util
        return SUCCESS

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any, millijoules: Any) -> int:
        gpu, code = self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle)
        if gpu is None:
            return code
        if gpu.energy_mj is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        _out(millijoules).value = gpu.energy_mj
        return SUCCESS

    def nvmlDeviceGetPowerUsage(self, handle: Any, milliwatts: Any) -> int:
        gpu, code = self._gpu("nvmlDeviceGetPowerUsage", handle)
        if gpu is None:
            return code
        if gpu.power_mw is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        _out(milliwatts).value = gpu.power_mw
        return SUCCESS


def install(monkeypatch: pytest.MonkeyPatch, lib: StandInLibNvml) -> StandInLibNvml:
    """Make the real pynvml call the stand-in library for the rest of the test."""
    monkeypatch.setattr(pynvml, "nvmlLib", lib)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(pynvml, "_nvmlLib_refcount", 0)
    return lib

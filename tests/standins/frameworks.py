"""Stand-ins, not a GPU: the device calls with which TensorFlow's and PyTorch's adapters apply
`gpu_memory_budget`, recording what they are asked.

Each is the framework module object as the adapter's helper sees it (`tf`, `torch`), holding only
the attributes that helper touches. Their shapes follow the real ones: TensorFlow 2.21's
`LogicalDeviceConfiguration` is a namedtuple of these three fields, `PhysicalDevice` one of
(name, device_type) (both seen in this project's TensorFlow environment); PyTorch's device
properties carry `total_memory` in bytes. Paddle's cap is an environment variable, which needs no
stand-in. The framework-side tests (tests/test_cuda_branch_frameworks.py) patch the same calls
inside the real frameworks instead.
"""

from __future__ import annotations

import types
from collections import namedtuple
from typing import Any

LogicalDeviceConfiguration = namedtuple(
    "LogicalDeviceConfiguration",
    ["memory_limit", "experimental_priority", "experimental_device_ordinal"],
    defaults=[None, None, None],
)
PhysicalDevice = namedtuple("PhysicalDevice", ["name", "device_type"])


class StandInTfConfig:
    """Stand-in, not a GPU: `tf.config` on a machine with ``gpus`` GPUs, before its context starts."""

    LogicalDeviceConfiguration = LogicalDeviceConfiguration

    def __init__(self, gpus: int = 1) -> None:
        self.gpus = [PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)]
        self.logical: list[tuple[Any, list[Any]]] = []  # each set_logical_device_configuration call

    def list_physical_devices(self, device_type: str | None = None) -> list[PhysicalDevice]:
        return list(self.gpus) if device_type == "GPU" else []

    def set_logical_device_configuration(self, device: PhysicalDevice, logical_devices: list[Any]) -> None:
        self.logical.append((device, list(logical_devices)))


def standin_tf(gpus: int = 1) -> types.SimpleNamespace:
    """Stand-in, not a GPU: the `tf` module as _memory_budget(tf, budget) sees it."""
    return types.SimpleNamespace(config=StandInTfConfig(gpus))


class StandInTorchCuda:
    """Stand-in, not a GPU: `torch.cuda` with cards of the given sizes (bytes)."""

    def __init__(self, *total_memory: int) -> None:
        self.total_memory = list(total_memory)
        self.fractions: list[tuple[float, int]] = []  # each set_per_process_memory_fraction call

    def get_device_properties(self, device: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(name=f"stand-in GPU {device}", total_memory=self.total_memory[device])

    def set_per_process_memory_fraction(self, fraction: float, device: int) -> None:
        if not 0 <= fraction <= 1:  # torch's own check: "Invalid fraction value"
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self.fractions.append((fraction, device))


def standin_torch(*total_memory: int) -> types.SimpleNamespace:
    """Stand-in, not a GPU: the `torch` module as _memory_budget(torch, budget, index) sees it."""
    return types.SimpleNamespace(cuda=StandInTorchCuda(*total_memory))

"""What each adapter asks its framework for to apply `gpu_memory_budget`, against stand-ins of the
frameworks' device calls (tests/standins/frameworks.py): stand-ins, not a GPU, and no framework.

The helpers are the adapters' own (workers/adapters/<framework>/adapter.py), split out of setup()
so that the arithmetic and the call can be checked here: TensorFlow's logical device of
`memory_limit` MiB on the first GPU, PyTorch's per-process fraction of its own card, Paddle's
FLAGS_gpu_memory_limit_mb. tests/test_cuda_branch_frameworks.py runs the same code inside setup()
in each real framework, with only its device calls stood in. Whether a framework then keeps to
the cap on a card has been seen for PyTorch only (docs/gpu.md).
"""

from __future__ import annotations

import pytest

from tests.standins.frameworks import PhysicalDevice, standin_tf, standin_torch
from workers.adapters.paddle import env as paddle_env
from workers.adapters.pytorch import env as pytorch_env
from workers.adapters.tensorflow import env as tensorflow_env

MIB, GIB = 1 << 20, 1 << 30
H100, H200 = 85_045_231_616, 150_109_978_624  # bytes, as torch reports the two cards' memory (illustrative)


@pytest.mark.parametrize(
    "budget, mib",
    [(GIB, 1024), (3 * GIB // 2, 1536), (GIB + 1, 1024), (GIB - 1, 1023), (80 * GIB, 81920), (1, 1)],
)
def test_tensorflow_makes_the_first_gpu_one_logical_device_of_the_budget_in_mib(budget, mib):
    """Whole MiB rounded down (never above the budget), at least 1; one logical device on GPU:0."""
    tf = standin_tf(gpus=2)
    assert tensorflow_env.memory_budget(tf, budget) == {"bytes": budget, "logical_device_mb": mib}
    ((device, logical),) = tf.config.logical
    assert device == PhysicalDevice("/physical_device:GPU:0", "GPU")
    assert [c.memory_limit for c in logical] == [mib]
    assert logical[0].experimental_priority is None and logical[0].experimental_device_ordinal is None


@pytest.mark.parametrize(
    "budget, total, fraction",
    [
        (GIB, 80 * GIB, 1 / 80),
        (GIB, H100, GIB / H100),
        (40 * GIB, H200, 40 * GIB / H200),
        (200 * GIB, H200, 1.0),
    ],
)
def test_pytorch_asks_for_the_budget_as_a_float_fraction_of_its_own_card(budget, total, fraction):
    """torch's cap is a fraction of the card's total memory: budget / total, at most 1 (a budget
    larger than the card is the whole card, not torch's ValueError)."""
    torch = standin_torch(total)
    got = pytorch_env.memory_budget(torch, budget, 0)
    assert got == {"bytes": budget, "fraction": pytest.approx(fraction), "device": 0}
    assert torch.cuda.fractions == [(pytest.approx(fraction), 0)]
    assert type(torch.cuda.fractions[0][0]) is float  # torch raises TypeError on anything else
    assert torch.cuda.fractions[0][0] * total <= budget * (1 + 1e-12)


def test_a_pytorch_replica_caps_its_own_card_not_the_first():
    """A data-parallel replica runs on the GPU of its rank (join_replicas); its budget is a
    fraction of that card, set on that card. It used to go to GPU 0 whatever the rank."""
    config = {"device": "cuda", "replica": {"rank": 1, "count": 2}}
    assert pytorch_env.cuda_index(config) == 1
    assert pytorch_env.cuda_index({"device": "cuda"}) == 0
    assert pytorch_env.cuda_index({"replica": {"rank": 0, "count": 1}}) == 0
    torch = standin_torch(H200, H100)
    assert pytorch_env.memory_budget(torch, GIB, 1)["fraction"] == pytest.approx(GIB / H100)
    assert torch.cuda.fractions == [(pytest.approx(GIB / H100), 1)]


@pytest.mark.parametrize(
    "budget, flag", [(GIB, "1024"), (3 * GIB // 2, "1536"), (GIB + 1, "1024"), (GIB - 1, "1023"), (1, "1")]
)
def test_paddle_is_capped_by_its_flag_in_whole_mib(budget, flag):
    assert paddle_env.memory_limit_flag(budget) == {"FLAGS_gpu_memory_limit_mb": flag}

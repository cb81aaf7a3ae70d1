"""What every framework's attention test asserts of its driver's results (issue 25), in one place:
the tiny models against the float64 reference, the causal mask, and learning. Each
tests/test_attention_<framework>.py chooses its own cases (modes, kernels) and calls these."""

from __future__ import annotations

import math
from typing import Any


def matches_reference(got: dict[str, Any]) -> None:
    """The tiny model's output equals workers.models.pure's float64 reference: its shape, its
    parameter count (a tied table counted once), values within float32's error through two
    blocks (a relative error of a few 1e-6; Singa's exact GELU's erf within 1.5e-7)."""
    assert got["parameters"] == got["infer"]
    assert got["shape"] == got["want_shape"]
    assert got["max_abs_diff"] <= 1e-4 * max(1.0, got["scale"]), got


def causal(got: dict[str, Any]) -> None:
    """Changing the last token moves no earlier position's logits, and does move its own."""
    assert got["earlier_positions_moved"] <= 1e-6 and got["last_position_moved"] > 1e-3


def learns(got: dict[str, Any]) -> None:
    """Well above chance on held-out data, with a loss below chance's (log of the classes); and
    an accuracy of at most one (a language model's is over every position, not per sequence)."""
    loss, accuracy = [h[0] for h in got["history"]], [h[1] for h in got["history"]]
    assert max(accuracy) > 2 * got["chance"] and max(accuracy) > accuracy[0], got
    assert min(loss) < math.log(1 / got["chance"]), got
    assert max(accuracy) <= 1.0, got

"""The PyTorch side of the GRU cross-checks (the TensorFlow, MXNet, Paddle and JAX adapter tests).

A script run in the PyTorch environment builds the `gru` model with the PyTorch adapter and dumps
its weights in PyTorch's layout (embedding (V, E); weight_ih (3H, E), weight_hh (3H, H), bias_ih,
bias_hh, gates r, z, n; dense weight (classes, H) and bias), a few synthetic token sequences
(with their padding), the logits and the last GRU state, into gru.npz; another framework loads
the weights and must compute the same outputs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from tests.drivers import run_driver

TORCH_GRU = textwrap.dedent(
    """
    import sys
    import numpy as np, torch
    from workers import data, models
    from workers.adapters import pytorch

    folder = sys.argv[1]
    a = pytorch.Adapter(dict(framework="pytorch", device="cpu", optimizer="sgd", lr=0.01,
                             momentum=0.9, threads=0, seed=0))
    a.setup()
    a.build(models.build_arch("gru", 2, 1))
    embedding, last, dense = a.model
    gru = last.gru
    tokens = data.synthetic_tokens(dict(dataset_size=5, val_fraction=0.2, classes=2, seed=1))
    x = tokens["x_train"]  # four sequences of 150 ids, pre-padded with 0 to different lengths
    with torch.no_grad():
        dense.bias.normal_(0, 0.1)  # not the initial zeros, so a misplaced bias shows
        a.model.eval()
        out = a.model(torch.from_numpy(x)).numpy()
        state = last(embedding(torch.from_numpy(x))).numpy()
    weights = {"embedding": embedding.weight, "weight_ih": gru.weight_ih_l0,
               "weight_hh": gru.weight_hh_l0, "bias_ih": gru.bias_ih_l0, "bias_hh": gru.bias_hh_l0,
               "dense_weight": dense.weight, "dense_bias": dense.bias}
    np.savez(folder + "/gru.npz", x=x, out=out, state=state,
             **{k: v.detach().numpy() for k, v in weights.items()})
    """
)


def dump(pytorch_python: Path, folder: Path) -> Path:
    """Run the script in the PyTorch environment; the path of the gru.npz it wrote."""
    (folder / "torch_gru.py").write_text(TORCH_GRU)
    run_driver(pytorch_python, folder / "torch_gru.py", str(folder))
    return folder / "gru.npz"


# -- the checks every framework's GRU test makes on its driver's results -------------------------


def assert_same_as_pytorch(result: list[float]) -> None:
    """[largest difference, largest magnitude] of an output against PyTorch's: equal to 1e-5."""
    difference, scale = result
    assert difference <= 1e-5 * max(1.0, scale)


def assert_learns(epochs: list[list[float]], accuracy: float = 0.7) -> None:
    """[train loss, val loss, val accuracy] per epoch: the loss falls and accuracy beats chance (0.5)."""
    losses = [e[0] for e in epochs]
    assert losses[-1] < losses[0] * 0.7, epochs
    assert epochs[-1][2] > accuracy, epochs


def assert_harness_ran(train: dict[str, Any], features: dict[str, Any]) -> None:
    """A harness run of the GRU and one of its features (task inference, features: true)."""
    assert train["outcome"] == "ok", train["reason"] or train["stderr_tail"]
    assert train["parameter_count"] == 3_818_302 and train["images_per_second"] > 0
    assert features["outcome"] == "ok", features["reason"] or features["stderr_tail"]
    # features: true stops at the last GRU state: the classifier's 100 * 2 + 2 are left out
    assert features["parameter_count"] == 3_818_302 - 202

"""The PyTorch side of the GRU cross-checks (tests/test_jax_adapter.py, tests/test_paddle_adapter.py).

A script run in the PyTorch environment builds the `gru` model with the PyTorch adapter and dumps
its weights in PyTorch's layout (embedding (V, E); weight_ih (3H, E), weight_hh (3H, H), bias_ih,
bias_hh, gates r, z, n; dense weight (classes, H) and bias), a few synthetic token sequences
(with their padding), the logits and the last GRU state, into gru.npz; another framework loads
the weights and must compute the same outputs.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

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

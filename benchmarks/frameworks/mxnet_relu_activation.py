"""F.relu against F.Activation(act_type="relu") in MXNet's MKLDNN build, forward and backward.

A hybridized block of two 3x3 convolutions with a residual addition and the ReLU between them
(batch 8, 64 x 56 x 56), alternating the two, each timed over 20 steps after 3 warm-up steps.
Why bench's MXNet port uses Activation after its residual additions (docs/fairness.md).

    OMP_NUM_THREADS=1 ~/.cache/bench/envs/mxnet/bin/python -m benchmarks.frameworks.mxnet_relu_activation

Needs only mxnet.
"""

import time

import mxnet as mx
from mxnet import autograd, gluon


class Block(gluon.nn.HybridBlock):
    def __init__(self, act, **kwargs):
        super().__init__(**kwargs)
        self.act = act
        self.c1 = gluon.nn.Conv2D(64, 3, padding=1, use_bias=False)
        self.c2 = gluon.nn.Conv2D(64, 3, padding=1, use_bias=False)

    def hybrid_forward(self, F, x):
        y = self.c1(x) + x
        y = F.relu(y) if self.act == "relu" else F.Activation(y, act_type="relu")
        return self.c2(y)


def step(block, x):
    with autograd.record():
        loss = block(x).sum()
    loss.backward()


def main():
    x = mx.nd.random.uniform(shape=(8, 64, 56, 56))
    x.attach_grad()
    for act in ("relu", "Activation") * 2:
        block = Block(act)
        block.initialize()
        block.hybridize(static_alloc=True, static_shape=True)
        for _ in range(3):
            step(block, x)
        mx.nd.waitall()
        start = time.perf_counter()
        for _ in range(20):
            step(block, x)
        mx.nd.waitall()
        print(f"{act:<10} {(time.perf_counter() - start) / 20 * 1000:.1f} ms a step")


if __name__ == "__main__":
    main()

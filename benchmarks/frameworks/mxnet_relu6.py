"""MXNet's ReLU6 three ways, forward and backward, on one MobileNetV2-sized activation.

Run with the MXNet environment's interpreter (docs/fairness.md, "MXNet's MobileNetV2"):

    OMP_NUM_THREADS=2 ~/.cache/bench/envs/mxnet/bin/python -m benchmarks.frameworks.mxnet_relu6

- **clip**: `F.clip(x, 0, 6)`, the port's ReLU6 and Gluon's own MobileNetV2's (`RELU6`);
- **relu-min**: `F.minimum(F.Activation(x, act_type="relu"), 6)` (MKLDNN's ReLU, then a scalar minimum);
- **relu-only**: `F.Activation(x, act_type="relu")`, for scale (not the same function).

Each is run under autograd (forward, then backward with a ones gradient), `--repeats` times after
one untimed call, on an (N, C, H, W) array of the shape given; prints the median ms and checks that
clip and relu-min agree, values and gradients.
"""

import argparse
import statistics
import time

import mxnet as mx
import numpy as np


def timed(fn, x, repeats):
    times = []
    for i in range(repeats + 1):
        x.attach_grad()
        start = time.perf_counter()
        with mx.autograd.record():
            y = fn(x)
        y.backward(mx.nd.ones_like(y))
        x.grad.wait_to_read()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, y.asnumpy(), x.grad.asnumpy()


WAYS = {
    "clip": lambda x: mx.nd.clip(x, 0.0, 6.0),
    "relu-min": lambda x: mx.nd.minimum(mx.nd.Activation(x, act_type="relu"), 6.0),
    "relu-only": lambda x: mx.nd.Activation(x, act_type="relu"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        default="32,96,112,112",
        help="N,C,H,W (default: MobileNetV2's largest expanded activation at 224 px, batch 32)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    x = mx.nd.array(np.random.RandomState(0).standard_normal(shape).astype(np.float32) * 4)
    print(f"mxnet {mx.__version__}, shape {shape}; ms for forward + backward")
    results = {}
    for name, fn in WAYS.items():
        results[name] = timed(fn, x, args.repeats)
        print(f"{name:>10} {results[name][0]:>9.1f}")
    np.testing.assert_array_equal(results["clip"][1], results["relu-min"][1])
    np.testing.assert_array_equal(results["clip"][2], results["relu-min"][2])


if __name__ == "__main__":
    main()

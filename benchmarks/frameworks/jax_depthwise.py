"""How XLA's CPU backend runs MobileNetV2's depthwise convolutions, forward and backward, two ways.

Run with the JAX environment's interpreter (docs/fairness.md, "JAX's MobileNetV2"):

    ~/.cache/bench/envs/jax/bin/python -m benchmarks.frameworks.jax_depthwise --batch 32 --image-size 224

- **grouped**: `lax.conv_general_dilated` with `feature_group_count` = channels, what
  `flax.linen.Conv(feature_group_count=...)` compiles to (the JAX port's layer before issue 22);
- **shifted**: the same function written as k x k shifted slices of the padded input, each times
  one row of the kernel, summed (`workers/adapters/jax/layers.py`, `depthwise`).

For every depthwise layer of bench's MobileNetV2 at that size (read from workers/models/), each
way's forward and its gradients with respect to input and kernel are compiled together and timed
(median of `--repeats` calls after one untimed call); the two ways' outputs and gradients are
checked to agree. Prints ms per layer and the totals.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from workers import models
from workers.adapters.jax import layers as jax_layers


def depthwise_layers(image_size: int) -> list[tuple[int, int, int, int]]:
    """(channels, height, kernel, stride) of every depthwise convolution of bench's MobileNetV2."""
    arch = models.build_arch("mobilenet_v2", 1000, image_size)
    found: list[tuple[int, int, int, int]] = []

    def walk(layers: list[dict], shape: tuple[int, ...]) -> tuple[int, ...]:
        for node in layers:
            if node["op"] == "conv" and node["groups"] > 1:
                found.append((shape[0], shape[1], node["kernel"], node["stride"]))
            if node["op"] == "residual":
                walk(node["body"], shape)
            shape = models.out_shape(node, shape)
        return shape

    walk(arch["layers"], tuple(arch["input"]))
    return found


def grouped(x: jax.Array, w: jax.Array, stride: int, pad: int) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x,
        w,
        (stride, stride),
        ((pad, pad), (pad, pad)),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=x.shape[-1],
    )


def shifted(x: jax.Array, w: jax.Array, stride: int, pad: int) -> jax.Array:
    return jax_layers.depthwise(x, w, stride, pad)


def timed(fn, x: jax.Array, w: jax.Array, repeats: int) -> tuple[float, tuple]:
    out = jax.block_until_ready(fn(x, w))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(x, w))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, out


def step(way, stride: int, pad: int):
    def loss(x, w):
        return jnp.sum(way(x, w, stride, pad) ** 2) * 0.5

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    totals = {"grouped": 0.0, "shifted": 0.0}
    print(f"jax {jax.__version__}, batch {args.batch}, {args.image_size} px; ms for forward + both gradients")
    print(f"{'channels':>8} {'size':>5} {'k':>2} {'s':>2} {'grouped':>9} {'shifted':>9} {'ratio':>6}")
    for channels, size, kernel, stride in depthwise_layers(args.image_size):
        x = jnp.asarray(rng.standard_normal((args.batch, size, size, channels), np.float32))
        w = jnp.asarray(rng.standard_normal((kernel, kernel, 1, channels), np.float32) * 0.1)
        pad = (kernel - 1) // 2
        ms_g, (loss_g, grads_g) = timed(step(grouped, stride, pad), x, w, args.repeats)
        ms_s, (loss_s, grads_s) = timed(step(shifted, stride, pad), x, w, args.repeats)
        np.testing.assert_allclose(loss_s, loss_g, rtol=1e-4)
        for a, b in zip(grads_s, grads_g, strict=True):
            np.testing.assert_allclose(
                np.asarray(a), np.asarray(b), rtol=2e-3, atol=2e-3 * float(jnp.abs(b).max())
            )
        totals["grouped"] += ms_g
        totals["shifted"] += ms_s
        print(
            f"{channels:>8} {size:>5} {kernel:>2} {stride:>2} {ms_g:>9.1f} {ms_s:>9.1f} {ms_g / ms_s:>6.2f}"
        )
    g, s = totals["grouped"], totals["shifted"]
    print(f"{'total':>20} {g:>9.1f} {s:>9.1f} {g / s:>6.2f}")


if __name__ == "__main__":
    main()

"""What building a model costs in JAX: initialising its parameters and one forward pass, op by op
(eager) against one compiled function (jit) (docs/performance.md, "The test suite's time").

Run with the JAX environment's interpreter, from the repository root; each call is one fresh
process, as a run is, so XLA's own start-up is counted where a run pays it:

    ~/.cache/bench/envs/jax/bin/python -m benchmarks.frameworks.jax_init_cost resnet50 eager
    ~/.cache/bench/envs/jax/bin/python -m benchmarks.frameworks.jax_init_cost resnet50 jit

Arguments: a model, eager or jit, and optionally the depthwise convolution (shifted, the CPU's
default, or grouped) and the image size (default 64, as `bench models` in the tests).
"""

from __future__ import annotations

import functools
import sys
import time


def main() -> None:
    name, how = sys.argv[1], sys.argv[2]
    depthwise = sys.argv[3] if len(sys.argv) > 3 else "shifted"
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    start = time.perf_counter()
    import jax
    import jax.numpy as jnp

    from workers import models
    from workers.adapters.jax import layers
    from workers.adapters.jax.adapter import _zeros

    print(f"import {time.perf_counter() - start:.1f} s", flush=True)
    arch = models.build_arch(name, 1000, size)
    net = layers.network(arch, depthwise)
    key = jax.random.PRNGKey(0)
    init = functools.partial(net.init, train=False)
    apply = functools.partial(net.apply, train=False)
    if how == "jit":
        init, apply = jax.jit(init), jax.jit(apply)
    elif how != "eager":
        raise SystemExit("expected eager or jit, not " + how)
    start = time.perf_counter()
    variables = jax.block_until_ready(init(key, _zeros(jnp, arch, 1)))
    print(f"{how} init {time.perf_counter() - start:.1f} s", flush=True)
    start = time.perf_counter()
    out = jax.block_until_ready(apply(variables, _zeros(jnp, arch, 2)))
    print(f"{how} forward at batch 2 {time.perf_counter() - start:.1f} s {tuple(out.shape)}", flush=True)


if __name__ == "__main__":
    main()

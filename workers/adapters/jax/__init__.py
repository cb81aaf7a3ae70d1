"""JAX (Flax, Optax): one package of the layout every adapter shares (docs/adding-a-framework.md).

    adapter.py      the lifecycle the runner drives: set-up, model, optimizer, data, a step
    env.py          the environment and device probing around the framework's import
    layers.py       the model definition in JAX's layers (built from workers/models/)
    attention.py    the attention models' nodes
    initializers.py the Flax initialisers layers.py and attention.py share
    modes.py        its execution modes and precisions
    trace.py        its operator profiler as the kernel tracer (trace: kernels)

The runner loads this package and looks up ``Adapter``; jax is imported in setup() only.
"""

from workers.adapters.jax.adapter import Adapter  # noqa: F401

"""JAX (Flax, Optax): the lifecycle the runner drives (adapter), the model definition as one Flax
module (layers, imported once jax is), its profiler as a tracer (trace).

The runner loads this package and looks up ``Adapter``; jax is imported in setup() only.
"""

from workers.adapters.jax.adapter import Adapter  # noqa: F401

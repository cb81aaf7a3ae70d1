"""Flax initializers for workers.models.INIT's rules, shared by layers.py and attention.py.

Imported once jax is imported (by layers.py, which the adapter's build() imports).
"""

import jax
import jax.numpy as jnp


def normal(std):
    def init(key, shape, dtype=jnp.float32):
        return std * jax.random.normal(key, shape, dtype)
    return init


def uniform(bound):
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)
    return init


def constant(value):
    def init(key, shape, dtype=jnp.float32):
        return jnp.full(shape, value, dtype)
    return init

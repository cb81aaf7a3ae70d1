"""The CUDA version a JAX environment reports (`bench env use jax`, a run's setup): the first GPU
check showed "CUDA 0.11.2", the jax-cuda13 plugin's own version. No JAX needed: where jaxlib
reports no CUDA runtime, the plugin's name gives the major version."""

from __future__ import annotations

from workers.adapters.jax.env import cuda_version as _cuda_version


def test_a_cpu_build_has_no_cuda_version() -> None:
    assert _cuda_version(None) is None


def test_the_plugin_name_gives_cudas_major_version_not_the_plugins_own() -> None:
    assert _cuda_version("jax_cuda13_plugin") == "13"
    assert _cuda_version("jax_cuda12_plugin") == "12"

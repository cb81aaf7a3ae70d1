"""Apache Singa (Python 3.6): one package of the layout every adapter shares (docs/adding-a-framework.md).

    adapter.py      the lifecycle the runner drives: set-up, model, optimizer, data, a step
    env.py          the environment and device probing around the framework's import
    layers.py       the model definition in Apache Singa's layers (built from workers/models/)
    attention.py    the attention models' nodes
    modes.py        its execution modes and precisions
    trace.py        its operator profiler as the kernel tracer (trace: kernels)
    binding.py      the mends of its SWIG binding

The runner loads this package and looks up ``Adapter``; singa is imported in setup() only.
"""

from workers.adapters.singa.adapter import Adapter  # noqa: F401

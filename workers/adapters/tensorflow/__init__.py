"""TensorFlow (Keras 3): one package of the layout every adapter shares (docs/adding-a-framework.md).

    adapter.py      the lifecycle the runner drives: set-up, model, optimizer, data, a step
    env.py          the environment and device probing around the framework's import
    layers.py       the model definition in TensorFlow's layers (built from workers/models/)
    transformer.py  the attention models' nodes
    modes.py        its execution modes and precisions
    trace.py        its operator profiler as the kernel tracer (trace: kernels)

The runner loads this package and looks up ``Adapter``; tensorflow is imported in setup() only.
"""

from workers.adapters.tensorflow.adapter import Adapter  # noqa: F401

"""TensorFlow (Keras 3): the lifecycle the runner drives (adapter), its profiler as a tracer (trace).

The runner loads this package and looks up ``Adapter``; tensorflow is imported in setup() only.
"""

from workers.adapters.tensorflow.adapter import Adapter  # noqa: F401

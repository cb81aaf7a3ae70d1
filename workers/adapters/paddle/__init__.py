"""PaddlePaddle: the lifecycle the runner drives (adapter), its profiler as a tracer (trace).

The runner loads this package and looks up ``Adapter``; paddle is imported in setup() only.
"""

from workers.adapters.paddle.adapter import Adapter  # noqa: F401

"""Apache MXNet (Gluon): the lifecycle the runner drives (adapter), its profiler as a tracer (trace).

The runner loads this package and looks up ``Adapter``; mxnet is imported in setup() only.
"""

from workers.adapters.mxnet.adapter import Adapter  # noqa: F401

"""Apache Singa (Python 3.6): the lifecycle the runner drives (adapter), the mends of its SWIG
binding (binding), its graph time profiling as a tracer (trace).

The runner loads this package and looks up ``Adapter``; singa is imported in setup() only.
"""

from workers.adapters.singa.adapter import Adapter  # noqa: F401

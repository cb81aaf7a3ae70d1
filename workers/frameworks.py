"""What bench knows of each framework, in one place: read by the worker and the orchestrator alike.

Standard library only and Python 3.6 code (every framework's interpreter imports the worker
package, and the orchestrator reads this module as it reads workers/execution.py). Each field:

    name            the value of a matrix's `framework:`, the adapter's folder, the environment's
    distribution    the package whose installed version identifies the framework (read without
                    importing it); None for the fault worker, which has no environment
    python_series   the Python its only wheels need, where that is not the orchestrator's
    default_mode    what a run that leaves `mode` unset resolves to (docs/fairness.md says why)
    cuda_mode       the default on a GPU, where it differs (TensorFlow ran XLA there, as Keras's
                    jit_compile="auto" does, except for a recurrent model: workers/execution.py)
    compile_mode    whether the framework takes the `compile_mode` setting (torch.compile's mode)
    colour          its colour in every figure (colour-blind-safe, from Okabe and Ito)
"""

import collections

Framework = collections.namedtuple(
    "Framework",
    "name distribution python_series default_mode cuda_mode compile_mode colour",
)

FRAMEWORKS = (
    Framework("pytorch", "torch", None, "eager", None, True, "#D55E00"),
    Framework("tensorflow", "tensorflow-cpu", None, "graph", "compiled", False, "#E69F00"),
    Framework("mxnet", "mxnet", None, "graph", None, False, "#0072B2"),
    Framework("paddle", "paddlepaddle", None, "eager", None, False, "#009E73"),
    Framework("singa", "singa", "3.6", "graph", None, False, "#CC79A7"),
    Framework("jax", "jax", None, "compiled", None, False, "#56B4E9"),
    Framework("fault", None, None, "eager", None, False, "#555555"),
)

BY_NAME = dict((f.name, f) for f in FRAMEWORKS)
NAMES = tuple(f.name for f in FRAMEWORKS)
# The real frameworks: each has an environment of its own (the fault worker runs anywhere).
REAL = tuple(f.name for f in FRAMEWORKS if f.distribution is not None)

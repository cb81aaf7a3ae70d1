"""MXNet's own profiler as bench's tracer (mx.profiler, aggregate statistics).

MXNet runs a hybridized graph's operators in bulk segments, which its profiler reports as one
entry named after all of them ("Activation,Convolution,Activation,Pooling,..."): while tracing,
bulk execution is turned off (MXNET_EXEC_BULK_EXEC_TRAIN and _INFERENCE = 0, set before mxnet is
imported: the tracer is made before setup()), so each operator is timed alone. That changes how
the engine schedules work, one more reason a traced run's timings are perturbed.

The records are the "operator" domain of `mx.profiler.dumps(format='json')`: per operator, calls
and total time (the engine's execution time of the operator; the C API domain is left out).
"""

import json
import os

from workers.adapters import base

BULK_VARIABLES = ("MXNET_EXEC_BULK_EXEC_TRAIN", "MXNET_EXEC_BULK_EXEC_INFERENCE")
_SCALE = {"ms": 1e-3, "us": 1e-6, "s": 1.0}


class Tracer(base.Tracer):
    backend = "mxnet.profiler"
    device = "cpu"

    def __init__(self):
        base.Tracer.__init__(self)
        for name in BULK_VARIABLES:
            os.environ[name] = "0"
        self.notes.append("bulk execution off ({}=0) so operators are timed one by one".format(
            BULK_VARIABLES[0]))
        self._configured = False

    def start(self):
        import mxnet as mx

        if not self._configured:
            mx.profiler.set_config(profile_symbolic=True, profile_imperative=True, profile_memory=False,
                                   profile_api=False, aggregate_stats=True,
                                   filename="mxnet-profile.json")
            self._configured = True
        mx.profiler.set_state("run")

    def stop(self):
        import mxnet as mx

        mx.profiler.set_state("stop")

    def records(self):
        import mxnet as mx

        stats = json.loads(mx.profiler.dumps(reset=True, format="json"))
        scale = _SCALE[stats.get("Unit", {}).get("Time", "ms")]
        for name, entry in stats.get("Time", {}).get("operator", {}).items():
            self.add(name, entry["Count"], entry["Total"] * scale)
        return base.Tracer.records(self)

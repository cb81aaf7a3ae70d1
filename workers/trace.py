"""`trace: kernels`: which tracer a run gets, and what it leaves (result.json "trace", kernels.json).

On CPU the framework's own operator profiler (the adapter's tracer()). On cuda, framework-agnostic
kernel tracing: Nsight Systems when the orchestrator wrapped the worker in `nsys profile` (the
worker then only marks NVTX ranges and the orchestrator reads nsys's export), else CUPTI's activity
API through NVIDIA's cupti-python, else the framework's own GPU profiler (PyTorch's), else the run
is unsupported with the reason. The shared runner brackets each timed epoch with start()/stop().
"""

import json
import os

from workers.adapters.base import Tracer

KERNELS_FILE = "kernels.json"
NSYS_VARIABLE = "BENCH_TRACE_BACKEND"


class NsysMarks(Tracer):
    """Under `nsys profile` the records come from its export; the worker only marks ranges."""

    backend = "nsys"
    device = "cuda"

    def start(self):
        pass

    def stop(self):
        pass

    def records(self):
        return []


def tracer_for(adapter, config):
    """The tracer for this run, or None when it is not traced; raises Unsupported with why."""
    if config.get("trace") != "kernels":
        return None
    if config.get("device") != "cuda":
        return adapter.tracer()
    if os.environ.get(NSYS_VARIABLE) == "nsys":
        return NsysMarks()
    from workers import cupti_trace

    problem = cupti_trace.unavailable()
    if problem is None:
        return cupti_trace.Tracer()
    return adapter.gpu_tracer(problem)


class Session(object):
    """One run's tracing: the tracer, the traced seconds, and what it hands back at the end."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.seconds = 0.0
        self.epochs = 0

    def start(self):
        self.tracer.start()

    def stop(self, seconds):
        self.tracer.stop()
        self.seconds += seconds
        self.epochs += 1

    def finish(self):
        """The trace for the result (also written to kernels.json in the run folder).

        A profiler that fails while its records are read does not spoil the run's timings:
        the trace says `failed: ...` and the run stays ok.
        """
        try:
            records = list(self.tracer.records())
            status = "ok"
        except Exception as exc:  # the framework's profiler, whatever it raises
            records = []
            status = "failed: {}: {}".format(type(exc).__name__, exc)
        trace = {
            "backend": self.tracer.backend,
            "device": self.tracer.device,
            "status": status,
            "region_seconds": self.seconds,
            "epochs": self.epochs,
            "notes": list(getattr(self.tracer, "notes", [])),
            "records": records,
        }
        with open(KERNELS_FILE + ".tmp", "w") as f:
            json.dump(trace, f, sort_keys=True)
        os.rename(KERNELS_FILE + ".tmp", KERNELS_FILE)
        return trace


def session_for(adapter, config):
    tracer = tracer_for(adapter, config)
    return Session(tracer) if tracer is not None else None


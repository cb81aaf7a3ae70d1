"""The worker side of bench: runs one configuration inside one framework's environment.

    __main__.py     python -m workers --spec spec.json: reads the spec, runs, writes the result
    runner.py       the shared runner: warm-up, timed epochs, evaluation, time to target
    warmup.py       the steady-state rule and the compile seconds it reveals
    coordination.py a data-parallel run's replicas agreeing (replica 0 decides)
    execution.py    execution modes and precisions, shared with the orchestrator
    frameworks.py   what bench knows of each framework, read by the worker and the orchestrator
    releases.py     the releases each adapter serves, and a run's `version` checked against them
    data.py         the synthetic data set, identical in every framework
    events.py       the event stream (JSON lines, flushed as they happen, bounded)
    trace.py        trace: kernels, which tracer a run gets; cupti_trace.py the CUDA one (CUPTI)
    nvtx.py         NVTX ranges on cuda runs
    models/         the one model definition, as data
    adapters/       one package per framework, and the fault worker

Everything in this package except ``adapters/<framework>/`` is standard library only and must
stay parseable by Python 3.6 (Singa's interpreter): no dataclasses, f-strings are fine, no walrus.
"""

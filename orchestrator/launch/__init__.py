"""launch: one configuration in its own process, and the one outcome it ended in.

    execute.py   launch: the one sequence of a worker's run (folder, spec.json, environment, worker,
                 outcome, RunRecord); execute: a configuration run so in its framework's environment
    run_record.py  RunRecord: what one run left, the contract between executors and the sweep
    process.py   its own process group, pidfd wait, timeout: TERM then KILL the group
    capture.py   the worker's stdout/stderr through pipes into bounded logs
    orphans.py   the run's marker (BENCH_RUN_TOKEN): its escaped processes found and ended
    sidecar.py   the sampler (profiler/sampler.py) started and stopped beside the worker
    tracing.py   trace: kernels on the orchestrator's side: nsys around a cuda run, the trace collected
    outcomes.py  exit status + result + events + stderr: one outcome with its evidence
    probe.py     bench models: a model built for real in each environment, its parameters counted
                 (launch's sequence with the spec's task probe, the sampler off)

May import: text, config, provision. Never the database: a launched run is recorded by the sweep.
"""

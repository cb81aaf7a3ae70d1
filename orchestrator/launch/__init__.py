"""launch: one configuration in its own process, and the one outcome it ended in.

    execute.py   execute/launch: one configuration run on this machine (its folder, its interpreter,
                 a run of one worker or a data-parallel run's replicas, a port taken tried again);
                 allowed_cpus: the CPUs it is pinned to
    lifecycle.py the one lifecycle of a run's worker processes, one or N: start (spec.json,
                 environment, command, nsys, sampler), watch (process.run_workers), end (each
                 outcome classified), gather (the RunRecord; N replicas' by replicas.combine);
                 the Ray task's replicas go through it too (executors/ray_task.py)
    replicas.py  a data-parallel run's replica-specific parts: CPU shares, rendezvous ports, a replica's
                 folder and row, the N outcomes combined into one
    run_record.py  RunRecord: what one run left, the contract between executors and the sweep
    process.py   its own process group, pidfd wait, timeout: TERM then KILL the group
    capture.py   the worker's stdout/stderr through pipes into bounded logs
    orphans.py   the run's marker (BENCH_RUN_TOKEN): its escaped processes found and ended
    sidecar.py   the sampler (profiler/sampler.py) started and stopped beside the worker
    tracing.py   trace: kernels on the orchestrator's side: nsys around a cuda run, the trace collected
    outcomes.py  exit status + result + events + stderr: one outcome with its evidence
    probe.py     bench models: a model built for real in each environment, its parameters counted
                 (launch's sequence with the spec's task probe, the sampler off)
    calibration.py  a calibration (profiler/calibration.py) taken in a process of its own

May import: text, config, provision. Never the database: a launched run is recorded by the sweep.
"""

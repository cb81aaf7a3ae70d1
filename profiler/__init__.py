"""The profiler, in two roles.

As the sidecar, a process of its own in the orchestrator's environment, watching a worker from
outside (docs/profiler.md):

    sampler.py      python -m profiler.sampler: CPU, threads, RSS, GPU memory and energy of the
                    worker's process tree, written to disk as taken
    nvml.py         the GPUs through NVML, for the sampler only
    swap.py         the process tree's swap in use
    calibration.py  python -m profiler.calibration: the fixed work timed at a sweep's ends

As a library the orchestrator imports (pure functions over what the sidecar and the worker left):

    timeline.py     a run's samples summarised, per run and per phase
    disturbance.py  other load on the run's CPUs, from /proc/stat, and whether it disturbed the run
    energy.py       GPU energy per timed epoch and per image
    kernels.py      the rule table that sorts kernel and operator names into classes
    nsys.py         Nsight Systems: the command around the worker, and its export read back

It never imports the orchestrator, and never a framework.
"""

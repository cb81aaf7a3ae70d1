"""The GPU verification (docs/gpu.md), run as ``python -m benchmarks.gpu.check``.

check     the command: plan, dependencies, the CUDA probe, then the phases
plan      which phases one call runs, in order of value, within its budget (--plan)
phases    the phases once CUDA is there: matrices, runs, the overhead benchmark
modes     the modes, attention and transformers phases and their checks
report    the checks read from its database, and the markdown report
wheels.sh downloads the wheels the GPU machine lacks into .whl/
"""

"""Benchmarks of the harness and of the frameworks under it: scripts, not tests (they measure and
exit 0). Each runs from the repository root as ``python -m benchmarks.<group>.<name>``; README.md
has a table per group.

    harness/     the harness's own costs: overhead against a bare loop, sampler, tracing, Ray, ...
    inside/      helpers run inside a framework environment by its interpreter (stdlib, Python 3.6)
    gpu/         the GPU verification (docs/gpu.md)
    frameworks/  framework investigations: one framework's operator or idiom, zoo parity
    tools/       maintenance scripts that write into the tree (pins, the generated reference)

This file and every group's ``__init__`` import nothing: inside/'s modules are imported by
Singa's Python 3.6 through them.
"""

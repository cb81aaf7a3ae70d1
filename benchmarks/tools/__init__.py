"""Maintenance scripts that write into the tree: resolve_cuda_envs (what pip resolves each CUDA
requirements file, envs/<framework>-cuda.txt, to, recorded in tests/data/cuda_resolutions.json);
reference/ (docs/reference/: the CLI, the matrix settings and the schema, generated from the code by
`python -m benchmarks.tools.reference`); records/ (the docs' measured tables, rendered from
docs/records/*.json by `python -m benchmarks.tools.records`).
"""

"""Helpers run inside a framework's environment by that framework's interpreter, started by
harness/overhead.py and frameworks/zoo_parity.py as ``python -m benchmarks.inside.<name>`` with
the repository root on PYTHONPATH.

    bare_common          what the bare loops share: arguments, data, timing, the JSON line
    bare_<fw>_loop       one bare hand-written loop per framework (bare_pytorch_loop,
                         bare_tensorflow_loop, bare_mxnet_loop, bare_paddle_loop, bare_singa_loop,
                         bare_jax_loop)
    zoo_common           what the zoo-parity drivers share
    zoo_<fw>             one driver per framework with a model zoo (zoo_pytorch, zoo_tensorflow,
                         zoo_mxnet, zoo_paddle)

Standard library, ``workers`` and the framework only, and Python 3.6 code (Singa's interpreter):
nothing of the orchestrator, no dataclasses, no f-string '=' or walrus.
"""

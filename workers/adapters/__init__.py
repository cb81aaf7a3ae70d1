"""One package per framework (``adapters/<framework>/``), each exposing ``Adapter``: pytorch/,
tensorflow/, mxnet/, paddle/, singa/ and jax/. The shared interface and what every adapter repeats
in ``base.py``; ``fault.py``, the deliberate fake.

Framework imports happen in ``setup()`` only, and only inside a framework's own package.
"""

"""One package per framework (``adapters/<framework>/``), each exposing ``Adapter``; the shared
interface and what every adapter repeats in ``base``; ``fault``, the deliberate fake.

Framework imports happen in ``setup()`` only, and only inside a framework's own package.
"""

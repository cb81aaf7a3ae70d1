"""The orchestrator side of bench: expands matrices, runs workers, records outcomes.

It never imports a deep learning framework: a run is another interpreter's process.
"""

__version__ = "0.1.0"

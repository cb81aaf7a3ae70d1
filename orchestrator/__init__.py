"""The orchestrator side of bench: expands matrices, runs workers, records outcomes, reports.

It never imports a deep learning framework: a run is another interpreter's process
(`<framework python> -m workers --spec spec.json`). Its packages are the stages of the flow:

    bench run     cli → config (matrix → RunConfig) → sweep (many runs, resume, recording)
                      → executors (local, or Ray) → launch (one configuration in its own process,
                      its outcome) → sweep records it through storage (SQLite or PostgreSQL)
    bench report  cli → report (selection → table or figure → text, CSV, JSON, HTML) → storage
    bench study   cli → studies (study.yaml → its matrices run as sweeps; published beside
                      measured, claims judged) → report's selection → storage

provision (framework environments, datasets, the machine) serves launch and the CLI; stats
(figures, intervals, ties and verdicts over independent runs) serves report, sweep and the CLI; text
(terminal-safe output, rendered rows), errors and shipped (where schema.sql and the pinned
requirements are) sit below everything. LAYERS says which
package may import which; tests/test_layering.py keeps it so (docs/architecture.md).
"""

__version__ = "0.1.0"

# Which packages each package may import (errors.py and shipped.py, below all, may be imported by any).
LAYERS: dict[str, tuple[str, ...]] = {
    "text": (),
    "stats": (),
    "config": ("text",),
    "storage": ("text", "config"),
    "provision": ("text", "config"),
    "launch": ("text", "config", "provision"),
    "executors": ("text", "config", "provision", "launch"),
    "sweep": ("text", "stats", "config", "storage", "provision", "launch", "executors"),
    "report": ("text", "stats", "config", "storage"),
    "studies": ("text", "stats", "config", "storage", "report"),
    "cli": (
        "text",
        "stats",
        "config",
        "storage",
        "provision",
        "launch",
        "executors",
        "sweep",
        "report",
        "studies",
    ),
}

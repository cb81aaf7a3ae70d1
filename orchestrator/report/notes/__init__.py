"""report/notes: what is written under a table, explaining its cells.

    fairness.py       the rules: where a framework's result is limited by the framework itself
                      (docs/fairness.md), and the facts of a run they are judged on
    footnotes.py      the comparison table's footnotes, computed from its cells by those rules
    ranking.py        the comparison table's ranks: tie groups of frameworks from their runs
    calibration.py    the sweeps' calibrations (the machine's speed) as notes under a report
    device_memory.py  the framework's own device-memory peak beside NVML's sampled one
    units.py          what one "image" is for the token models

May import: query (report/__init__.py's GROUPS).
"""

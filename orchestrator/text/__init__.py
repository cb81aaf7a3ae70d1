"""text: what bench prints, made safe and laid out; below every other package.

    terminal.py  outside text (a worker's exception, a path, a sweep's name) made safe for a terminal
                 or a markdown page: control characters shown escaped, never sent (docs/security.md)
    formats.py   rows rendered as a terminal table, markdown, CSV or JSON, every cell made safe

Imports nothing of bench but errors.
"""

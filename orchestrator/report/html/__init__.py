"""report/html: `bench report --html DIR`, one self-contained page of tables and figures.

    page.py             the page: its tables, sections and figures, written to DIR/index.html
    figures.py          what each figure of the measurements shows (and what figure modules share)
    figures_runs.py     single runs and outcomes: timelines, the crash map, `bench inspect --plot`
    figures_modes.py    step time by execution mode and precision (tables/modes.py's cells)
    figures_scaling.py  images/s and efficiency against replicas (tables/scaling.py's cells)
    figures_versions.py ms/image against framework releases (tables/versions.py's cells)
    plots.py            draws them: plain rows in, PNG bytes out (matplotlib)

May import: query, notes, tables, postmortem (report/__init__.py's GROUPS). Within report/ only
dispatch.py imports it (and the CLI, for `bench inspect --plot`), lazily: matplotlib is loaded only
when a page or a plot is wanted.
"""

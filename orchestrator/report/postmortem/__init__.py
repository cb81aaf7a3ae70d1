"""report/postmortem: what went wrong, and where.

    crashes.py   --crashes: the configurations of a sweep that did not end ok, where and why
    inspect.py   `bench inspect RUN`: one run's post-mortem, from its configuration to how to
                 reproduce it

May import: query, notes, tables (report/__init__.py's GROUPS).
"""

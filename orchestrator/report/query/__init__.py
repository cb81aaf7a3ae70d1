"""report/query: which runs a report reads, and how they are named and pooled.

    select.py      which runs a report reads (--sweep, --where; the latest attempt of each
                   run of each configuration), how one configuration's runs are pooled into a summary, which
                   settings tell configurations apart, and the disturbance marks
    execution.py   how a run's execution mode and precision are named and grouped (what ran)
    sweeps.py      the sweep a one-sweep report reads, its heading, a run's model label
    spread.py      how far apart earlier runs of a configuration landed: the planner's CV
    versions.py    runs by the framework release they recorded (environments.framework_version):
                   a configuration across releases, releases in version order, --compare's sides

May import: no other group of report/ (report/__init__.py's GROUPS).
"""

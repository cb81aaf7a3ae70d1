"""report/tables: one module per table or option of `bench report`.

    base.py        what every table shares: Table and its rendering, the rows read back with their
                   labels, the columns of the settings that tell rows apart, the shared cells
    results.py     the results table (the default): one row per configuration of one sweep
    comparison.py  --table comparison: framework rows, model × device columns, with footnotes
    accuracy.py    --table accuracy: validation accuracy by epoch, optimizer and lr
    batch.py       --table batch: throughput against batch size, the memory wall
    inference.py   --table inference: seconds per 1,000 images
    modes.py       --table modes: framework × model × execution mode × precision
    scaling.py     --table scaling: data-parallel runs against their number of replicas
    versions.py    --table versions: a configuration per framework release, and where it changed
    resources.py   --resources (--table resources): the profiler's summary and comparisons
    kernels.py     --kernels: where traced runs' time went, by kernel class
    compare.py     --compare A B: two sweeps side by side, with a verdict per pair
    compare_versions.py  --compare version:A version:B: two releases side by side, as two sweeps
    timeline.py    one run's samples: `bench timeline`, and the resources part of `bench inspect`

May import: query, notes (report/__init__.py's GROUPS).
"""

"""config: what a run is, before anything runs.

    run_config.py  RunConfig, the typed configuration of one run, and each field's own rules; the
                   model names are the model definition's (workers/models/), not restated
    values.py      sizes (512MiB) and CPU lists ("0-3,6") read and written, and a bad value quoted
    checks.py      the rules across fields, and the strict reading of a configuration stored in a
                   database (a team shares one: its rows are outside input)
    matrix.py      a matrix file (YAML) expanded into RunConfigs; errors name file:line: key
    filters.py     --only / --where / --timeline-config, validated like the matrix
    field_docs.py  each setting's meaning and allowed values, for --help and docs/matrix.md
    samples.py     the units: min_time/min_steps resolved, and every timing figure derived from one
                   aggregate (the median seconds per image)

May import: text (and workers.models, the one model definition). Nothing here touches a database,
a process or a framework.
"""

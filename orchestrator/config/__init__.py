"""config: what a run is, before anything runs.

    settings.py    every setting of a run declared once (type, default, check, help, its words in
                   docs/matrix.md, the schema version of its runs column); the validators, limits
                   and choices derived from the declarations
    setting.py     what a declaration holds (Setting) and the checks most settings share
    run_config.py  RunConfig, the typed configuration of one run (the declarations' fields, held to
                   them by a test); the model names are the model definition's (workers/models/)
    values.py      sizes (512MiB) and CPU lists ("0-3,6") read and written, and a bad value quoted
    checks.py      the rules across fields, and the strict reading of a configuration stored in a
                   database (a team shares one: its rows are outside input)
    matrix.py      a matrix file (YAML) expanded into RunConfigs; errors name file:line: key
    filters.py     --only / --where / --timeline-config, validated like the matrix
    field_docs.py  each setting's meaning and allowed values in words, derived from settings.py:
                   --help, and docs/matrix.md's field table (python -m ...field_docs --write)
    pins.py        the pin sets bench ships (envs/): each framework's pinned release, and the
                   other releases a matrix's `version` may name (envs/<framework>@<version>.txt)
    samples.py     the units: min_time/min_steps resolved, and every timing figure derived from one
                   aggregate (the median seconds per image)

May import: text (and workers.models, the one model definition; workers.releases, what each
adapter serves). Nothing here touches a database,
a process or a framework.
"""

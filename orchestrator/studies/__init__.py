"""studies: published framework comparisons as things bench knows (docs/studies.md).

A study is a folder, `studies/<name>/`: its `study.yaml` (title, citation, the matrices it runs at
each scale, its published tables and its claims), the matrices, and the published figures as CSV
with a SOURCE.md. `bench study run` runs the matrices through the normal sweep path, under a sweep
name that records the study and the scale; `bench study report` sets the published figures beside
bench's and judges each claim on the runs.

    spec.py       what a loaded study is: Study, StudyMatrix, Table, Claim; the kinds, metrics, units
    loader.py     study.yaml read with the matrix loader's YAML reader, every error file:line: key
    published.py  a published table's CSV, read as hostile input
    measured.py   the study's sweeps' runs read back as cells, and the grid a comparison picks
    claims.py     each claim kind judged on the runs with stats/: a verdict, its figures
    kinds.py      the band and shape kinds (similar, spread, rises_beyond), on claims.py's rules
    report.py     published beside measured, then the claims, as text or markdown

May import: text, stats, config, storage, and report's query group (the one rule for which runs
count); never launch, executors or sweep (bench study run is the CLI's, over sweep/).
"""

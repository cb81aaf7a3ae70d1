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
    accuracy.py   accuracy claims: a run's learning curve as one figure a seed (an epoch's
                  accuracy, epochs to a fraction of the final one), and the claims' accuracy keys
    orders.py     a published accuracy table beside bench's as orders per epoch, never levels
    report.py     published beside measured, then the claims, as text or markdown

May import: text, stats, config, storage, and report's query group (the one rule for which runs
count); never launch, executors or sweep (bench study run is the CLI's, over sweep/).
"""

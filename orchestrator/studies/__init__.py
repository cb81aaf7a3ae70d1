"""studies: published framework comparisons as things bench knows (docs/studies.md).

A study is a folder, `studies/<name>/`: its `study.yaml` (title, citation, the matrices it runs at
each scale, its published tables and its claims), the matrices, and the published figures as CSV
with a SOURCE.md. `bench study run` runs the matrices through the normal sweep path, under a sweep
name that records the study and the scale; `bench study report` sets the published figures beside
bench's and judges each claim on the runs.

    spec.py           what a loaded study is: Study, StudyMatrix, Table, Claim, ScalingRatio; the
                      kinds, metrics, units
    loader.py         study.yaml read with the matrix loader's YAML reader, every error file:line: key
    keys.py           the keys a study file may use, per section and per claim kind
    loader_ratios.py  its `ratios:` section (the scaling ratios), held to loader.py's checks
    published.py      a published table's CSV, read as hostile input
    measured.py       the study's sweeps' runs read back as cells, and the grid a comparison picks
    claims.py         each claim kind judged on the runs with stats/: a verdict, its figures
    kinds.py          the band and shape kinds (similar, spread, rises_beyond), on claims.py's rules
    accuracy.py       accuracy claims: a run's learning curve as one figure a seed (an epoch's
                      accuracy, epochs to a fraction of the final one), and the claims' accuracy keys
    orders.py         a published accuracy table beside bench's as orders per epoch, never levels
    ratios.py         each scaling ratio beside bench's measured one or its reference, as rows
    report.py         published beside measured, the ratios, then the claims: text, markdown, html
    page.py           the html format: report.py's writer as one self-contained page
    figures.py        the page's figure of a table: × the fastest, published beside bench's
    committed.py      a study's committed results files summed up for `bench study list`
    since.py          the closing section: the verdicts counted, the orders' τ-b, the causes (since:)
    loader_releases.py  its `releases:` key: the matrix that runs `version` as an axis, the table it
                      answers, held to loader.py's checks
    releases.py       that matrix's runs beside the table: each release against the one before, × the
                      fastest per era, and the share of each difference from the published figure
                      that the oldest releases close
    releases_report.py  the report's "The releases" section from releases.py's figures, and what
                      bench's adapters cannot reach (workers/releases.py)

May import: text, stats, config, storage, workers.releases (each adapter's served releases, standard
library only), and report's query group (the one rule for which runs
count) and its html group (page.py and figures.py reuse the report page's escaping, tables, style
and plots, loaded lazily: matplotlib only for a page); never launch, executors or sweep (bench
study run is the CLI's, over sweep/).
"""

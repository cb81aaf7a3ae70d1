"""report: runs read back from the database, as tables, figures and pages.

    dispatch.py      what `bench report` prints for its options, and which options clash
    select.py        which runs a report reads (the latest attempt of each configuration), how one
                     configuration's runs are pooled, and which settings tell configurations apart
    results.py       the results table, the crash list, and `bench inspect` (one run's post-mortem)
    tables.py        --table NAME: the research's tables; throughput.py the batch and inference ones
    compare.py       --compare A B: two sweeps side by side, with a verdict per pair
    footnotes.py     the comparison table's notes, computed from its cells (rules in fairness.py)
    resources.py     --resources: the profiler's summary; timeline.py one run's samples
    kernels.py       --kernels: where a traced run's time went, by kernel class
    modes.py         --table modes: framework x model x execution mode x precision; execution.py
                     how a run's mode and precision are named and grouped
    scaling.py       --table scaling: data-parallel runs against their number of replicas
    calibration.py   the notes under a report on the sweeps' calibrations (the machine's speed)
    device_memory.py the framework's own device-memory peak beside NVML's sampled one
    html.py          --html DIR: one self-contained page; figures.py, figures_runs.py, figures_modes.py
                     and figures_scaling.py choose what each figure shows, plots.py draws it
                     (matplotlib, PNG)

May import: text, config, storage. Never launch, executors or sweep: a report reads what was
recorded, whoever recorded it.
"""

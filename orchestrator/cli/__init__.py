"""cli: the `bench` command; the only package that imports click.

    main.py              the group, gathering the commands of the modules below
    run.py               bench run and bench rerun
    report.py            bench report, bench inspect and bench timeline
    options.py           options shared by every command, echo, and the error boundary
                         (BenchGroup: a BenchError is one line and exit 1)
    executor_options.py  --executor and its options, the executor they make
    env.py               bench env (setup, use, forget, list) and bench models
    train.py             bench train: one configuration from the command line
    hint.py              the command that finishes an interrupted one
    dry_run.py           --dry-run's table of the settings in which configurations differ
    calibrate.py         bench calibrate: the sweep's calibration timed now, against a recorded sweep's
    transfer.py          bench export and bench import: sweeps carried between databases as JSON
    study.py             bench study (list, run, report): a published study re-run, set beside its paper

May import every package: it is the top.
"""

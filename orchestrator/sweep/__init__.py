"""sweep: many runs, from a matrix to rows in the database.

    session.py    a command's sweep (bench run, rerun, train): opened new or reopened to resume,
                  run, closed; the three commands differ only in the Plan they hand it
    run.py        a list of configurations run through an executor, each run recorded the moment
                  it ends; Ctrl-C/SIGTERM/SIGHUP end it as interrupted; a disturbed run queued again
    recording.py  sweeps and runs written to the database, one transaction per run: run_rows, the rows
                  a run will hold, and insert_rows
    record_file.py  a run folder's record.json: every row the run will hold and its sweep's
                  identity, written atomically before the database is touched; read back as
                  outside input
    catch_up.py   records into the database: import_record (idempotent: runs.record_id), a
                  database that is away waited for (patiently) and the records it did not take
                  kept pending, catch_up_sweep for --resume, import_run_folders for bench import
    result_fields.py  what a run left as the runs table's columns: its epochs' timing (summarise),
                  where its events stopped (where_it_died), its result's execution, warm-up and
                  target fields (columns; the worker's values are outside input)
    liveruns.py   sweeps and runs in flight as locked files, so what a killed bench left is found,
                  ended and recorded by the next one
    adopt.py      what such a run becomes: imported (its record was written), adopted (its worker
                  finished: its record built from its folder, so it is not run again), or
                  recorded interrupted
    progress.py   the live line (step n of N, from the events) and plain lines elsewhere
    order.py      the order of a configuration's several runs (runs: N): interleaved blocks, each
                  shuffled by the sweep's recorded seed
    eta.py        how long the rest will take, from earlier runs in the database
    folders.py    where run folders go: the root (beside the database, or --runs-dir), a sweep's, a run's

May import: text, config, storage, provision, launch, executors.
"""

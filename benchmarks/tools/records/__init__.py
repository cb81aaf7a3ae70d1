"""The measurements the docs rest on, as records (docs/records/*.json), and the command that renders
each record's table into its page, so a page's figures cannot drift from their data (issue 44).

    record.py    one record: its header (date, machine, versions, command, what it supersedes), its
                 table; loading and checking the folder (one newest record a measurement)
    render.py    a record's block (header line, table, the records it superseded) and a page's
                 "current figures" list, written between markers in the page
    __main__.py  `python -m benchmarks.tools.records`: writes every page whose blocks differ;
                 `--check` writes nothing and exits 1 naming them

tests/test_records.py regenerates each page and fails, naming the command, where one differs.
"""

"""The reference pages generated from the code (docs/reference/), and the one command that writes them.

    cli.py       docs/reference/cli.md: every `bench` command and option, from the click tree
    matrix.py    docs/reference/matrix.md: every matrix setting, from its declaration (config/settings.py)
    schema.py    docs/reference/schema.md: every table and column, from schema.sql and its comments
    __main__.py  `python -m benchmarks.tools.reference`: writes the three pages and docs/matrix.md's
                 field table; `--check` writes nothing and exits 1 naming the pages that differ

tests/test_reference.py regenerates each page and fails, naming the command, where one differs.
"""

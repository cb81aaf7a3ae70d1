"""docs/reference/ is the code's: each page regenerated from the click tree, the settings'
declarations and schema.sql equals the committed page, so a new option, setting or column without
its page regenerated fails here with the command that regenerates it (issue 44)."""

from __future__ import annotations

import copy
import sqlite3

import click
import pytest

from benchmarks.tools.reference import __main__ as reference
from benchmarks.tools.reference import cli as cli_page
from benchmarks.tools.reference import matrix as matrix_page
from benchmarks.tools.reference import schema as schema_page
from orchestrator.cli.main import cli
from orchestrator.config.run_config import FIELD_NAMES


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_each_generated_page_equals_its_regeneration(name: str):
    path = reference.REPO / name
    assert path.exists(), f"{name} is missing: run {reference.COMMAND}"
    assert path.read_text() == reference.PAGES[name](), (
        f"{name} differs from the code: run {reference.COMMAND}"
    )


def test_each_reference_page_says_how_it_is_made():
    for name, make in reference.PAGES.items():
        if name.startswith("docs/reference/"):
            assert make().rstrip("\n").splitlines()[-1].startswith("Generated from "), name


def test_every_command_and_option_is_on_the_cli_page():
    page = reference.PAGES["docs/reference/cli.md"]()
    for command, ctx in cli_page.commands(cli, click.Context(cli, info_name="bench")):
        assert f"# {ctx.command_path}\n" in page, ctx.command_path
        for param in command.params:
            if isinstance(param, click.Option):
                assert f"`{param.opts[0]}" in page, f"{ctx.command_path} {param.opts[0]}"


def test_a_new_option_changes_the_cli_page():
    """The check above and the regeneration test cannot pass over an option added without its page."""
    models = cli.commands["models"]
    planted = copy.copy(models)
    planted.params = [*models.params, click.Option(["--planted-option"], help="Planted by the test.")]
    tree = click.Group("bench", commands={**cli.commands, "models": planted}, params=cli.params)
    before, after = cli_page.page(cli), cli_page.page(tree)
    assert before != after
    assert "`--planted-option TEXT` | Planted by the test." in after and "--planted-option" not in before


def test_every_setting_is_a_row_of_the_matrix_page():
    page = matrix_page.page()
    for field in FIELD_NAMES:
        assert f"\n| `{field}` |" in page, field


SCHEMA = """
PRAGMA user_version = 3;
-- Things.
CREATE TABLE things (
    id      INTEGER NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('a',
                'b', 'c')),                          -- what it is
    -- version 2: sizes
    size    INTEGER,                                 -- bytes, measured
                                                     -- when it was made
    PRIMARY KEY (id, kind)
);
CREATE INDEX things_kind ON things (kind);
"""


def test_the_schema_parser_reads_comments_groups_and_long_declarations():
    version, tables, indexes = schema_page.parse(SCHEMA)
    assert version == 3 and indexes == ["things_kind ON things (kind)"]
    (things,) = tables
    assert things.comment == "Things." and things.constraints == ["PRIMARY KEY (id, kind)"]
    columns = {c.name: c for c in things.columns}
    assert list(columns) == ["id", "kind", "size"]
    assert columns["kind"].declared == "TEXT NOT NULL CHECK (kind IN ('a', 'b', 'c'))"
    assert columns["kind"].comment == "what it is"
    assert columns["size"].heading == "version 2: sizes"
    assert columns["size"].comment == "bytes, measured when it was made"


def test_a_column_the_parser_missed_is_an_error_not_a_missing_row():
    _, tables, _ = schema_page.parse(SCHEMA)
    tables[0].columns.pop()
    with pytest.raises(ValueError, match="SQLite has"):
        schema_page.check_against_sqlite(SCHEMA, tables)


def test_the_schema_page_has_every_column_sqlite_has():
    text = (reference.REPO / "schema.sql").read_text()
    page = reference.PAGES["docs/reference/schema.md"]()
    db = sqlite3.connect(":memory:")
    db.executescript(text)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        assert f"\n## {table}\n" in page, table
        for row in db.execute(f"PRAGMA table_info({table})"):
            assert f"\n| `{row[1]}` |" in page, f"{table}.{row[1]}"
    db.close()

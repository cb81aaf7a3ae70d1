"""Outside text never reaches a terminal raw: terminal.safe and its users, one class at a time.

The unit tests pin what `safe`, `safe_line`, `markdown_cell` and `csv_cell` do with every control
and invisible character; the properties (Hypothesis) say it for any text; the end-to-end tests run
the fault worker's `hostile` fault, which puts escape sequences in everything a framework can
reach (stdout, stderr, phase, exception type and message, versions), and read every command that
prints them back.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import re
import sqlite3
import subprocess
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cli.options import echo
from orchestrator.sweep.progress import Progress
from orchestrator.text import terminal
from orchestrator.text.formats import Column, csv_cell, render
from orchestrator.text.terminal import markdown_cell, markdown_text, safe, safe_line
from tests.conftest import REPO, bench_command

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}
OSC_TITLE = "\x1b]0;pwned\x07"
OSC_LINK = "\x1b]8;;https://example.invalid/\x1b\\click\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J"
HOSTILE_SAMPLES = [
    OSC_TITLE,
    OSC_LINK,
    CLEAR,
    "\x9b2J",  # 8-bit CSI
    "\x9d0;pwned\x9c",  # 8-bit OSC ... ST
    "\u202egnp.exe",  # right-to-left override
    "a\u200bb\u200cc\u200dd\ufeffe",  # zero-width space, non-joiner, joiner, BOM
    "\u2066isolate\u2069",
    "line\u2028separator\u2029paragraph",
    "lone \ud800 and \udfff surrogates",
    "\U000e0041tag",  # a tag character (Cf, astral)
]
LEGIT = "3.2 µs × 4 – 5 — 6 °C, naïve 日本語 ≤ 7, 😀"


def unsafe_chars(text: str, allowed: str = "") -> list[str]:
    return [c for c in text if c not in allowed and unicodedata.category(c) in UNSAFE]


def assert_clean(text: str, allowed: str = "\n") -> None:
    """No control or invisible format character in `text`, beyond the layout it may keep."""
    found = unsafe_chars(text, allowed)
    assert not found, f"raw {sorted(set(found))!r} in output:\n{text!r}"[:2000]


def unescaped(text: str, char: str) -> int:
    """How many times `char` appears in markdown source without a backslash escaping it."""
    return len(re.findall(r"(?<!\\)" + re.escape(char), text.replace("\\\\", "")))


# --- safe, safe_line, markdown_cell, csv_cell -------------------------------------------------------


@pytest.mark.parametrize("code", [*range(0x20), 0x7F, *range(0x80, 0xA0)])
def test_every_c0_c1_control_and_del_is_an_escape(code):
    char = chr(code)
    assert safe_line(f"a{char}b") == f"a\\x{code:02x}b"
    if char in "\n\t":
        assert safe(f"a{char}b") == f"a{char}b"  # layout, kept
    else:
        assert safe(f"a{char}b") == f"a\\x{code:02x}b"


@pytest.mark.parametrize("text", HOSTILE_SAMPLES)
def test_escape_sequences_and_invisible_unicode_are_shown_not_sent(text):
    for out in (safe(text), safe_line(text), markdown_cell(text), markdown_text(text)):
        assert_clean(out, allowed="")
    assert "\\x1b" in safe(OSC_TITLE) and "pwned" in safe(OSC_TITLE)  # still says what it held


def test_named_characters_come_out_as_their_escapes():
    assert safe("\u202e") == "\\u202e"
    assert safe("\u2028") == "\\u2028"
    assert safe("\ud800") == "\\ud800"
    assert safe("\U000e0041") == "\\U000e0041"
    assert safe(CLEAR) == "\\x1b[2J"
    assert safe("\r\n") == "\\x0d\n"


def test_printable_text_of_any_script_is_kept_as_it_is():
    for out in (safe(LEGIT), safe_line(LEGIT), markdown_cell(LEGIT), markdown_text(LEGIT)):
        assert out == LEGIT
    assert safe("tab\tand\nnewline") == "tab\tand\nnewline"
    assert safe(42) == "42" and safe(None) == "None"


def test_the_blocks_let_through_unlooked_hold_no_unsafe_character():
    """safe() skips these blocks without a look: every character in them must be printable."""
    skipped = re.compile(f"[{terminal.SHOWN_AS_IS}]")
    inside = [chr(c) for c in range(0x10000) if skipped.fullmatch(chr(c))]
    assert len(inside) > 1000 and "—" in inside and "µ" in inside
    assert not unsafe_chars("".join(inside))


def test_markdown_cell_escapes_html_links_pipes_and_line_breaks():
    cell = markdown_cell('<img src=x onerror="a()"> [click](https://example.invalid) a|b \\ & c\nd')
    assert "<" not in cell and ">" not in cell and "\n" not in cell
    assert cell == (
        '&lt;img src=x onerror="a()"&gt; \\[click\\](https://example.invalid) a\\|b \\\\ &amp; c\\\\x0ad'
    )
    assert unescaped(cell, "|") == 0 and unescaped(cell, "[") == 0
    # A trailing backslash must not escape the cell's closing pipe.
    assert markdown_cell("x\\") == "x\\\\"


def test_markdown_text_runs_over_a_finished_document_without_double_escaping():
    cell = markdown_cell("<b>")
    assert markdown_text(f"# sweep <script>\n| {cell} |") == "# sweep &lt;script&gt;\n| &lt;b&gt; |"


def test_csv_cells_are_one_line_and_never_a_formula():
    assert csv_cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    for text in ("+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("-1.5") == "-1.5" and csv_cell(-1.5) == -1.5 and csv_cell(3) == 3
    assert csv_cell(None) == "" and csv_cell("resnet50") == "resnet50"
    assert csv_cell("a\nb\x1b[2J") == "a\\x0ab\\x1b[2J"


# --- for any text (Hypothesis) ----------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_safe_line_leaves_no_control_format_separator_or_surrogate(text):
    out = safe_line(text)
    assert not unsafe_chars(out)
    assert safe_line(out) == out  # escaping is done once: nothing in the escapes needs escaping


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_safe_keeps_only_newlines_and_tabs(text):
    out = safe(text)
    assert not unsafe_chars(out, allowed="\n\t")
    assert out.count("\n") == text.count("\n") and out.count("\t") == text.count("\t")
    assert safe(out) == out


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_markdown_cell_has_no_raw_html_pipe_or_newline(text):
    out = markdown_cell(text)
    assert "<" not in out and ">" not in out and "\n" not in out
    assert unescaped(out, "|") == 0
    assert not unsafe_chars(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ANY_TEXT, ANY_TEXT), max_size=5), st.sampled_from(["table", "markdown"]))
def test_a_rendered_table_keeps_its_shape_whatever_its_cells_hold(cells, fmt):
    rows = [{"a": a, "b": b} for a, b in cells]
    columns = [Column("a", "a", lambda r: r["a"]), Column("b", "b", lambda r: r["b"])]
    out = render(rows, columns, fmt)
    assert not unsafe_chars(out, allowed="\n")
    assert out.count("\n") == len(rows) + 1  # a header, a rule, one line per row
    if fmt == "markdown":
        assert "<" not in out and all(unescaped(line, "|") == 3 for line in out.split("\n"))


# --- the CLI's ways out -----------------------------------------------------------------------------


def _printing_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls that write to the terminal: print(), click.echo/secho(), sys.stdout/stderr.write()."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        text = ast.unparse(node.func)
        if text in ("print", "click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write"):
            found.append(node)
    return found


def test_the_cli_prints_only_through_terminal_echo():
    """A new click.echo or print in the orchestrator would bypass the one way out. (Progress
    writes to its stream through safe_line; the error boundary quotes through safe_line.)"""
    allowed = {"terminal.py", "cli_options.py"}
    offenders = []
    for path in sorted((REPO / "orchestrator").glob("*.py")):
        if path.name not in allowed:
            calls = _printing_calls(ast.parse(path.read_text()))
            offenders += [f"{path.name}:{call.lineno}: {ast.unparse(call)}" for call in calls]
    assert not offenders, offenders
    assert _printing_calls(ast.parse("import click\nclick.echo('x')\nprint(1)")), "the check sees them"


def test_log_lines_are_made_safe():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(terminal.SafeFormatter("bench: %(message)s"))
    log = logging.getLogger("test_terminal_safety")
    log.addHandler(handler)
    try:
        log.warning("a path: %s", f"/tmp/x{OSC_TITLE}{CLEAR}\u202e")
    finally:
        log.removeHandler(handler)
    assert stream.getvalue() == "bench: a path: /tmp/x\\x1b]0;pwned\\x07\\x1b[2J\\u202e\n"


def test_the_live_progress_line_sends_no_sequence_but_its_own(tmp_path):
    """On a terminal the line is redrawn with \\r ESC[2K; a phase name may not add to that."""
    from orchestrator.config.run_config import RunConfig

    (tmp_path / "events.jsonl").write_text(json.dumps({"event": "phase", "phase": f"x{OSC_TITLE}{CLEAR}"}))
    out = io.StringIO()
    progress = Progress(1, stream=out, live=True)
    progress.begin(RunConfig(framework="fault", fault="ok"), tmp_path)
    progress.end("error", 1, f": {OSC_LINK}\u202e\nnext", tmp_path)
    text = out.getvalue().replace("\r\x1b[2K", "")
    assert_clean(text)
    assert "x\\x1b]0;pwned" in text and "\\x0anext" in text


# --- end to end: real runs of the hostile fault -----------------------------------------------------

MATRIX = """
name: hostile
include:
  - {framework: fault, fault: hostile, after_steps: 1}
  - {framework: fault, fault: hostile, after_steps: 1, exit_code: 3}
  - {framework: fault, fault: ok}
"""


def bench(cwd: Path, *args: str, check: bool = True, echoes: bool = False) -> subprocess.CompletedProcess:
    """Run bench; its output is clean, and (unless it `echoes` the worker's) holds no traceback."""
    proc = subprocess.run(
        bench_command(*args), cwd=cwd, capture_output=True, text=True, errors="surrogateescape", timeout=120
    )
    assert_clean(proc.stdout)
    assert_clean(proc.stderr)
    assert echoes or "Traceback" not in proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "m.yaml").write_text(MATRIX)
    return folder, bench(folder, "run", "--matrix", "m.yaml")


@pytest.mark.slow
def test_bench_run_progress_quotes_the_worker_escaped(hostile):
    _, run = hostile
    # The reasons quote the exception and the stderr line that reads as out of memory.
    assert "oom in" in run.stderr and "raised \\x1b]0;pwned\\x07" in run.stderr
    assert "out of memory \\x1b]0;pwned" in run.stderr
    assert "sweep 1: 1 ok, 2 oom" in run.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--crashes",),
        ("--format", "csv"),
        ("--crashes", "--format", "csv"),
        ("--format", "json"),
        ("--resources",),
        ("--table", "comparison"),
    ],
    ids=" ".join,
)
def test_bench_report_shows_the_evidence_escaped(hostile, args):
    folder, _ = hostile
    out = bench(folder, "report", *args).stdout
    if "--crashes" in args and "json" not in args:
        assert "\\x1b]0;pwned" in out  # it is there, shown
    if "csv" in args:  # one record a line: a header and a row per (failed) configuration
        assert len(out.splitlines()) == (3 if "--crashes" in args else 4)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args", [(), ("--crashes",), ("--resources",), ("--table", "comparison")], ids=" ".join
)
def test_markdown_reports_have_no_raw_html(hostile, args):
    folder, _ = hostile
    out = bench(folder, "report", "--format", "markdown", *args).stdout
    assert "<" not in out and ">" not in out
    if args == ("--crashes",):
        assert "&lt;img src=x&gt;" in out
        rows = [line for line in out.splitlines() if line.startswith("| 1 ")]
        assert rows and unescaped(rows[0], "|") == 10  # nine cells: the evidence's pipes are escaped


@pytest.mark.slow
@pytest.mark.parametrize("run_id", ["1", "2", "3"])
def test_bench_inspect_keeps_evidence_lines_and_escapes_the_rest(hostile, run_id):
    folder, _ = hostile
    out = bench(folder, "inspect", run_id).stdout
    if run_id == "1":
        # The message's own newline cannot fake a field: it is one escaped line.
        assert "  exception_message: raised \\x1b]0;pwned" in out and "\\x0a  outcome: ok" in out
        fields = out.split("\ntraceback:")[0].splitlines()
        assert "  outcome: oom" in fields and "  outcome: ok" not in fields
        traceback = out.split("traceback:\n")[1].split("\n\n")[0].splitlines()
        assert len(traceback) > 3 and traceback[0] == "  Traceback (most recent call last):"
        assert "framework_version: fault \\x1b]0;pwned" in out
    if run_id != "3":
        assert "stderr \\x1b]0;pwned" in out
    bench(folder, "inspect", run_id, "--format", "json")
    bench(folder, "timeline", run_id)
    bench(folder, "timeline", run_id, "--format", "csv")
    bench(folder, "timeline", run_id, "--phase", f"x{OSC_TITLE}")


@pytest.mark.slow
def test_bench_rerun_echoes_the_worker_output_escaped(hostile):
    folder, _ = hostile
    proc = bench(folder, "rerun", "1", echoes=True)
    assert "stdout \\x1b]0;pwned" in proc.stderr and "stderr \\x1b]0;pwned" in proc.stderr


@pytest.mark.slow
def test_the_html_page_escapes_the_new_cases_too(hostile):
    folder, _ = hostile
    bench(folder, "report", "--html", "site")
    page = (folder / "site" / "index.html").read_text()
    assert_clean(page)
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page
    assert "\\x1b]0;pwned" in page


@pytest.mark.slow
def test_a_figure_draws_outside_text_as_text(hostile):
    """A phase or reason holding '$...$' is not a formula to matplotlib (a bad one failed it)."""
    folder, _ = hostile
    bench(folder, "inspect", "1", "--plot", "run1.png")
    assert (folder / "run1.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_a_hostile_matrix_name_is_recorded_as_given_and_shown_escaped(tmp_path):
    """The matrix is the user's own (docs/security.md): its name is any text, stored as it was
    given; every command that prints it shows its escapes instead of sending them."""
    name = r"evil\e]0;title\a\e[2J\u202e\x9b<b>|x</b>"
    (tmp_path / "m.yaml").write_text(f'name: "{name}"\ninclude:\n  - {{framework: fault}}\n')
    run = bench(tmp_path, "run", "--matrix", "m.yaml")
    assert run.stdout == "sweep 1: 1 ok\n", run.stdout
    stored = sqlite3.connect(tmp_path / "bench.db").execute("SELECT name FROM sweeps").fetchall()
    assert stored == [("evil\x1b]0;title\x07\x1b[2J\u202e\x9b<b>|x</b>",)]
    assert "evil\\x1b]0;title\\x07\\x1b[2J\\u202e\\x9b<b>|x</b>" in bench(tmp_path, "report").stdout
    markdown = bench(tmp_path, "report", "--table", "comparison", "--format", "markdown").stdout
    assert "<" not in markdown and "\\x1b]0;title" in markdown
    assert "evil\\x1b]0;title" in bench(tmp_path, "inspect", "1").stdout


FAKE_PYTHON = """#!/bin/sh
printf '\\342\\200\\256\\302\\233\\033]0;pwned\\007\\033[2J'
printf '\\033]8;;https://example.invalid/\\033\\\\x\\033]8;;\\033\\\\ %s\\n' "$1"
exit "${FAKE_STATUS:-0}"
"""


@pytest.mark.parametrize("status", ["0", "3"])
def test_bench_env_use_quotes_an_interpreter_escaped(tmp_path, status):
    """Its version output (exit 0: not a version) and its error output (exit 3) are its text."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    proc = subprocess.run(
        bench_command("env", "use", "pytorch", "--python", str(fake), "--env-dir", str(tmp_path / "envs")),
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "FAKE_STATUS": status, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert_clean(proc.stderr)
    assert "\\x1b]0;pwned" in proc.stderr and "\\u202e" in proc.stderr


def test_bench_env_list_quotes_a_registered_path_escaped(tmp_path):
    envs = tmp_path / "envs"
    envs.mkdir()
    entry = {"python": f"/nowhere/{OSC_TITLE}{CLEAR}\u202e/python", "python_version": "3.11.0"}
    (envs / "external.json").write_text(json.dumps({"pytorch": entry}))
    proc = subprocess.run(
        bench_command("env", "list", "--env-dir", str(envs)),
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
    )
    assert_clean(proc.stdout)
    assert_clean(proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 1)


def test_terminal_echo_escapes_whatever_it_is_handed(capsys):
    """The last line of defence: text a command forgot to escape is escaped on its way out."""
    echo(f"a{OSC_TITLE}\n\tb\u202e")
    echo(f"# <h1>{CLEAR}</h1>", markdown=True)
    echo(f"x{OSC_LINK}", err=True)
    out, err = capsys.readouterr()
    assert out == "a\\x1b]0;pwned\\x07\n\tb\\u202e\n# &lt;h1&gt;\\x1b[2J&lt;/h1&gt;\n"
    assert err == "x" + safe(OSC_LINK) + "\n" and "\x1b" not in err

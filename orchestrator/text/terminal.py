"""Text from outside made safe for a terminal: the one function every human-readable output uses.

Worker output, database fields, file names and matrix values are not bench's: any of them may
carry escape sequences (set the window title, write hyperlinks, clear the screen, move the cursor)
or Unicode format characters (bidirectional overrides that reorder what a reader sees). `safe`
shows every such character as a visible escape (``\\x1b``, ``\\u202e``) instead of sending it, so
the text still says what it held. Newlines and tabs are layout, kept unless ``one_line``.

The CLI prints through `echo` (and logs through `SafeFormatter`), so whatever a report forgot to
escape is still escaped on its way out; the reports escape their cells and values themselves
where a newline or a markdown character would break the shape of what they print.
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata

# C0 and C1 controls and DEL (Cc), and the categories that change how text is shown without being
# visible: format characters (Cf: bidi overrides, zero-width joiners), line and paragraph separators
# (Zl, Zp), and lone surrogates (Cs), which a terminal's encoder would choke on.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
# Characters that need a look: all but printable ASCII and the blocks reports use ('µs', '×', '–',
# '—', '≤', '→', '│'), each wholly printable (a test checks every one), so one regex search in C
# settles most strings. Keeping layout, \n and \t need no look either.
SHOWN_AS_IS = "\x20-\x7e\xa0-\xac\xae-\xff\u2010-\u2027\u2030-\u205e\u2190-\u23ff\u2500-\u25ff"
_LOOK = re.compile(f"[^{SHOWN_AS_IS}\n\t]")
_LOOK_LINE = re.compile(f"[^{SHOWN_AS_IS}]")


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


@functools.lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    return _escape(char) if unicodedata.category(char) in _UNSAFE_CATEGORIES else char


def _sub(match: re.Match[str]) -> str:
    return _shown(match.group())


def safe(text: object, one_line: bool = False) -> str:
    """``text`` with every control or invisible format character shown as an escape.

    With ``one_line``, newlines, carriage returns and tabs are escaped too, so a value cannot
    break the line or the table it is printed in. Printable text of any script ('µs', '×', '–')
    is kept as it is.
    """
    if not isinstance(text, str):
        text = str(text)
    look = _LOOK_LINE if one_line else _LOOK
    if look.search(text) is None:
        return text
    return look.sub(_sub, text)


def safe_line(text: object) -> str:
    """``safe`` for a value printed inside one line (a table cell, a progress line, an error)."""
    return safe(text, one_line=True)


# Entities for HTML, backslashes for markdown's own syntax: a pipe would end the cell, brackets
# make links and images (which fetch a URL when the document is viewed), a backslash would undo
# the escape after it.
_MARKDOWN_CELL = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "|": "\\|", "[": "\\[", "]": "\\]"}
)
_MARKDOWN_TEXT = str.maketrans({"<": "&lt;", ">": "&gt;"})


def markdown_cell(text: object) -> str:
    """A value for a markdown table cell: terminal-safe, one line, no raw HTML, links or pipes."""
    return safe_line(text).translate(_MARKDOWN_CELL)


def markdown_text(text: object) -> str:
    """A whole markdown document made safe: terminal-safe, and no '<' or '>' left to open an HTML
    tag. Cells made by `markdown_cell` have none left, so it can run over a finished document."""
    return safe(text).translate(_MARKDOWN_TEXT)


class SafeFormatter(logging.Formatter):
    """A log line quotes outside text (a path, a worker's words): it is made safe like the rest."""

    def format(self, record: logging.LogRecord) -> str:
        return safe(super().format(record))

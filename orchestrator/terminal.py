"""Text from outside made safe for a terminal: the one function every human-readable output uses.

Worker output, database fields, file names and matrix values are not bench's: any of them may
carry escape sequences (set the window title, write hyperlinks, clear the screen, move the cursor)
or Unicode format characters (bidirectional overrides that reorder what a reader sees). `safe`
shows every such character as a visible escape (``\\x1b``, ``\\u202e``) instead of sending it, so
the text still says what it held. Newlines and tabs are layout, kept unless ``one_line``.
"""

from __future__ import annotations

import re
import unicodedata

# C0 and C1 controls and DEL (Cc), and the categories that change how text is shown without being
# visible: format characters (Cf: bidi overrides, zero-width joiners), line and paragraph separators
# (Zl, Zp), and lone surrogates (Cs), which a terminal's encoder would choke on.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_FAST_OK = re.compile(r"[\x20-\x7e\n\t]*")


def _escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe(text: object, one_line: bool = False) -> str:
    """``text`` with every control or invisible format character shown as an escape.

    With ``one_line``, newlines, carriage returns and tabs are escaped too, so a value cannot
    break the line or the table it is printed in.
    """
    if not isinstance(text, str):
        text = str(text)
    if _FAST_OK.fullmatch(text) and not (one_line and ("\n" in text or "\t" in text)):
        return text
    out = []
    for char in text:
        if char in "\n\t" and not one_line:
            out.append(char)
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def safe_line(text: object) -> str:
    """``safe`` for a value printed inside one line (a table cell, a progress line, an error)."""
    return safe(text, one_line=True)


_HTML_SPECIALS = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown_cell(text: object) -> str:
    """A value for a markdown table cell: terminal-safe, one line, raw HTML escaped, pipes escaped."""
    cleaned = safe_line(text)
    for char, entity in _HTML_SPECIALS.items():
        cleaned = cleaned.replace(char, entity)
    return cleaned.replace("|", "\\|")

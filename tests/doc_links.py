"""The links of the repository's markdown pages, read as GitHub renders them (tests/test_doc_links.py),
and the table rows a paragraph swallowed.

A link is ``[text](target)`` outside code; its target is a URL (left alone: the suite reaches no
network), an anchor in the same page, or a path relative to the page, with an optional anchor.
GitHub's anchor of a heading: lower case, every character but letters, digits, ``-``, ``_`` and
spaces dropped, spaces made ``-``; a heading repeated in a page gets ``-1``, ``-2``, ... after the first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Folders of the checkout that hold no page of the project's (environments, caches, run output);
# hidden folders (.git, .venv, .pytest_cache, .gpu-check) are skipped as well.
SKIPPED = {"node_modules", "__pycache__", "bench-runs", "build", "dist"}
_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!\\)!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str


def pages(root: Path) -> list[Path]:
    """Every markdown file of the checkout, outside the folders that are not the project's."""
    found = []
    for folder, folders, files in os.walk(root):
        # Pruned in place, so a virtual environment's thousands of folders are never entered.
        folders[:] = [f for f in folders if not f.startswith(".") and f not in SKIPPED]
        found += [Path(folder) / name for name in files if name.endswith(".md")]
    return sorted(found)


def outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """The page's lines, numbered from 1, outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Those lines with inline code removed: a link written as code is an example, not a link."""
    for number, line in outside_fences(text):
        yield number, _INLINE_CODE.sub("", line)


def links(page: Path) -> list[Link]:
    return [
        Link(page, n, m.group(1)) for n, line in prose_lines(page.read_text()) for m in _LINK.finditer(line)
    ]


def anchor(heading: str) -> str:
    """GitHub's anchor of one heading's text (markdown emphasis and code marks are not in it)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' (duplicates numbered as GitHub does) and <a name>s."""
    seen: dict[str, int] = {}
    found = set(_HTML_ANCHOR.findall(text))
    for _, line in outside_fences(text):
        match = _HEADING.match(line)
        if not match:
            continue
        base = anchor(match.group(2))
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def problem(link: Link, root: Path) -> str | None:
    """Why the link leads nowhere, or None where it holds."""
    target = link.target
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
        return None
    path_part, _, fragment = target.partition("#")
    path = (link.page.parent / path_part).resolve() if path_part else link.page.resolve()
    try:
        path.relative_to(root.resolve())
    except ValueError:
        return f"{target}: outside the repository, a file a user of the project does not have"
    if not path.exists():
        return f"{target}: no such file"
    if fragment and path.suffix == ".md" and fragment not in anchors(path.read_text()):
        return f"{target}: no heading in {path.name} has the anchor #{fragment}"
    return None


# A document named in prose rather than linked: a docs/ path, or a conventional upper-case name
# (README.md, CHANGELOG.md, FACTS.md). A placeholder in capitals (docs/studies/NAME.md) names none;
# a lower-case bare name is a file a command writes (--out gpu-check.md), not one of the project's.
_NAMED = re.compile(r"(?<![\w/.-])((?:docs/[\w./-]*?)?[\w-]+\.md)\b")
_PLACEHOLDER = re.compile(r"\b[A-Z]{2,}\b(?=\.md|/)")


def named_documents(page: Path) -> list[Link]:
    """Documents the page names in its text (code included: a reader follows those too)."""
    found = []
    for number, line in outside_fences(page.read_text()):
        text = re.sub(r"\]\([^)]*\)", "]", line)  # a link's target is checked as a link
        for match in _NAMED.finditer(text):
            name = match.group(1)
            conventional = "/" not in name and name[:-3].isupper()
            placeholder = name.startswith("docs/") and _PLACEHOLDER.search(name.removeprefix("docs/"))
            if (name.startswith("docs/") and not placeholder) or conventional:
                found.append(Link(page, number, name))
    return found


def missing_document(link: Link, root: Path) -> str | None:
    """Why a document named in prose is not one a reader of the repository has, or None."""
    name = link.target
    if (link.page.parent / name).exists() or (root / name).exists():
        return None
    if "/" not in name and any(p.name == name for p in pages(root)):
        return None  # README.md, SOURCE.md: one of the repository's own, in another folder
    return f"names {name}, which is not in the repository"


def stray_rows(page: Path) -> list[int]:
    """Lines of table rows written straight after a paragraph line: GitHub renders them as text of
    that paragraph, so the row is lost from its table (outcomes.md's `skipped`, issue 44)."""
    found = []
    previous = (0, "")
    for number, line in outside_fences(page.read_text()):
        before = previous[1].strip() if previous[0] == number - 1 else ""
        if line.startswith("|") and before and not before.startswith("|"):
            found.append(number)
        previous = (number, line)
    return found


def broken(root: Path) -> list[str]:
    """Every link and named document of every page that leads nowhere, as `page:line: why`."""
    found = []
    for page in pages(root):
        where = page.relative_to(root)
        for link in links(page):
            why = problem(link, root)
            if why:
                found.append(f"{where}:{link.line}: {why}")
        for link in named_documents(page):
            why = missing_document(link, root)
            if why:
                found.append(f"{where}:{link.line}: {why}")
        found += [f"{where}:{n}: a table row after a paragraph, outside its table" for n in stray_rows(page)]
    return found

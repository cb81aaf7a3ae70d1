"""`bench study report NAME --format html`: the study's report as one self-contained page.

The same report as the text and markdown (report.py builds all three through one writer's
interface: headings, paragraphs, lists, tables, figures), written as the `bench report --html`
page is: its style, its tables (report/html/page.py's html_table and escape) and its figures as PNG data URIs,
so the one file opens from disk and can be mailed as it is. Everything from a study's files or a
database is outside text, and a study file may be hostile (docs/security.md): every value is
escaped, and no heading's text ever becomes an id or a link.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator import __version__
from orchestrator.report.html import page
from orchestrator.studies import figures
from orchestrator.text.formats import Column

DASH = "—"


class Page:
    """report.Lines's interface, writing HTML."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.sections: list[tuple[str, str]] = []  # (id, title) of each h2, for the contents
        self.title = ""
        self.plots = 0
        self.tail = ""

    def heading(self, level: int, text: str) -> None:
        if level == 1:
            self.title = text
            self.parts.append(f"<h1>{page.escape(text)}</h1>")
            return
        if level == 2:
            anchor = f"s{len(self.sections) + 1}"
            self.sections.append((anchor, text))
            self.parts.append(f'<h2 id="{anchor}">{page.escape(text)}</h2>')
            return
        self.parts.append(f"<h{level}>{page.escape(text)}</h{level}>")

    def para(self, text: str) -> None:
        self.parts.append(f"<p>{page.escape(text)}</p>")

    def items(self, items: Sequence[str], made_safe: bool = False) -> None:
        """A list; `made_safe`: its items went through safe() already, with links of link()'s."""
        if items:
            shown = (i if made_safe else page.escape(i) for i in items)
            self.parts.append("<ul>" + "".join(f"<li>{i}</li>" for i in shown) + "</ul>")

    def safe(self, text: str) -> str:
        return page.escape(text)

    def link(self, target: str) -> str:
        """A page of bench's docs (since.SEE's shape), named as text: the page stands alone, opened
        from anywhere, where a relative link would lead nowhere."""
        return page.escape(target)

    def table(
        self, rows: list[dict[str, str]], keys: Sequence[str], headers: dict[str, str] | None = None
    ) -> None:
        if not rows:
            return
        columns = [Column((headers or {}).get(k, k), k, _text(k)) for k in keys]
        self.parts.append(page.html_table(rows, columns))

    def figure(self, title: str, items_name: str, bars: Sequence[figures.Bar]) -> None:
        if not any(b.published is not None or b.bench is not None for b in bars):
            return
        self.plots += 1
        png = figures.times_fastest(title, items_name, bars)
        caption = (
            f"{title}: per column, each {items_name}'s published figure × the column's fastest (grey) "
            "beside bench's, with its 95 % interval over runs as the error bar."
        )
        self.parts.append(_img(f"study-{self.plots}", title, caption, png))

    def footer(self, text: str) -> None:
        self.tail = text

    def text(self) -> str:
        contents = "".join(f'<li><a href="#{a}">{page.escape(t)}</a></li>' for a, t in self.sections)
        tail = f'<p class="note">{page.escape(self.tail)}</p>' if self.tail else ""
        made = f'<p class="note">Page made by bench {page.escape(__version__)}.</p>'
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{page.escape(self.title)}</title><style>{page.STYLE}</style></head><body>\n"
            + (self.parts[0] if self.parts else "")
            + f"<nav><ul>{contents}</ul></nav>\n"
            + "\n".join(self.parts[1:])
            + f"\n{tail}{made}\n</body></html>\n"
        )


def _img(ident: str, title: str, caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img id="{ident}" alt="{page.escape(title)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{page.escape(caption)}</figcaption></figure>"
    )


def _text(key: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: str(row.get(key, DASH))

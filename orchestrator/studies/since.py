"""What a study's re-run says of its conclusions today: the closing section of its report.

It is written from the report's own figures, so it cannot drift from them: how many of the
study's claims bench could judge here and how each ended, and how far bench's order of the
frameworks agrees with the published one (Kendall's τ-b per column of each published table, and
their mean). Beside a claim, the study file may name causes: a sentence each, pointing at the
section of bench's docs whose traces show it (docs/fairness.md's gaps between frameworks, for
instance), as

    since:
      - claims: [cpu-fastest]
        text: PyTorch's CPU batch norm is its own kernel, not oneDNN's
        see: docs/fairness.md#pytorch

A cause is the study's reader's explanation, never a figure: the figures are the report's. `see` is
a path under docs/ with an optional anchor, nothing else (it becomes a link on the generated page);
tests/test_study_pages.py checks that each one names a section that exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from yaml.nodes import Node

from orchestrator.config import matrix as matrix_loader
from orchestrator.config.values import shown
from orchestrator.errors import StatsError
from orchestrator.stats import ranking
from orchestrator.studies.spec import Cause

if TYPE_CHECKING:
    from orchestrator.studies.claims import Verdict

KEYS = ("claims", "text", "see")
SEE = re.compile(r"docs(/[a-z0-9][a-z0-9_-]*)+\.md(#[a-z0-9][a-z0-9-]*)?")
UNCHECKABLE = "not checkable here"
# The order a summary lists verdicts in (what changed first), and how a count says each.
ORDER = ("does not hold", "mixed", "not shown at this n", "holds")
PLURAL = {"does not hold": "do not hold", "holds": "hold"}


def parse(read: matrix_loader.Reader, nodes: Sequence[Node], claim_ids: Sequence[str]) -> tuple[Cause, ...]:
    """The study file's `since:` entries, each naming claims the file states."""
    causes = []
    for node in nodes:
        keys = read.mapping(node, "since", KEYS)
        line = node.start_mark.line + 1
        for needed in ("claims", "text"):
            if needed not in keys:
                raise read.error(line, "since", f"each entry needs {needed}")
        named = []
        for item in read.sequence(keys["claims"], "claims", "a list of claim ids"):
            value = read.scalar(item, "claims")
            if str(value) not in claim_ids:
                raise read.node_error(item, "claims", f"{shown(value)}: no such claim in the study")
            named.append(str(value))
        if not named:
            raise read.node_error(keys["claims"], "claims", "name at least one claim")
        see = read.text(keys.get("see"), "see")
        if see and not SEE.fullmatch(see):
            wanted = "expected docs/NAME.md or docs/NAME.md#section"
            raise read.node_error(keys["see"], "see", f"{shown(see)}: {wanted}")
        causes.append(Cause(tuple(named), read.text(keys["text"], "text", allow_empty=False), see, line))
    return tuple(causes)


class Out(Protocol):
    def heading(self, level: int, text: str) -> None: ...
    def para(self, text: str) -> None: ...
    def items(self, items: Sequence[str], made_safe: bool = False) -> None: ...
    def safe(self, text: str) -> str: ...
    def link(self, target: str) -> str: ...


@dataclass(frozen=True)
class Agreement:
    """Kendall's τ-b between the published and bench's order of a table's items (frameworks) in
    one of its columns (models)."""

    table: str
    items: str
    columns: str
    column: str
    tau: float | None  # None: fewer than two items in common, or bench's all tied


def section(
    out: Out,
    causes: Sequence[Cause],
    verdicts: Sequence[Verdict],
    agreements: Sequence[Agreement],
    releases: Sequence[str] = (),
) -> None:
    """The closing section; `releases`: the releases section's lines, one per framework and model
    whose × the fastest today differs from the published one, and its summary (releases_report.py)."""
    out.heading(2, "What the re-run says today")
    judged = [v for v in verdicts if v.verdict != UNCHECKABLE]
    counts = []
    for name in ORDER:
        n = sum(v.verdict == name for v in judged)
        if n:
            counts.append(f"{n} {name if n == 1 else PLURAL.get(name, name)}")
    unchecked = len(verdicts) - len(judged)
    out.para(
        f"Of the study's {len(verdicts)} claims, bench judged {len(judged)} on this database"
        + (f": {', '.join(counts)}" if counts else "")
        + (
            f"; {unchecked} {'is' if unchecked == 1 else 'are'} not checkable here (each says why above)"
            if unchecked
            else ""
        )
        + "."
    )
    out.items(_agreement(agreements))
    if releases:
        out.para(
            "How much of each difference from the published × the fastest the frameworks' releases "
            "explain, the oldest releases run against today's in one sweep:"
        )
        out.items(releases)
    explained = {claim for cause in causes for claim in cause.claims}
    lines = []
    for v in sorted(judged, key=lambda v: ORDER.index(v.verdict) if v.verdict in ORDER else len(ORDER)):
        # One figure it rests on, its first (the rest are listed with the claim above).
        n = len(v.figures)
        figure = f" ({v.figures[0].split(', p=')[0]}; {n} figure{'s' if n > 1 else ''} above)" if n else ""
        changed = v.verdict in ("does not hold", "mixed") and v.claim.id not in explained
        lines.append(f"{v.claim.id}: {v.verdict}{figure}." + (" No cause recorded." if changed else ""))
    out.items(lines)
    if causes:
        out.para("What explains them, as bench's traces and method show it:")
        out.items(
            [
                out.safe(f"{', '.join(c.claims)}: {c.text}") + (f" See {out.link(c.see)}." if c.see else "")
                for c in causes
            ],
            made_safe=True,
        )


def _agreement(agreements: Sequence[Agreement]) -> list[str]:
    by_table: dict[str, list[Agreement]] = {}
    for a in agreements:
        by_table.setdefault(a.table, []).append(a)
    lines = []
    for table, rows in by_table.items():
        known = [a.tau for a in rows if a.tau is not None and math.isfinite(a.tau)]
        items, columns = rows[0].items, rows[0].columns
        if not known:
            lines.append(
                f"{table}: no column has two {items} values in both the published order and bench's "
                "(Kendall's τ-b undefined; the table above says what is missing)"
            )
            continue
        each = ", ".join(f"{a.column} {_tau(a.tau)}" for a in rows)
        lines.append(
            f"{table}: Kendall's τ-b between the published and bench's order of {items} per {columns}: "
            f"{each}; mean {sum(known) / len(known):.2f} (1 the same order, 0 unrelated, −1 "
            f"reversed; {sum(t >= 0.5 for t in known)} of {len(rows)} columns at 0.5 or more)"
        )
    return lines


def _tau(tau: float | None) -> str:
    return "—" if tau is None else f"{tau:.2f}"


def tau_b(bench: dict[str, int], ranked: dict[str, float]) -> tuple[str, float | None]:
    """Kendall's τ-b between bench's ranks and a published order (each figure as a time: lowest
    first), over the items both have: as a table prints it, and as a number (None: undefined)."""
    common = sorted(set(bench) & set(ranked))
    if len(common) < 2:
        return "—", None
    ordered = sorted(ranked[k] for k in common)
    theirs = {k: float(ordered.index(ranked[k]) + 1) for k in common}
    try:
        tau = ranking.kendall_tau_b({k: float(bench[k]) for k in common}, theirs)
    except StatsError as exc:  # every bench cell tied: τ-b is undefined, and the table says why
        return f"— ({exc})", None
    return f"{tau:.2f} over {len(common)}", tau

"""The keys a study file may use, per section and per claim kind (loader.py reads it with them).

A key that does nothing for its kind is refused (a claim misread), so each kind says what it needs
beyond id, kind, text and source, and what else it takes.
"""

from __future__ import annotations

from orchestrator.studies.accuracy import ACCURACY_KEYS

SECTIONS = (
    "name", "title", "citation", "notes", "matrices", "published", "claims", "ratios", "since", "releases",
)  # fmt: skip
MATRIX_KEYS = ("path", "scale", "note")
# `releases:`: which of the study's matrices runs `version` as an axis, and which published table it
# answers (its columns and items are the table's; `columns`, where given, must agree).
RELEASES_KEYS = ("matrix", "published", "columns", "note")
TABLE_KEYS = (
    "name", "file", "unit", "row", "value", "items", "columns", "where", "measured", "missing", "unknown",
    "notes", "published_only", "absent",
)  # fmt: skip
CLAIM_KEYS = (
    "id", "kind", "text", "source", "items", "columns", "where", "metric", "who", "in", "order", "a", "b",
    "above", "below", "relation", "axis", "reason", "within", *ACCURACY_KEYS,
)  # fmt: skip
# What each kind needs beyond id, kind, text and source (the rest it refuses: a key that does
# nothing for its kind is a claim misread).
NEEDS = {
    "fastest": ("who", "in"),
    "order": ("order",),
    "ratio": ("a", "b"),
    "rises_with": ("axis",),
    "resource": ("a", "b", "relation", "metric"),
    "similar": ("a", "b", "within"),
    "spread": ("within",),
    "rises_beyond": ("axis",),
    "not_checkable": ("reason",),
}
TAKES = {
    "fastest": ("items", "columns", "where", "metric", *ACCURACY_KEYS),
    "order": ("items", "columns", "where", "metric", *ACCURACY_KEYS),
    "ratio": ("items", "columns", "where", "metric", "above", "below", *ACCURACY_KEYS),
    "rises_with": ("items", "columns", "where", "metric", *ACCURACY_KEYS),
    "resource": ("items", "columns", "where"),
    "similar": ("items", "columns", "where", "metric"),
    "spread": ("items", "columns", "where", "metric"),
    "rises_beyond": ("items", "columns", "where", "metric"),
    "not_checkable": (),
}

"""docs/reference/matrix.md: every matrix setting from its one declaration (orchestrator/config/settings.py).

The values and defaults are worded as docs/matrix.md's field table words them (field_docs), so the
two pages cannot disagree; this page adds what that table leaves out: whether the setting may be an
axis, whether it is part of a configuration's identity, and where and since when it is stored.
"""

from __future__ import annotations

from orchestrator.config import field_docs
from orchestrator.config.matrix import LIST_FIELDS
from orchestrator.config.run_config import FIELD_NAMES
from orchestrator.config.setting import Setting
from orchestrator.config.settings import SETTINGS

TITLE = "# Matrix settings reference"
INTRO = (
    "Every setting a matrix (or `bench train`'s options) can give, in declaration order, from its one "
    "declaration in `orchestrator/config/settings.py`. *Axis*: whether a matrix may list it under `axes` "
    "(the loader accepts it there). *Identity*: whether it is part of the configuration's hash; a setting "
    "added after the first schema is left out of the hash while unset, so older configurations keep "
    "theirs ([matrix.md](../matrix.md#identity)). *Stored*: its column in the `runs` table "
    "([schema.md](schema.md#runs)) and the schema version that added it. The longer explanation of each "
    "is in [matrix.md's field table](../matrix.md#fields)."
)
HEADER = ("| setting | values | default | axis | identity | stored | help |", "|---|---|---|---|---|---|---|")


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def axis(setting: Setting) -> str:
    if setting.name not in FIELD_NAMES:
        return "no"
    return "yes, each value a list" if setting.name in LIST_FIELDS else "yes"


def identity(setting: Setting) -> str:
    if not setting.identity:
        return "no"
    return "yes, once set" if setting.since > 1 else "yes"


def stored(setting: Setting) -> str:
    column = f"`{setting.runs_column}`"
    if setting.group:
        column += f" (JSON, key `{setting.part_name}`)"
    return f"{column}, v{setting.since}"


def row(setting: Setting) -> str:
    cells = (
        f"`{setting.name}`",
        field_docs.doc_values(setting),
        field_docs.doc_default(setting),
        axis(setting),
        identity(setting),
        stored(setting),
        setting.help,
    )
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def page() -> str:
    lines = [TITLE, "", INTRO, "", *HEADER, *(row(s) for s in SETTINGS), ""]
    return "\n".join(lines)

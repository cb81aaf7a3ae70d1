"""report: runs read back from the database, as tables, figures and pages.

Arranged by what a reader looks for; each group is a sub-package whose map names its modules:

    dispatch.py    what `bench report` prints for its options, and which options clash: the entry
                   the CLI calls, and the only module that may import every group
    query/         which runs a report reads, how a configuration's runs are pooled, what ran (mode,
                   precision), the sweep a one-sweep report reads and its heading
    notes/         the notes under a table: the comparison's footnotes and fairness rules, the
                   calibrations, device memory, what one "image" is for a token model
    tables/        one module per table or option (results, comparison, accuracy, batch, inference,
                   modes, scaling, versions, resources, kernels, compare, timeline), over base.py's
                   shared pieces
    postmortem/    what went wrong: `--crashes` and `bench inspect RUN`
    html/          `--html DIR`: the page, the figures it shows and plots.py that draws them

GROUPS says which group may import which, downwards (tests/test_layering.py keeps it so): query
imports no other group; notes import query; tables import query and notes; postmortem reads the
tables' parts of a run; the page shows them all; within report/ nothing but dispatch imports html,
and nothing imports dispatch.

May import: text, config, storage. Never launch, executors or sweep: a report reads what was
recorded, whoever recorded it.
"""

# Which groups of report/ each group may import (dispatch.py, at the package root, is a group of
# its own). Data, as LAYERS is, so the rule is read by the test rather than written twice.
GROUPS: dict[str, tuple[str, ...]] = {
    "query": (),
    "notes": ("query",),
    "tables": ("query", "notes"),
    "postmortem": ("query", "notes", "tables"),
    "html": ("query", "notes", "tables", "postmortem"),
    "dispatch": ("query", "notes", "tables", "postmortem", "html"),
}

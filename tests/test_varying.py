"""select.varying: the one rule for "which settings tell these configurations apart", whatever form
the configurations come in (summary rows, stored config_json, RunConfig)."""

from __future__ import annotations

import json

from orchestrator.config.run_config import RunConfig
from orchestrator.report.html.figures import label_keys
from orchestrator.report.query.select import varying

CONFIGS = [
    RunConfig(framework="pytorch", batch_size=8, seed=2, lr=0.1),
    RunConfig(framework="tensorflow", batch_size=8, seed=1, lr=0.1),
    RunConfig(framework="tensorflow", batch_size=8, seed=1, lr=0.01),
]


def test_the_fields_that_take_several_values_in_configuration_order():
    dicts = [c.to_dict() for c in CONFIGS]
    assert varying(dicts) == ["framework", "lr", "seed"]
    assert varying(reversed(dicts)) == ["framework", "lr", "seed"]  # any iterable, order of fields
    assert varying(dicts, skip=("framework", "seed")) == ["lr"]
    assert varying(dicts[1:]) == ["lr"] and varying(dicts[:1]) == [] and varying([]) == []


def test_figures_name_the_same_fields_less_the_framework():
    runs = [{"id": i, "config_json": json.dumps(c.to_dict())} for i, c in enumerate(CONFIGS)]
    assert label_keys(runs) == ["lr", "seed"]
    assert label_keys(runs, skip=("lr",)) == ["seed"]

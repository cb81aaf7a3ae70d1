"""The framework-side half of the adapter tests: what every driver script shares.

Each tests/test_<framework>_adapter.py writes a driver script that runs in that framework's own
environment (tests/drivers.py starts it), so this module is imported there, never by pytest's
side: standard library only, and Python 3.6 code (Singa's interpreter runs it).

A driver defines check_<name>(*args) functions and ends with run_checks(globals()).
"""

import importlib
import json
import sys
import traceback

# A small, fast configuration; each driver overrides what its framework needs.
BASE_CONFIG = dict(
    model="small_cnn",
    device="cpu",
    batch_size=16,
    optimizer="sgd",
    lr=0.01,
    momentum=0.9,
    epochs=4,
    warmup_steps=0,
    repeats=1,
    dataset="synthetic",
    dataset_size=400,
    image_size=32,
    classes=4,
    val_fraction=0.2,
    threads=0,
    seed=0,
)


def configurer(framework, **defaults):
    """config(**over) and adapter(**over) for this framework's adapter; adapter() also sets it up."""
    module = importlib.import_module("workers.adapters." + framework)  # imports no framework
    base = dict(BASE_CONFIG, framework=framework)
    base.update(defaults)

    def config(**over):
        c = dict(base)
        c.update(over)
        return c

    def adapter(**over):
        a = module.Adapter(config(**over))
        return a, a.setup()

    return config, adapter


def cases(namespace, argv=None):
    """The namespace with check_<name>-<case> for every such check asked for: check_<name>, so one
    function runs several cases (its arguments say which), each with its own result."""
    argv = sys.argv[1:] if argv is None else argv
    out = dict(namespace)
    for name, _ in json.loads(argv[1]):
        out["check_" + name] = namespace["check_" + name.split("-")[0]]
    return out


def run_checks(namespace, argv=None):
    """argv: the results file, then a JSON list of [name, [args]]; runs check_<name>(*args) in turn.

    A check that raises records its traceback as {"driver_error": ...}, which the test side turns
    into that test's failure, and the others still run.
    """
    argv = sys.argv[1:] if argv is None else argv
    results = {}
    for name, args in json.loads(argv[1]):
        try:
            results[name] = namespace["check_" + name](*args)
        except Exception:
            results[name] = {"driver_error": traceback.format_exc()}
    with open(argv[0], "w") as f:
        json.dump(results, f)

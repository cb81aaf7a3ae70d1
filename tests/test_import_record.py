"""The import record (tests/import_record.py) sees a framework imported in any way, in any process
of the orchestrator's environment, and an adapter imported: planted imports of stand-in packages,
so that the checks that bench's sweeps never import either (test_<framework>_adapter.py,
test_pytorch_runs.py, test_across_frameworks.py) can fail."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests import import_record

SCRIPT = """
import importlib, subprocess, sys
import torch.nn                                  # a package found on PYTHONPATH
import workers.adapters.fault                    # an adapter (no framework: the fault worker's)
try:
    import jax                                   # an attempt: the environment has none
except ImportError:
    pass
try:
    importlib.import_module("paddle")            # not an import statement: no audit event
except ImportError:
    pass
child = "import mxnet; print(mxnet.name)"        # a process it starts, like bench's sampler
sys.exit(subprocess.run([sys.executable, "-c", child]).returncode)
"""


def test_a_planted_framework_import_is_reported_for_its_process(tmp_path):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("")
    (fake / "torch" / "nn.py").write_text("")
    (fake / "mxnet.py").write_text("name = 'stand-in'\n")
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    recorded = import_record.run(
        [sys.executable, "script.py"], tmp_path, env={"PYTHONPATH": str(fake), "PATH": "/usr/bin:/bin"}
    )
    assert recorded.returncode == 0 and recorded.stdout == "stand-in\n", recorded.stderr
    found = recorded.forbidden()
    adapter = ["workers.adapters", "workers.adapters.base", "workers.adapters.fault"]
    assert sorted(found.values()) == [["jax", "paddle", "torch", "torch.nn", *adapter], ["mxnet"]]
    [script] = recorded.importing("torch")
    assert script.endswith("script.py") and recorded.importing("mxnet") != [script]
    with pytest.raises(AssertionError):
        import_record.assert_no_framework(recorded)


def test_a_command_that_imports_no_framework_passes(tmp_path):
    recorded = import_record.bench(tmp_path, "--version")
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.importing("click") and recorded.forbidden() == {}
    import_record.assert_no_framework(recorded)

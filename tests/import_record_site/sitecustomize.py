"""Records what a Python process imports, for tests/import_record.py.

Python imports the first sitecustomize.py on its path as it starts; the helper puts this folder
first on PYTHONPATH, so every interpreter of the orchestrator's environment that a recorded
command starts (bench itself, its sampler, its calibration) loads it; a worker does not (bench
sets the worker's PYTHONPATH itself), and a process of another environment writes nothing.

Each recorded process writes one file named by its pid in $BENCH_IMPORT_RECORD: its command line
(repr), then a module name a line: those already imported as it started (site's .pth files run
before this), then every one it imports or tries to. Two ways in, since neither alone sees every
import: the "import" audit event is raised by the import statement and __import__ but not by
importlib.import_module, and a finder first on sys.meta_path is asked by both (as long as nobody
replaces sys.meta_path). Each name is written as it is asked for, so a process killed mid-run
has left its record. Only os and sys are used: both are loaded before site runs.
"""

import os
import sys


def _record(folder):
    path = os.path.join(folder, str(os.getpid()))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def note(name):
        os.write(fd, str(name).replace("\n", "\\n").encode("utf-8", "backslashreplace") + b"\n")

    def audit(event, args):
        if event == "import":
            note(args[0])

    class Noted:
        """Asked for every module not yet imported; finds none, so the real finders still do."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            note(name)
            return None

    note(repr(sys.orig_argv))
    for name in list(sys.modules):
        note(name)
    sys.meta_path.insert(0, Noted)
    sys.addaudithook(audit)


if os.environ.get("BENCH_IMPORT_RECORD") and sys.prefix == os.environ.get("BENCH_IMPORT_RECORD_PREFIX"):
    _record(os.environ["BENCH_IMPORT_RECORD"])

"""Singa's own per-operator timing as bench's tracer (its graph's time profiling).

Singa 3 times every node of a buffered graph when the device's verbosity is above 0, and
`Device.PrintTimeProfiling()` prints, at verbosity 2, one line per node ("OP_ID7. CpuConvForward :
0.0057 sec"): the node's accumulated time divided by the number of times the graph ran since it was
built (measured: warm-up steps count in that number, evaluation does not; time accumulates only
while the verbosity is up). So verbosity is raised for each timed epoch only, the adapter counts
the graph's runs, and total = printed value x graph runs; calls = traced steps per node. The print
goes to the C++ stdout, captured through a file descriptor swap.
"""

import ctypes
import os
import re
import sys
import tempfile

from workers.adapters import base

_LINE = re.compile(r"^OP_ID(\d+)\.\s+(\S.*?)\s+:\s+([0-9.eE+-]+)\s+sec\s*$")


class Tracer(base.Tracer):
    backend = "singa.graph-profiling"
    device = "cpu"

    def __init__(self, adapter):
        base.Tracer.__init__(self)
        self.adapter = adapter
        self.traced_steps = 0
        self._mark = 0

    def start(self):
        device = self.adapter.dev
        # Divide by every run of the graph, not by the runs after a skip count (default 5).
        device.SetSkipIteration(0)
        device.SetVerbosity(2)
        self._mark = self.adapter.graph_runs

    def stop(self):
        self.adapter.dev.Sync()
        self.adapter.dev.SetVerbosity(0)
        self.traced_steps += self.adapter.graph_runs - self._mark

    def records(self):
        device = self.adapter.dev
        device.SetVerbosity(2)  # what PrintTimeProfiling prints depends on the verbosity
        try:
            text = _captured_stdout(device.PrintTimeProfiling)
        finally:
            device.SetVerbosity(0)
        runs = self.adapter.graph_runs
        for line in text.splitlines():
            match = _LINE.match(line.strip())
            if match:
                self.add(match.group(2), self.traced_steps, float(match.group(3)) * runs)
        if not self.totals:
            raise RuntimeError("PrintTimeProfiling printed no operator lines: {!r}".format(text[:200]))
        return base.Tracer.records(self)


def _captured_stdout(call):
    """What a C++ function writes to file descriptor 1."""
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 1)
        try:
            call()
            libc.fflush(None)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        capture.seek(0)
        return capture.read().decode("utf-8", "replace")

"""The event stream: JSON lines, flushed as they happen, so a run that dies leaves its trail on disk."""

import json
import time


class EventWriter(object):
    """Appends one JSON object a line to the events file and flushes each line."""

    def __init__(self, path):
        # Line buffering would flush per line too; an explicit flush keeps the guarantee obvious.
        self._file = open(path, "a")
        self.phase = None
        self.epoch = None

    def emit(self, event, **fields):
        fields["event"] = event
        fields["t"] = time.time()
        self._file.write(json.dumps(fields, sort_keys=True) + "\n")
        self._file.flush()

    def set_phase(self, phase, **fields):
        self.phase = phase
        self.emit("phase", phase=phase, **fields)

    def step(self, epoch, step):
        # The hot path: one short preformatted line per training step, no json.dumps.
        self._file.write('{"event":"step","epoch":%d,"step":%d,"t":%.6f}\n' % (epoch, step, time.time()))
        self._file.flush()

    def close(self):
        self._file.close()

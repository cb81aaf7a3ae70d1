"""The event stream: JSON lines, flushed as they happen, so a run that dies leaves its trail on disk.

Bounded, so that a buggy adapter emitting in a loop cannot fill the disk: past ``STEP_LIMIT``
bytes, step events (the bulk) are written at most once a second, and past twice that, every event
is; the latest one held back is written before the next one that is written, and at close.
"""

import json
import time

STEP_LIMIT = 64 * 1024 * 1024
LATE_INTERVAL = 1.0


class EventWriter(object):
    """Appends one JSON object a line to the events file and flushes each line."""

    def __init__(self, path):
        # Line buffering would flush per line too; an explicit flush keeps the guarantee obvious.
        self._file = open(path, "a")
        self.phase = None
        self.epoch = None
        self._size = 0
        self._held = None
        self._next_late = 0.0

    def _write(self, line, bulk):
        if self._size >= STEP_LIMIT and (bulk or self._size >= 2 * STEP_LIMIT):
            now = time.time()
            if now < self._next_late:
                self._held = line
                return
            self._next_late = now + LATE_INTERVAL
        if self._held is not None and not bulk:
            self._file.write(self._held)
            self._size += len(self._held)
        self._held = None
        self._file.write(line)
        self._file.flush()
        self._size += len(line)

    def emit(self, event, **fields):
        fields["event"] = event
        fields["t"] = time.time()
        self._write(json.dumps(fields, sort_keys=True) + "\n", False)

    def set_phase(self, phase, **fields):
        self.phase = phase
        self.emit("phase", phase=phase, **fields)

    def step(self, epoch, step):
        # The hot path: one short preformatted line per training step, no json.dumps.
        self._write('{"event":"step","epoch":%d,"step":%d,"t":%.6f}\n' % (epoch, step, time.time()), True)

    def close(self):
        if self._held is not None:
            self._file.write(self._held)
        self._file.close()

"""TensorFlow's own profiler as bench's tracer (tf.profiler.experimental).

Each timed epoch is profiled into its own folder (tf-trace/epoch-N in the run folder), where
TensorFlow writes an XSpace protobuf (*.xplane.pb). The records are read from the host plane with
the xplane_pb2 module that ships with TensorFlow: every event whose metadata has a display name is
an executed op ("<node name>:<op type>", display name the op type); ops are aggregated by op type,
each counting its self time (its duration minus that of ops nested in it, which the executor does
not do today: measured, none nested). The folders stay, for TensorBoard's profile plugin.
"""

import glob
import os

from workers.adapters import base

TRACE_DIR = "tf-trace"


def _xplane_pb2():
    try:
        from tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    return xplane_pb2


class Tracer(base.Tracer):
    backend = "tf.profiler"
    device = "cpu"

    def __init__(self, root=TRACE_DIR):
        base.Tracer.__init__(self)
        self.root = root
        self.count = 0

    def start(self):
        import tensorflow as tf

        self.count += 1
        tf.profiler.experimental.start(os.path.join(self.root, "epoch-{}".format(self.count)))

    def stop(self):
        import tensorflow as tf

        tf.profiler.experimental.stop()

    def records(self):
        xplane_pb2 = _xplane_pb2()
        files = sorted(glob.glob(os.path.join(self.root, "**", "*.xplane.pb"), recursive=True))
        if len(files) != self.count:
            raise RuntimeError("expected {} xplane.pb files under {}, found {}".format(
                self.count, self.root, len(files)))
        for path in files:
            space = xplane_pb2.XSpace()
            with open(path, "rb") as f:
                space.ParseFromString(f.read())
            for plane in space.planes:
                if plane.name.startswith("/host:"):
                    self._plane(plane)
        return base.Tracer.records(self)

    def _plane(self, plane):
        metadata = plane.event_metadata
        for line in plane.lines:
            ops = [e for e in line.events if metadata[e.metadata_id].display_name]
            ops.sort(key=lambda e: (e.offset_ps, -e.duration_ps))
            for event, own_ps in _self_times(ops):
                self.add(metadata[event.metadata_id].display_name, 1, own_ps / 1e12)


def _self_times(events):
    """(event, self duration) for events sorted by start: minus the events nested in each."""
    out, stack = [], []  # stack: [end, index into out]
    for event in events:
        end = event.offset_ps + event.duration_ps
        while stack and stack[-1][0] <= event.offset_ps:
            stack.pop()
        if stack:
            out[stack[-1][1]][1] -= event.duration_ps
        out.append([event, event.duration_ps])
        stack.append((end, len(out) - 1))
    return out

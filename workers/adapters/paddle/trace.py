"""PaddlePaddle's own profiler as bench's tracer (paddle.profiler, CPU target).

One Profiler per timed epoch; its result is read from the profiler's node trees
(`profiler_result.get_data()`, the data its summary is built from) rather than from the printed
summary. Each Operator node ("conv2d dygraph", "Global_Conv2dGradNodeFinal", ...) counts its self
time: its span minus the Operator nodes nested in it; the " dygraph" suffix of forward operators
is dropped from the name. Nothing is exported to disk.
"""

from workers.adapters import base

_SUFFIX = " dygraph"


class Tracer(base.Tracer):
    backend = "paddle.profiler"
    device = "cpu"

    def __init__(self):
        base.Tracer.__init__(self)
        self._profiler = None

    def start(self):
        from paddle import profiler

        # on_trace_ready's default writes a Chrome trace into ./profiler_log: not wanted here.
        self._profiler = profiler.Profiler(targets=[profiler.ProfilerTarget.CPU],
                                           on_trace_ready=lambda prof: None)
        self._profiler.start()

    def stop(self):
        from paddle.base.core import TracerEventType

        profiler, self._profiler = self._profiler, None
        profiler.stop()
        for root in profiler.profiler_result.get_data().values():
            self._walk(root, TracerEventType.Operator)

    def _walk(self, node, operator):
        stack = [node]
        while stack:
            node = stack.pop()
            if node.type == operator:
                nested = _nested_operators(node, operator)
                own = (node.end_ns - node.start_ns) - sum(n.end_ns - n.start_ns for n in nested)
                name = node.name[:-len(_SUFFIX)] if node.name.endswith(_SUFFIX) else node.name
                self.add(name, 1, own / 1e9)
            stack.extend(node.children_node)


def _nested_operators(node, operator):
    """The Operator nodes under this one with no Operator between."""
    found, stack = [], list(node.children_node)
    while stack:
        child = stack.pop()
        if child.type == operator:
            found.append(child)
        else:
            stack.extend(child.children_node)
    return found

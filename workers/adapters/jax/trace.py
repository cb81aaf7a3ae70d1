"""JAX's own profiler as bench's tracer (jax.profiler, XLA's CPU runtime on CPU).

Each timed epoch is profiled into its own folder (jax-trace/epoch-N in the run folder), where JAX
writes an XSpace protobuf (*.xplane.pb), read back with jax.profiler.ProfileData (it ships with
jaxlib). On the host plane every event with an ``hlo_op`` stat is one executed XLA thunk of the
compiled step, named after its HLO instruction (``copy.193``, ``broadcast_add_fusion.1``,
``ynn_fusion.21``); records aggregate them without the instance number, each counting its self
time (nested thunks of a ``while`` or ``call`` subtracted). XLA hands convolutions, matrix products
and pooling to YNNPACK as ``ynn_fusion`` custom fusions, whose names say nothing of what they do:
the opcode at the root of each one's fused computation is read from the compiled HLO and
appended (``ynn_fusion:convolution``). The folders stay, for TensorBoard's or Perfetto's viewers.

On cuda (CudaTracer, where CUPTI's Python binding is missing): the same profiler, whose GPU
collector is XLA's own CUPTI tracer (the libcupti that jax's CUDA plugin installs). Its device
planes (``/device:GPU:N``) hold one line per stream (``Stream #7(Kernel,MemcpyD2D)``) whose events
are the kernels (a ``kernel_details`` stat), copies (``memcpy_details``) and memsets
(``memset_details``) with their device time; lines of other kinds (``CUPTI overhead``) are left
out. A kernel XLA generated is named after its HLO instruction (its ``hlo_op`` stat), recorded
without the instance number as on the CPU (``loop_add_fusion``); a library kernel (cuBLAS, cuDNN)
keeps its own name. Unverified: no GPU has run it yet (docs/gpu.md).
"""

import glob
import os
import re

from workers.adapters import base

TRACE_DIR = "jax-trace"
_INSTANCE = re.compile(r"\.\d+$")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.-]+) \(")
_OPCODE = re.compile(r"^\s+(ROOT )?%[\w.-]+ = \S+ ([\w-]+)\(")
_HEAVY = ("convolution", "dot", "reduce-window", "select-and-scatter", "reduce")
_DEVICE_EVENTS = ("kernel_details", "memcpy_details", "memset_details")
_CUSTOM = re.compile(r"^\s+(?:ROOT )?%([\w.-]+) = .*?kind=kCustom, calls=%([\w.-]+)")


class Tracer(base.Tracer):
    backend = "jax.profiler"
    device = "cpu"

    def __init__(self, root=TRACE_DIR):
        base.Tracer.__init__(self)
        self.root = root
        self.count = 0
        self.hlo_text = None  # the compiled step's HLO, set by the adapter before the first start()

    def start(self):
        import jax

        self.count += 1
        jax.profiler.start_trace(os.path.join(self.root, "epoch-{}".format(self.count)))

    def stop(self):
        import jax

        jax.profiler.stop_trace()

    def records(self):
        spaces = self._xspaces()
        roots = custom_fusion_roots(self.hlo_text or "")
        if not roots:
            self.notes.append("no compiled HLO to name XLA's custom fusions by: ynn_fusion left as is")
        for space in spaces:
            for plane in space.planes:
                if plane.name.startswith("/host:"):
                    for line in plane.lines:
                        self._line(line, roots)
        return base.Tracer.records(self)

    def _xspaces(self):
        from jax.profiler import ProfileData

        files = sorted(glob.glob(os.path.join(self.root, "**", "*.xplane.pb"), recursive=True))
        if len(files) != self.count:
            raise RuntimeError("expected {} xplane.pb files under {}, found {}".format(
                self.count, self.root, len(files)))
        return [ProfileData.from_file(path) for path in files]

    def _line(self, line, roots):
        thunks = []
        for event in line.events:
            op = dict(event.stats).get("hlo_op")
            if op:
                thunks.append((event.start_ns, event.duration_ns, op))
        thunks.sort(key=lambda t: (t[0], -t[1]))
        for (_, _, op), own_ns in self_times(thunks):
            self.add(record_name(op, roots), 1, own_ns / 1e9)


class CudaTracer(Tracer):
    backend = "jax.profiler (CUPTI)"
    device = "cuda"

    def __init__(self, why_not_cupti, root=TRACE_DIR):
        Tracer.__init__(self, root)
        self.notes.append("CUPTI's Python binding not used: {}; XLA's own CUPTI tracer read "
                          "instead".format(why_not_cupti))

    def records(self):
        found = 0
        for space in self._xspaces():
            for name, seconds in device_events(space.planes):
                self.add(name, 1, seconds)
                found += 1
        if not found:
            raise RuntimeError("no kernel on a /device:GPU plane of JAX's profile under {}: XLA's "
                               "CUPTI tracer recorded none (libcupti not found?)".format(self.root))
        return base.Tracer.records(self)


def device_events(planes):
    """(name, device seconds) of every kernel, copy and memset on the GPU planes of an XSpace."""
    for plane in planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        for line in plane.lines:
            if not line.name.startswith("Stream #"):
                continue
            for event in line.events:
                stats = dict(event.stats)
                if any(key in stats for key in _DEVICE_EVENTS):
                    yield kernel_name(event.name, stats.get("hlo_op")), event.duration_ns / 1e9


def kernel_name(name, hlo_op):
    """An XLA-generated kernel by its instruction (``loop_add_fusion_3`` with hlo_op
    ``loop_add_fusion.3`` -> ``loop_add_fusion``); a library kernel by its own name."""
    if hlo_op and isinstance(hlo_op, str) and name.replace(".", "_") == hlo_op.replace(".", "_"):
        return _INSTANCE.sub("", hlo_op)
    return name


def record_name(op, roots):
    """``ynn_fusion.21`` -> ``ynn_fusion:convolution``; ``copy.193`` -> ``copy``."""
    name = _INSTANCE.sub("", op)
    root = roots.get(op)
    return "{}:{}".format(name, root) if root else name


def custom_fusion_roots(hlo_text):
    """{instruction: what its custom fusion computes} from compiled HLO text.

    The heaviest opcode in the fused computation (a max-pool fused with dropout's scaling is a
    reduce-window, though its root is the multiply), else the root's (``ynn_fusion.21`` ->
    ``convolution``).
    """
    calls, found, computation = {}, {}, None
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            computation = header.group(1)
            found[computation] = []
            continue
        op = _OPCODE.match(line)
        if op and computation:
            ops = found[computation]
            if op.group(1):  # the root first: what is named when nothing heavy is fused
                ops.insert(0, op.group(2))
            else:
                ops.append(op.group(2))
        custom = _CUSTOM.match(line)
        if custom:
            calls[custom.group(1)] = custom.group(2)
    out = {}
    for name, body in calls.items():
        ops = found.get(body)
        if ops:
            out[name] = next((w for w in _HEAVY if w in ops), ops[0])
    return out


def self_times(events):
    """(event, self duration) for (start, duration, name) sorted by start: minus nested events."""
    out, stack = [], []  # stack: [end, index into out]
    for event in events:
        start, duration = event[0], event[1]
        while stack and stack[-1][0] <= start:
            stack.pop()
        if stack:
            out[stack[-1][1]][1] -= duration
        out.append([event, duration])
        stack.append((start + duration, len(out) - 1))
    return out

"""PyTorch's own profiler as bench's tracer (torch.profiler).

On CPU: one `torch.profiler.profile` per timed epoch, CPU activity only, read back with
key_averages(). Each operator counts its *self* CPU time (its own time minus that of the operators
it called), so a parent such as aten::linear and the aten::addmm inside it are not counted twice
and the records add up to the operator time of the traced region.

On cuda (used only where CUPTI's Python binding is missing): the same profiler with CUDA activity
only; the records are its kernel and memory-copy events, with their device time. Unverified: no GPU
was available when this was written.
"""

from workers.adapters import base


class CpuTracer(base.Tracer):
    backend = "torch.profiler"
    device = "cpu"

    def __init__(self):
        base.Tracer.__init__(self)
        self._profile = None

    def _activities(self):
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    def start(self):
        from torch.profiler import profile

        self._profile = profile(activities=self._activities())
        self._profile.__enter__()

    def stop(self):
        profile, self._profile = self._profile, None
        profile.__exit__(None, None, None)
        # key_averages() takes a tenth of a second or more: here, after the clock has stopped.
        for event in profile.key_averages():
            self._collect(event)

    def _collect(self, event):
        self.add(event.key, event.count, event.self_cpu_time_total / 1e6)


class CudaTracer(CpuTracer):
    backend = "torch.profiler (CUPTI)"
    device = "cuda"

    def __init__(self, why_not_cupti):
        CpuTracer.__init__(self)
        self.notes.append("CUPTI's Python binding not used: {}".format(why_not_cupti))

    def _activities(self):
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CUDA]

    def _collect(self, event):
        if "CUDA" not in str(getattr(event, "device_type", "")):
            return
        total = getattr(event, "self_device_time_total", None)
        if total is None:  # torch before 2.4 called it self_cuda_time_total
            total = event.self_cuda_time_total
        self.add(event.key, event.count, total / 1e6)

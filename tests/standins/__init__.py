"""Stand-ins, not a GPU: the device-side libraries bench's CUDA code calls, played in Python.

There is no GPU on the machines these tests run on. Each module here stands in for one library at
the boundary where bench's code meets it, so that the code on bench's side of that boundary runs
unchanged and its numbers can be checked: `nvml.StandInLibNvml` plays libnvidia-ml.so under the
real `pynvml` (profiler/nvml.py's sampler), `cupti.StandInCupti` plays cupti-python's
`cupti.cupti` module (workers/cupti_trace.py), `frameworks` the few device calls of TensorFlow,
PyTorch and Paddle that apply `gpu_memory_budget`. What a stand-in returns is illustrative, shaped
like the real library's answers (units, types, error codes); it says nothing about how a real
device behaves. docs/gpu.md says which code has run on a real GPU and which only against these.
"""

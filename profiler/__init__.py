"""The sidecar profiler (sampler of CPU, threads, RSS and GPU memory); see issue 4."""

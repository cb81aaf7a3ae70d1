"""What the PyTorch adapter's untimed batch arrangement costs, and where (docs/gpu.md).

The first GPU check (an H200 under gVisor) showed 8 to 14 s between one epoch's end and the next
epoch's start at 1,024 images of 224 px: the adapter's ``prepare_epoch`` gathers the epoch's
images in shuffled order into a pinned (page-locked) host buffer. This times that gather and its
alternatives on the machine it runs on, each three times:

    gather into pageable memory, into pinned memory, plain copy into pinned memory,
    allocating the pinned buffer, one batch's host->device copy from each, and the gather on
    the device (dataset uploaded once).

    python -m benchmarks.frameworks.arrange_cost [--images 1024] [--size 224] [--batch 64] [--threads N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def timed(label: str, fn: Callable[[], object], sync: Callable[[], None], reps: int = 3) -> None:
    times = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    print(f"{label:<44} " + " ".join(f"{t * 1000:9.1f}" for t in times) + "  ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1024)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 keeps its default")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    shape = (args.images, 3, args.size, args.size)
    data = torch.randn((args.images + args.images // 4,) + shape[1:])
    index = torch.randperm(data.shape[0])[: args.images]
    mib = data[: args.images].numel() * 4 / 2**20
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cuda {cuda}, epoch {mib:.0f} MiB")
    pageable = torch.empty(shape)
    timed("gather into pageable memory", lambda: torch.index_select(data, 0, index, out=pageable), sync)
    if cuda:
        timed("allocate the pinned buffer", lambda: torch.empty(shape, pin_memory=True), sync)
        pinned = torch.empty(shape, pin_memory=True)
        timed("gather into pinned memory", lambda: torch.index_select(data, 0, index, out=pinned), sync)
        timed("copy pageable into pinned memory", lambda: pinned.copy_(pageable), sync)
        timed("one batch to the device from pinned", lambda: pinned[: args.batch].to("cuda"), sync)
        timed("one batch to the device from pageable", lambda: pageable[: args.batch].to("cuda"), sync)
        on_device = data.to("cuda")
        index_device = index.to("cuda")
        timed("gather on the device", lambda: torch.index_select(on_device, 0, index_device), sync)


if __name__ == "__main__":
    main()

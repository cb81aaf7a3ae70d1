"""A bare, hand-written PyTorch training loop: the baseline the harness's step time is held to.

Run it with the PyTorch environment's interpreter (benchmarks/overhead_pytorch.py does, in a fresh
process per measurement); it prints one JSON object. The model comes from the project's one
translation of workers.models (so it is the very network the harness trains) and the images from
workers.data (so it is the very data); everything else is plain PyTorch: pre-made batch tensors,
zero_grad / forward / cross_entropy / backward / step, and time.perf_counter around the timed steps.
No events, no runner, no adapter.

With --paired N it instead measures, in this one process, N passes over the steps, taken in chunks
of --chunk steps three times in turn, each chunk clocked on its own (CPU only): by the harness's
code (the PyTorch adapter's train_step and the runner's per-step event, as workers/runner.py runs
them), by train_step alone, and by the bare step, all on the adapter's own model and optimizer.
Chunks a fraction of a second apart see the same machine, so their differences resolve the
per-step cost of the harness's code far below the run-to-run noise of separate processes.
"""

import argparse
import itertools
import json
import os
import resource
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# --paired: the runner's loop body (train_step + step event), train_step alone, the bare step.
SIDES = ("harness", "adapter", "bare")
ORDERS = list(itertools.permutations(SIDES))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="0 = torch's default")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (per pass with --paired)")
    parser.add_argument("--dataset-size", type=int, default=0, help="images generated (0: just enough)")
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paired", type=int, default=0, help="passes of the in-process comparison")
    parser.add_argument("--chunk", type=int, default=10, help="steps per side and turn with --paired")
    return parser.parse_args(argv)


def data_config(args):
    needed = args.steps * args.batch_size
    return {
        "dataset_size": args.dataset_size or int(needed / (1.0 - args.val_fraction)) + 2,
        "val_fraction": args.val_fraction,
        "image_size": args.image_size,
        "classes": args.classes,
        "seed": args.seed,
    }


def make_batches(torch, args):
    """args.steps pre-made (x, y) batches of the harness's synthetic training images."""
    from workers import data

    arrays = data.synthetic(data_config(args))
    x_all, y_all = torch.from_numpy(arrays["x_train"]), torch.from_numpy(arrays["y_train"])
    needed = args.steps * args.batch_size
    if len(y_all) < needed:
        raise SystemExit(f"{len(y_all)} training images are fewer than {args.steps} x {args.batch_size}")
    order = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(args.seed))[:needed]
    return list(zip(x_all[order].split(args.batch_size), y_all[order].split(args.batch_size), strict=True))


def make_model(torch, args):
    from workers import models
    from workers.adapters.pytorch import _sequential

    torch.manual_seed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size)
    with torch.no_grad():
        model = _sequential(torch.nn, arch["layers"], tuple(arch["input"]))[0]
    return model.train()


def bare_step(model, optimizer, cross_entropy, x, y):
    """The hand-written training step."""
    optimizer.zero_grad(set_to_none=True)
    loss = cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def bare_steps(torch, model, optimizer, batches, count):
    """count steps over the batches; returns the last loss."""
    cross_entropy = torch.nn.functional.cross_entropy
    for i in range(count):
        loss = bare_step(model, optimizer, cross_entropy, *batches[i % len(batches)])
    return loss


def solo(torch, args):
    model = make_model(torch, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    batches = make_batches(torch, args)
    bare_steps(torch, model, optimizer, batches, args.warmup)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    loss = bare_steps(torch, model, optimizer, batches, len(batches))
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {
        "seconds": seconds,
        "steps": len(batches),
        "step_seconds": seconds / len(batches),
        "last_loss": loss.item(),
        "timed_minor_faults": faults,
    }


def paired(torch, args):
    """Per-step seconds of the harness's step and the bare step, alternating step by step."""
    from workers import runner
    from workers.adapters.pytorch import Adapter
    from workers.events import EventWriter

    config = dict(data_config(args), framework="pytorch", model=args.model, device="cpu", optimizer="sgd")
    config.update(batch_size=args.batch_size, lr=args.lr, momentum=args.momentum, threads=args.threads)
    adapter = Adapter(config)
    adapter.setup()
    adapter.build_model()
    train_size = adapter.load_data()[0]
    steps = min(args.steps, adapter.prepare_epoch(runner.epoch_order(args.seed, 1, train_size)))
    batches = make_batches(torch, args)[:steps]
    model, optimizer = adapter.model, adapter.optimizer
    clock, cross_entropy = time.perf_counter, torch.nn.functional.cross_entropy
    with tempfile.TemporaryDirectory() as tmp:
        events = EventWriter(os.path.join(tmp, "events.jsonl"))
        for i in range(args.warmup):
            adapter.train_step(i % steps)
        bare_steps(torch, model, optimizer, batches, args.warmup)
        times = {side: [] for side in SIDES}
        turn = 0
        for _ in range(args.paired):
            for side in SIDES:
                times[side].append([])
            for low in range(0, steps, args.chunk):
                chunk = range(low, min(low + args.chunk, steps))
                # Every order of the three in turn: each side follows each other one equally often,
                # so what a step leaves behind (caches, the kernel's work) lands evenly on all.
                for side in ORDERS[turn % len(ORDERS)]:
                    start = clock()
                    if side == "harness":
                        for i in chunk:  # workers/runner.py's timed loop body
                            adapter.train_step(i)
                            events.step(1, i + 1)
                    elif side == "adapter":
                        for i in chunk:
                            adapter.train_step(i)
                    else:
                        for i in chunk:
                            bare_step(model, optimizer, cross_entropy, *batches[i])
                    times[side][-1].append((clock() - start) / len(chunk))
                turn += 1
        events.close()
    return {"steps": steps, "paired": times}


def main(argv=None):
    args = parse_args(argv)
    if args.threads > 0:
        # As the harness does: before torch is imported, so OpenMP and MKL size their pools by it.
        for name in THREAD_VARIABLES:
            os.environ.setdefault(name, str(args.threads))
    sys.path.insert(0, REPO)
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    result = paired(torch, args) if args.paired else solo(torch, args)
    result.update(
        torch=torch.__version__,
        intra_op=torch.get_num_threads(),
        inter_op=torch.get_num_interop_threads(),
        thread_env={k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
    )
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

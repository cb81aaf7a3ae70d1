"""What the bare loops share: their arguments, their data, the two ways of timing, the JSON line.

Each benchmarks/inside/bare_<framework>_loop.py is run with its framework environment's interpreter
(Singa's is Python 3.6), so this module is standard library only and Python 3.6 code. A bare
script supplies three functions for training and two for inference, and hands them to main():

- setup(args): the framework's own thread settings and import; returns (fw, info), info being
  what the JSON line reports (version, threads as the framework says it applied them);
- make_solo(fw, args, batches): the hand-written step on a model of its own; returns
  (step, batches, value, sync): step(*batch) runs one training step and returns its loss,
  value(loss) reads a loss as a float, sync() waits for queued work (no_sync where none is);
- on_adapter(fw, adapter, args, batches): the same hand-written step on the harness adapter's
  own model and optimizer, for --paired; returns (step, batches).

With --task inference (the harness's `task: inference`, its adapter's infer_step):

- infer_solo(fw, args, batches): the hand-written forward pass in evaluation mode without
  gradients, on a model of its own built from args.model (args.features: up to the pooled
  features); returns (step, batches, value, sync): step(x) runs one forward pass and returns its
  output (left on the device), value(output) its mean as a float, sync() as above;
- infer_on_adapter(fw, adapter, args, batches): the same forward pass on the adapter's own model,
  for --paired; returns (step, batches). The adapter's synchronize() closes every chunk, so the
  step must leave nothing it would not wait for.

batches is the training data as numpy arrays, one (x, y) pair per step, NCHW float32 and int64
labels, for the script to turn into its framework's tensors; the inference functions turn the
images alone into one-element tuples (x,), so that step(*batch) is step(x).
"""

import argparse
import importlib
import itertools
import json
import os
import resource
import tempfile
import time

# What the orchestrator sets for every worker with threads > 0 (orchestrator/launch/execute.py).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# The bare loops that can run on a GPU (their make_solo honours args.device).
CUDA_LOOPS = ("pytorch",)
TASKS = ("train", "inference")


def parse_args(description, argv=None):
    return make_parser(description).parse_args(argv)


def make_parser(description):
    """The arguments every bare loop takes (benchmarks/harness/overhead.py passes them all)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument(
        "--sequence-length", type=int, default=0, help="a language model's tokens a sequence (0: its context)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="0 = the framework's default")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (per pass with --paired)")
    parser.add_argument("--dataset-size", type=int, default=0, help="images generated (0: just enough)")
    parser.add_argument("--val-fraction", type=float, default=0.2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (the PyTorch loop only)")
    parser.add_argument(
        "--task",
        default="train",
        choices=TASKS,
        help="train: an optimizer step; inference: a forward pass in evaluation mode, no gradients",
    )
    parser.add_argument(
        "--features", action="store_true", help="with --task inference: the model up to its pooled features"
    )
    parser.add_argument("--paired", type=int, default=0, help="passes of the in-process comparison")
    parser.add_argument(
        "--chunk", type=int, default=0, help="steps per side and turn with --paired (0: from --chunk-seconds)"
    )
    parser.add_argument(
        "--chunk-seconds", type=float, default=0.02, help="about how long a chunk takes, from the warm-up"
    )
    return parser


def data_config(args):
    needed = args.steps * args.batch_size
    return {
        "dataset_size": args.dataset_size or int(needed / (1.0 - args.val_fraction)) + 2,
        "val_fraction": args.val_fraction,
        "image_size": args.image_size,
        "classes": args.classes,
        "seed": args.seed,
    }


def set_thread_variables(names, threads):
    """As the harness does, before the framework is imported: its pools are sized when it loads."""
    if threads > 0:
        for name in names:
            os.environ[name] = str(threads)
    return {name: os.environ[name] for name in names if name in os.environ}


def numpy_batches(args):
    """args.steps (x, y) batches of the harness's synthetic training images, in a seeded order."""
    import numpy as np

    from workers import data

    arrays = data.synthetic(data_config(args))
    needed = args.steps * args.batch_size
    if len(arrays["y_train"]) < needed:
        raise SystemExit(
            "{} training images are fewer than {} x {}".format(
                len(arrays["y_train"]), args.steps, args.batch_size
            )
        )
    order = np.random.RandomState(args.seed).permutation(len(arrays["y_train"]))[:needed]
    x, y = arrays["x_train"][order], arrays["y_train"][order]
    size = args.batch_size
    return [(x[i : i + size], y[i : i + size]) for i in range(0, needed, size)]


def solo(step, batches, warmup, value, sync, read="last_loss"):
    """Warm-up, then one timed pass over the batches, clocked as workers/runner.py clocks an epoch.

    The last step's result, read after the clock as value(result), is reported as `read`.
    """
    for i in range(warmup):
        step(*batches[i % len(batches)])
    sync()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    for batch in batches:
        last = step(*batch)
    sync()
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {
        "seconds": seconds,
        "steps": len(batches),
        "step_seconds": seconds / len(batches),
        read: value(last),
        "timed_minor_faults": faults,
    }


def make_adapter(framework, args):
    """The harness's adapter for this configuration: set up, built, data loaded."""
    adapter = build_adapter(framework, args)[0]
    return adapter, adapter.load_data()[0]


def build_adapter(framework, args):
    """The harness's adapter, set up and built (no data); and its trainable parameter count."""
    adapter_class = importlib.import_module("workers.adapters." + framework).Adapter
    config = dict(
        data_config(args), framework=framework, model=args.model, device=args.device, optimizer="sgd"
    )
    config.update(batch_size=args.batch_size, lr=args.lr, momentum=args.momentum, threads=args.threads)
    config.update(sequence_length=getattr(args, "sequence_length", 0) or None)
    if getattr(args, "task", "train") == "inference":
        # As the orchestrator's RunConfig hands them to the worker: task None is training.
        config.update(task="inference", features=bool(args.features) or None)
    adapter = adapter_class(config)
    adapter.setup()
    return adapter, adapter.build_model()


def _busy_seconds():
    """CPU seconds the whole machine has been busy (/proc/stat), and this process's own."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    me = resource.getrusage(resource.RUSAGE_SELF)
    return (sum(values[:8]) - idle) / tick, me.ru_utime + me.ru_stime


def _chunk_seconds(run, chunk, sync):
    """One chunk of steps by one side, clocked alone; it ends with the runner's synchronisation."""
    clock = time.perf_counter
    start = clock()
    for i in chunk:
        run(i)
    sync()
    return (clock() - start) / len(chunk)


def alternate(sides, steps, sync, args, passes):
    """Per-step seconds of each side, by chunk, every side taking the same steps in one process.

    sides: (name, run) pairs, run(i) taking training step i; sync() waits for queued work (MXNet's
    engine is asynchronous) and ends every chunk inside its clock. args.warmup steps by every side
    first, then `passes` passes over the steps in chunks of args.chunk steps (0: about
    args.chunk_seconds, from the fastest warm-up step). Returns
    {"steps", "chunk", "paired": {name: [[seconds per step of each chunk] per pass]},
    "other_load": [cores other processes used during each pass]}.
    """
    warm = []
    for i in range(args.warmup):
        for _, run in sides:
            warm.append(_chunk_seconds(run, [i % steps], sync))
    # Chunks short enough to see the same machine, long enough that what one step leaves behind
    # for the next (the event's write) stays within its own side.
    size = args.chunk or (max(1, int(round(args.chunk_seconds / min(warm)))) if warm else 1)
    orders = list(itertools.permutations(range(len(sides))))
    times = dict((name, []) for name, _ in sides)
    other_load = []  # per pass: cores that other processes used meanwhile
    turn = 0
    for _ in range(passes):
        for name, _ in sides:
            times[name].append([])
        start, (busy, mine) = time.monotonic(), _busy_seconds()
        for low in range(0, steps, size):
            chunk = range(low, min(low + size, steps))
            # Every order of the sides in turn: each follows each other one equally often, so
            # what a step leaves behind (caches, the kernel's work) lands evenly on all.
            for k in orders[turn % len(orders)]:
                name, run = sides[k]
                times[name][-1].append(_chunk_seconds(run, chunk, sync))
            turn += 1
        now, (busy_now, mine_now) = time.monotonic(), _busy_seconds()
        other_load.append(max(0.0, (busy_now - busy) - (mine_now - mine)) / (now - start))
    return {"steps": steps, "chunk": size, "paired": times, "other_load": other_load}


def epoch_steps(adapter, train_size, args, available):
    """Arrange the adapter's first epoch (as the runner orders it); the steps both sides take."""
    from workers import runner

    return min(available, adapter.prepare_epoch(runner.epoch_order(args.seed, 1, train_size)))


def step_name(args):
    """The adapter's step that the runner times for this task (workers/runner.py _step_function)."""
    return "infer_step" if getattr(args, "task", "train") == "inference" else "train_step"


def paired(adapter, train_size, bare_step, batches, args):
    """Per-step seconds of the harness's loop body, the adapter's step alone and the bare step, by
    chunk; the adapter's step is train_step, or infer_step with --task inference."""
    from workers.events import EventWriter

    steps = epoch_steps(adapter, train_size, args, len(batches))
    tmp = tempfile.mkdtemp(prefix="bench-bare-")
    events = EventWriter(os.path.join(tmp, "events.jsonl"))
    adapter_step, step_event = getattr(adapter, step_name(args)), events.step

    def harness(i):  # workers/runner.py's timed loop body
        adapter_step(i)
        step_event(1, i + 1)

    def alone(i):
        adapter_step(i)

    def bare(i):
        bare_step(*batches[i])

    sides = [("harness", harness), ("adapter", alone), ("bare", bare)]
    result = alternate(sides, steps, adapter.synchronize, args, args.paired)
    events.close()
    os.remove(os.path.join(tmp, "events.jsonl"))
    os.rmdir(tmp)
    result["step"] = step_name(args)
    return result


def main(framework, setup, make_solo, on_adapter, argv=None, infer_solo=None, infer_on_adapter=None):
    """Parse the arguments, measure (solo or --paired) and print one JSON line."""
    args = parse_args(f"A bare, hand-written {framework} training or inference loop.", argv)
    if args.device != "cpu" and framework not in CUDA_LOOPS:
        raise SystemExit(f"--device {args.device}: the bare {framework} loop runs on cpu only")
    if args.features and args.task != "inference":
        raise SystemExit("--features applies to --task inference (the pooled features, no training)")
    inference = args.task == "inference"
    if inference and (infer_solo is None or infer_on_adapter is None):
        raise SystemExit(f"--task inference: the bare {framework} loop has no inference step")
    fw, info = setup(args)
    batches = numpy_batches(args)
    if args.paired:
        adapter, train_size = make_adapter(framework, args)
        step, batches = (infer_on_adapter if inference else on_adapter)(fw, adapter, args, batches)
        result = paired(adapter, train_size, step, batches, args)
    elif inference:
        step, batches, value, sync = infer_solo(fw, args, batches)
        result = solo(step, batches, args.warmup, value, sync, read="last_output_mean")
    else:
        step, batches, value, sync = make_solo(fw, args, batches)
        result = solo(step, batches, args.warmup, value, sync)
    result["task"] = args.task
    result.update(info)
    print(json.dumps(result, sort_keys=True))
    return 0


def no_sync():
    """The step has finished when its call returns (synchronous CPU execution)."""

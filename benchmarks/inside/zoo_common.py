"""What the zoo-parity scripts share (zoo_<framework>.py here, run by frameworks/zoo_parity.py).

Each runs with its framework environment's interpreter, so this module is standard library only
and Python 3.6 code. It reuses the bare loops' machinery (benchmarks/inside/bare_common.py): their
arguments, the harness adapter built as the harness builds it, and the in-process alternation of
chunks. A zoo script supplies three functions and hands them to main():

- setup(args): the framework's thread settings and import, as its bare loop applies them
  (bare_<framework>_loop.setup); returns (fw, info);
- zoo_model(fw, args): the framework's own model-zoo model for args.model at args.image_size and
  args.classes, untrained (no weights are downloaded); returns (model, trainable parameters, the
  name it ships under);
- zoo_step(fw, model, args): the framework's idiomatic training step on that model (the bare
  loop's hand-written step) with SGD and momentum; step(x, y) takes the adapter's own batches.

The bench side is the adapter's own train_step, as the runner calls it; the zoo side is the zoo
model's step on the very same batch tensors. Both take the same steps, in chunks, in turn
(bare_common.alternate), so chunks a fraction of a second apart see the same machine.

With --ops, nothing is timed: after the warm-up, one step of each side runs under the framework's
operator profiler (the adapter's own tracer, as `trace: kernels` uses it), and the operators each
executed are printed with their call counts: where the two differ, operator by operator.
"""

import importlib
import json
import os
import shutil
import sys
import tempfile

from benchmarks.inside import bare_common


def parse_args(framework, argv=None):
    parser = bare_common.make_parser(f"Bench's port against {framework}'s own model-zoo model.")
    parser.add_argument(
        "--count-only",
        action="store_true",
        help="only the trainable parameter counts; --model may list several, comma-separated",
    )
    parser.add_argument(
        "--ops", action="store_true", help="no timing: the operators one step of each side runs, with calls"
    )
    parser.add_argument(
        "--resnet-v1", action="store_true", help="build bench's ResNet50 as v1 (see as_resnet_v1)"
    )
    return parser.parse_args(argv)


def as_resnet_v1(layers):
    """bench's ResNet (v1.5: a downsampling block's stride on its 3x3 convolution) as v1, the
    layout of Keras's and Gluon's ResNet50 (the stride on the block's first 1x1 convolution).
    Each 3x3 keeps its padding of 1, so every shape and parameter count stays the same."""
    import copy

    layers = copy.deepcopy(layers)
    for node in layers:
        if node["op"] != "residual":
            continue
        convs = [n for n in node["body"] if n["op"] == "conv"]
        if len(convs) == 3 and convs[1]["stride"] != 1:
            convs[0]["stride"], convs[1]["stride"] = convs[1]["stride"], 1
    return layers


def build_port(framework, args):
    """bench's port as the harness builds it, or as ResNet v1 with --resnet-v1."""
    adapter, port = bare_common.build_adapter(framework, args)
    if getattr(args, "resnet_v1", False):
        if args.model != "resnet50":
            raise SystemExit("--resnet-v1 is for --model resnet50")
        from workers import models

        arch = models.build_arch(args.model, args.classes, args.image_size)
        arch["layers"] = as_resnet_v1(arch["layers"])
        port = adapter.build(arch)
    return adapter, port


def counts(framework, fw, zoo_model, args):
    """One JSON line per model: bench's port (built by the adapter) and the zoo model's counts."""
    for name in args.model.split(","):
        args.model = name
        adapter, port = bare_common.build_adapter(framework, args)
        zoo, count, shipped = zoo_model(fw, args)
        line = {"model": name, "zoo": shipped, "port_parameters": port, "zoo_parameters": count}
        print(json.dumps(line, sort_keys=True))
        sys.stdout.flush()
        del adapter, zoo  # one pair at a time: VGG16's pair alone holds over 2 GB


def sides(framework, fw, zoo_model, zoo_step, args):
    """Both sides, built and fed: (adapter, steps, [("bench", run), ("zoo", run)], facts)."""
    adapter, port = build_port(framework, args)
    train_size = adapter.load_data()[0]
    model, count, shipped = zoo_model(fw, args)
    step = zoo_step(fw, model, args)
    steps = bare_common.epoch_steps(adapter, train_size, args, args.steps)
    batches = adapter.epoch_batches()  # the adapter's own tensors, in its own layout: the same input
    train_step = adapter.train_step

    def bench(i):
        train_step(i)

    def zoo(i):
        step(*batches[i])

    facts = {"zoo": shipped, "zoo_parameters": count, "port_parameters": port}
    return adapter, steps, [("bench", bench), ("zoo", zoo)], facts


def timed(framework, fw, zoo_model, zoo_step, args):
    adapter, steps, both, facts = sides(framework, fw, zoo_model, zoo_step, args)
    result = bare_common.alternate(both, steps, adapter.synchronize, args, args.paired)
    result.update(facts)
    return result


def operators(framework, fw, zoo_model, zoo_step, args, tracers):
    """The operators one warm step of each side runs, with their calls (no times: see --ops)."""
    adapter, steps, both, facts = sides(framework, fw, zoo_model, zoo_step, args)
    for i in range(max(1, args.warmup)):
        for _, run in both:
            run(i % steps)
        adapter.synchronize()
    for k, (name, run) in enumerate(both):  # (no zip(strict=) on Python 3.6)
        tracer = tracers[k]
        tracer.start()
        run(0)
        adapter.synchronize()
        tracer.stop()
        facts[name + "_ops"] = dict((r["name"], r["calls"]) for r in tracer.records())
    return facts


def make_tracers(framework):
    """Two of the adapter's own operator tracers, made before the framework is imported (MXNet's
    turns bulk execution off there, so that every operator is seen on its own)."""
    adapter_class = importlib.import_module("workers.adapters." + framework).Adapter
    return [adapter_class({}).tracer() for _ in range(2)]


def main(framework, setup, zoo_model, zoo_step, argv=None):
    """Parse the arguments, measure (or count) and print JSON lines."""
    args = parse_args(framework, argv)
    tracers = make_tracers(framework) if args.ops else None
    fw, info = setup(args)
    if args.count_only:
        counts(framework, fw, zoo_model, args)
        return 0
    if "," in args.model:
        raise SystemExit("one --model at a time, except with --count-only")
    if tracers:
        here, scratch = os.getcwd(), tempfile.mkdtemp(prefix="bench-zoo-ops-")
        os.chdir(scratch)  # where a tracer writes its files (TensorFlow's profiles)
        try:
            result = operators(framework, fw, zoo_model, zoo_step, args, tracers)
        finally:
            os.chdir(here)
            shutil.rmtree(scratch, ignore_errors=True)
    else:
        result = timed(framework, fw, zoo_model, zoo_step, args)
    result.update(info)
    print(json.dumps(result, sort_keys=True))
    return 0


def trainable(shapes):
    """The number of values in tensors of these shapes."""
    total = 0
    for shape in shapes:
        size = 1
        for dim in shape:
            size *= int(dim)
        total += size
    return total

"""What the zoo-parity scripts share (benchmarks/zoo_<framework>.py, run by benchmarks/zoo_parity.py).

Each runs with its framework environment's interpreter, so this module is standard library only
and Python 3.6 code. It reuses the bare loops' machinery (benchmarks/bare_common.py): their
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
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bare_common  # noqa: E402


def parse_args(framework, argv=None):
    parser = bare_common.make_parser(f"Bench's port against {framework}'s own model-zoo model.")
    parser.add_argument(
        "--count-only",
        action="store_true",
        help="only the trainable parameter counts; --model may list several, comma-separated",
    )
    return parser.parse_args(argv)


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


def timed(framework, fw, zoo_model, zoo_step, args):
    adapter, port = bare_common.build_adapter(framework, args)
    train_size = adapter.load_data()[0]
    model, count, shipped = zoo_model(fw, args)
    step = zoo_step(fw, model, args)
    steps = bare_common.epoch_steps(adapter, train_size, args, args.steps)
    batches = adapter._batches  # the adapter's own tensors, in its own layout: the same input
    train_step = adapter.train_step

    def bench(i):
        train_step(i)

    def zoo(i):
        step(*batches[i])

    result = bare_common.alternate(
        [("bench", bench), ("zoo", zoo)], steps, adapter.synchronize, args, args.paired
    )
    result.update(zoo=shipped, zoo_parameters=count, port_parameters=port)
    return result


def main(framework, setup, zoo_model, zoo_step, argv=None):
    """Parse the arguments, measure (or count) and print JSON lines."""
    args = parse_args(framework, argv)
    sys.path.insert(0, bare_common.REPO)
    fw, info = setup(args)
    if args.count_only:
        counts(framework, fw, zoo_model, args)
        return 0
    if "," in args.model:
        raise SystemExit("one --model at a time, except with --count-only")
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

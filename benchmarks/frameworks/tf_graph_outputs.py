"""Why the TensorFlow adapter's training graph returns its loss: the same step with and without outputs.

Run it from the project's .venv; it re-runs itself in the TensorFlow environment's interpreter.
In one process, on the adapter's own model, optimizer and batches, it times four tf.function steps
one step at a time, in a fresh random order every step:

- adapter: the adapter's training graph as it is (it returns the loss it also sums);
- no_output: that graph without the return (what the adapter did before, 1% to 6% slower);
- other_output: without the loss but returning an input, to show any output will do;
- bare: benchmarks/inside/bare_tensorflow_loop.py's hand-written step (apply_gradients, returns the loss).

It prints each side's median step time, the median of its per-step ratios to the bare step, and
its CPU time per step (the whole process's, all TensorFlow threads, over the same steps). With
--no-remapper, Grappler's remapper pass (op fusions) is off for all four; with --no-grappler, all of
Grappler's graph optimisations are. Nothing is asserted; the figures go to docs/performance.md.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time

# The repository root, on the framework interpreter's PYTHONPATH so that it finds this module
# (run again with -m) and `workers`.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = "benchmarks.frameworks.tf_graph_outputs"
INSIDE = "--inside-tensorflow"


def relaunch(argv: list[str]) -> int:
    """From the orchestrator's .venv: run this script in the TensorFlow environment."""
    from orchestrator.provision import envs

    python, why = envs.python_for("tensorflow")
    if python is None:
        raise SystemExit(f"tf_graph_outputs.py: no TensorFlow environment: {why}")
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.call([str(python), "-m", MODULE, INSIDE, *argv], env=env)


def variants(tf, adapter, args):
    """The four steps, each traced once here (untimed)."""
    from benchmarks.inside import bare_tensorflow_loop

    model, optimizer, loss_sum = adapter.model, adapter.optimizer, adapter.loss_sum()
    variables = model.trainable_variables
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits
    size = args.image_size
    signature = [
        tf.TensorSpec((args.batch_size, size, size, 3), tf.float32),
        tf.TensorSpec((args.batch_size,), tf.int64),
    ]

    def adapter_like(output):
        @tf.function(input_signature=signature, jit_compile=False)
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(xent(labels=y, logits=model(x, training=True)))
            optimizer.apply(tape.gradient(loss, variables), variables)
            loss_sum.assign_add(loss)
            if output == "input":
                return y
            return None

        return step

    return {
        "adapter": adapter.train_function(),
        "no_output": adapter_like(None),
        "other_output": adapter_like("input"),
        "bare": bare_tensorflow_loop.make_step(tf, model, optimizer),
    }


def inside(argv: list[str]) -> int:
    from benchmarks.inside import bare_common

    switches = {"--no-remapper": {"remapping": False}, "--no-grappler": {"disable_meta_optimizer": True}}
    options = {k: v for flag in argv if flag in switches for k, v in switches[flag].items()}
    args = bare_common.parse_args(__doc__.splitlines()[0], [a for a in argv if a not in switches])
    bare_common.set_thread_variables(bare_common.THREAD_VARIABLES, args.threads)
    if options:
        import tensorflow as tf

        tf.config.optimizer.set_experimental_options(options)
    adapter, train_size = bare_common.make_adapter("tensorflow", args)
    from workers import runner

    steps = adapter.prepare_epoch(runner.epoch_order(args.seed, 1, train_size))
    batches = adapter.epoch_batches()[:steps]
    steps_by_name = variants(adapter.tf, adapter, args)
    names = list(steps_by_name)
    for name in names:
        for i in range(args.warmup):
            steps_by_name[name](*batches[i % steps])
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu = dict.fromkeys(names, 0.0)
    rng = random.Random(args.seed)
    for _ in range(max(1, args.paired)):
        for batch in batches:
            order = names[:]
            rng.shuffle(order)
            for name in order:
                start, cpu_start = time.perf_counter(), time.process_time()
                steps_by_name[name](*batch)
                times[name].append(time.perf_counter() - start)
                cpu[name] += time.process_time() - cpu_start
    print(
        f"{args.model} {args.image_size}px, batch {args.batch_size}, {args.threads} threads, "
        f"tensorflow {adapter.tf.__version__}: {len(times['bare'])} steps per side, interleaved"
        + "".join(f", Grappler {key}={value}" for key, value in options.items())
    )
    print("\n| step | outputs | median ms/step | median per-step ratio to bare | CPU ms/step |")
    print("|---|---|---|---|---|")
    for name in names:
        outputs = len(steps_by_name[name].get_concrete_function(*batches[0]).outputs)
        ratio = statistics.median(a / b for a, b in zip(times[name], times["bare"], strict=True))
        median, cpu_ms = statistics.median(times[name]) * 1e3, cpu[name] / len(times[name]) * 1e3
        print(f"| {name} | {outputs} | {median:.3f} | {ratio:.4f} | {cpu_ms:.1f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == INSIDE:
        sys.exit(inside(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        print("Options: those of benchmarks/inside/bare_common.py (--model, --image-size, --batch-size,")
        print("--threads, --warmup, --steps, --paired N = passes over the steps),")
        print("--no-remapper, --no-grappler.")
        sys.exit(0)
    sys.exit(relaunch(sys.argv[1:]))

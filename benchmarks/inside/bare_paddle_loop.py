"""A bare, hand-written PaddlePaddle training or inference loop: the baseline for the harness's step.

Run it with the Paddle environment's interpreter (benchmarks/harness/overhead.py does); it prints one JSON
object. The model comes from the project's one translation of workers.models (the very network,
initialised the same) and the images from workers.data; the rest is Paddle's default dynamic graph
as written by hand: tensors made beforehand, forward / cross_entropy / backward /
optimizer.step / clear_grad with paddle.optimizer.Momentum over model.parameters(), threads set
by the variables Paddle reads at import (OMP_NUM_THREADS, FLAGS_paddle_num_threads), and
time.perf_counter around the timed steps.

With --paired N, the in-process comparison of benchmarks/inside/bare_common.py, the same step runs on the
adapter's own model and optimizer.

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the step is the eager forward pass of the model in eval() mode under paddle.no_grad(), returning
its output.
"""

import sys
import warnings

from benchmarks.inside import bare_common


def setup(args):
    from workers.adapters.paddle import env as paddle_env

    env = bare_common.set_thread_variables(
        bare_common.THREAD_VARIABLES + ("FLAGS_paddle_num_threads",), args.threads
    )
    # The same two notices the adapter silences, so neither side pays for printing them.
    for text in paddle_env.NOTICES:
        warnings.filterwarnings("ignore", message=text, category=UserWarning)
    import paddle

    paddle.set_device("cpu")
    threads = {
        "intra_op": paddle_env.omp_max_threads(),
        "paddle_num_threads_flag": paddle.get_flags(["FLAGS_paddle_num_threads"])["FLAGS_paddle_num_threads"],
        "env": env,
    }
    return paddle, {"version": paddle.__version__, "threads": threads}


def make_step(paddle, model, optimizer):
    """The hand-written training step (eager: each operator has run when its call returns)."""
    cross_entropy = paddle.nn.functional.cross_entropy

    def step(x, y):
        loss = cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad(set_to_zero=False)  # release the gradients rather than zero them
        return loss

    return step


def make_infer_step(paddle, model, forward):
    """The hand-written forward pass (eager: it has run when its call returns)."""
    model.eval()
    no_grad = paddle.no_grad

    def step(x):
        with no_grad():
            return forward(x)

    return step


def tensors(paddle, batches):
    place = paddle.CPUPlace()
    return [(paddle.to_tensor(x, place=place), paddle.to_tensor(y, place=place)) for x, y in batches]


def solo_model(paddle, args):
    """The model from the project's one translation, initialised as the adapter does."""
    from workers import models
    from workers.adapters.paddle.layers import sequential

    paddle.seed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    model = sequential(paddle, arch["layers"], tuple(arch["input"]))[0]
    model.train()
    return model


def make_solo(paddle, args, batches):
    model = solo_model(paddle, args)
    optimizer = paddle.optimizer.Momentum(
        learning_rate=args.lr, momentum=args.momentum, parameters=model.parameters()
    )
    step = make_step(paddle, model, optimizer)
    return step, tensors(paddle, batches), lambda loss: float(loss), bare_common.no_sync


def on_adapter(paddle, adapter, args, batches):
    return make_step(paddle, adapter.forward, adapter.optimizer), tensors(paddle, batches)


def infer_solo(paddle, args, batches):
    model = solo_model(paddle, args)
    images = [(x,) for x, _ in tensors(paddle, batches)]
    return make_infer_step(paddle, model, model), images, lambda out: float(out.mean()), bare_common.no_sync


def infer_on_adapter(paddle, adapter, args, batches):
    # adapter.forward is the model itself on the default (eager) path, as the harness steps it.
    step = make_infer_step(paddle, adapter.model, adapter.forward)
    return step, [(x,) for x, _ in tensors(paddle, batches)]


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "paddle", setup, make_solo, on_adapter, infer_solo=infer_solo, infer_on_adapter=infer_on_adapter
        )
    )

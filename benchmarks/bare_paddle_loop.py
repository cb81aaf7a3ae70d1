"""A bare, hand-written PaddlePaddle training loop: the baseline the harness's step time is held to.

Run it with the Paddle environment's interpreter (benchmarks/overhead.py does); it prints one JSON
object. The model comes from the project's one translation of workers.models (the very network,
initialised the same) and the images from workers.data; the rest is Paddle's default dynamic graph
as written by hand: tensors made beforehand, forward / cross_entropy / backward /
optimizer.step / clear_grad with paddle.optimizer.Momentum over model.parameters(), threads set
by the variables Paddle reads at import (OMP_NUM_THREADS, FLAGS_paddle_num_threads), and
time.perf_counter around the timed steps.

With --paired N, the in-process comparison of benchmarks/bare_common.py, the same step runs on the
adapter's own model and optimizer.
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bare_common  # noqa: E402


def setup(args):
    from workers.adapters import paddle as adapter_module

    env = bare_common.set_thread_variables(
        bare_common.THREAD_VARIABLES + ("FLAGS_paddle_num_threads",), args.threads
    )
    # The same two notices the adapter silences, so neither side pays for printing them.
    for text in adapter_module._NOTICES:
        warnings.filterwarnings("ignore", message=text, category=UserWarning)
    import paddle

    paddle.set_device("cpu")
    threads = {
        "intra_op": adapter_module._omp_max_threads(),
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


def tensors(paddle, batches):
    place = paddle.CPUPlace()
    return [(paddle.to_tensor(x, place=place), paddle.to_tensor(y, place=place)) for x, y in batches]


def make_solo(paddle, args, batches):
    from workers import models
    from workers.adapters.paddle import _sequential

    paddle.seed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size)
    model = _sequential(paddle, arch["layers"], tuple(arch["input"]))[0]
    model.train()
    optimizer = paddle.optimizer.Momentum(
        learning_rate=args.lr, momentum=args.momentum, parameters=model.parameters()
    )
    step = make_step(paddle, model, optimizer)
    return step, tensors(paddle, batches), lambda loss: float(loss), bare_common.no_sync


def on_adapter(paddle, adapter, args, batches):
    return make_step(paddle, adapter.forward, adapter.optimizer), tensors(paddle, batches)


if __name__ == "__main__":
    sys.exit(bare_common.main("paddle", setup, make_solo, on_adapter))

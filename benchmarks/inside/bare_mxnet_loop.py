"""A bare, hand-written Apache MXNet training or inference loop: the baseline for the harness's step.

Run it with the MXNet environment's interpreter (benchmarks/harness/overhead.py does); it prints one JSON
object. The Gluon network comes from the project's one translation of workers.models (the very
network, initialised the same) and the images from workers.data; the rest is Gluon as its users
write it for speed: the net and the loss hybridized with static_alloc and static_shape, a step of
autograd.record / forward / SoftmaxCrossEntropyLoss / backward / Trainer.step(batch_size) over
NDArrays made beforehand, threads set by MXNet's environment variables before the import, and
time.perf_counter around the timed steps, closed by mx.nd.waitall() (the engine is asynchronous).

With --paired N, the in-process comparison of benchmarks/inside/bare_common.py, the same step runs on the
adapter's own net and Trainer.

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the step is the hybridized net's own call outside autograd.record(), which is Gluon's predict mode
(autograd.is_training() is False: dropout off, batch norm on its running statistics, nothing
recorded), returning its output; the engine runs it asynchronously, so every timed stretch ends in
mx.nd.waitall(), as the harness's does.
"""

import sys

from benchmarks.inside import bare_common

# MXNet reads them once, when libmxnet loads: intra-op OpenMP threads and the engine's CPU workers.
MXNET_VARIABLES = ("MXNET_OMP_MAX_THREADS", "MXNET_CPU_WORKER_NTHREADS")


def setup(args):
    env = bare_common.set_thread_variables(bare_common.THREAD_VARIABLES + MXNET_VARIABLES, args.threads)
    import mxnet as mx

    mx.random.seed(args.seed)
    threads = {"intra_op": int(mx.base._LIB.omp_get_max_threads()), "env": env}
    return mx, {"version": mx.__version__, "threads": threads}


def make_step(mx, net, trainer, batch_size):
    """The hand-written training step; it queues work on the engine and returns."""
    loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    loss_fn.hybridize(static_alloc=True, static_shape=True)
    record = mx.autograd.record

    def step(x, y):
        with record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch_size)
        return loss

    return step


def make_infer_step(mx, net):
    """The hand-written forward pass: the net's call, which queues work on the engine and returns
    the output. Not recording is predict mode; an explicit autograd.predict_mode() would only add
    two engine-state calls per step."""
    if mx.autograd.is_recording() or mx.autograd.is_training():
        raise SystemExit("autograd is recording or in train mode: the forward pass would not predict")
    return net


def arrays(mx, batches):
    # Float labels: SoftmaxCrossEntropyLoss would cast integer ones on every step.
    cpu = mx.cpu()
    return [(mx.nd.array(x, ctx=cpu), mx.nd.array(y.astype("float32"), ctx=cpu)) for x, y in batches]


def solo_net(mx, args):
    """The Gluon net from the project's one translation, initialised and hybridized as the adapter does."""
    from workers import models
    from workers.adapters.mxnet import layers

    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    translator = layers.Translator(mx)
    net = translator.sequential(arch["layers"], tuple(arch["input"]))[0]
    net.initialize(mx.init.Zero(), ctx=mx.cpu())
    mx.random.seed(args.seed)
    for node, block, channels in translator.made:
        layers.initialise(mx, node, block, channels)
    net.hybridize(static_alloc=True, static_shape=True)
    return net


def make_solo(mx, args, batches):
    net = solo_net(mx, args)
    settings = {"learning_rate": args.lr, "momentum": args.momentum}
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", settings)
    step = make_step(mx, net, trainer, args.batch_size)
    return step, arrays(mx, batches), lambda loss: float(loss.mean().asscalar()), mx.nd.waitall


def on_adapter(mx, adapter, args, batches):
    return make_step(mx, adapter.net, adapter.trainer, args.batch_size), arrays(mx, batches)


def infer_solo(mx, args, batches):
    step = make_infer_step(mx, solo_net(mx, args))
    images = [(x,) for x, _ in arrays(mx, batches)]
    return step, images, lambda out: float(out.mean().asscalar()), mx.nd.waitall


def infer_on_adapter(mx, adapter, args, batches):
    return make_infer_step(mx, adapter.net), [(x,) for x, _ in arrays(mx, batches)]


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "mxnet", setup, make_solo, on_adapter, infer_solo=infer_solo, infer_on_adapter=infer_on_adapter
        )
    )

"""A bare, hand-written TensorFlow training or inference loop: the baseline for the harness's step.

Run it with the TensorFlow environment's interpreter (benchmarks/harness/overhead.py does); it prints one
JSON object. The Keras model comes from the project's one translation of workers.models (the very
network, initialised the same) and the images from workers.data; the rest is TensorFlow 2's
idiomatic fast path written by hand: a tf.function step (GradientTape, forward, sparse softmax
cross-entropy, optimizer.apply_gradients) over batches made into NHWC tensors beforehand, threads
set through tf.config.threading, time.perf_counter around the timed steps.

With --paired N, the in-process comparison of benchmarks/inside/bare_common.py, the same step is traced
over the adapter's own model and optimizer.

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the step is the Keras model called with training=False inside a tf.function (traced at its first
call, in the warm-up), returning its output: TensorFlow's own fast path for a forward pass
(model.predict would add a data pipeline and a host copy per batch).
"""

import os
import sys

from benchmarks.inside import bare_common


def setup(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as the adapter: keeps stderr readable
    env = bare_common.set_thread_variables(bare_common.THREAD_VARIABLES, args.threads)
    import tensorflow as tf

    threading = tf.config.threading
    if args.threads > 0:
        threading.set_intra_op_parallelism_threads(args.threads)
        threading.set_inter_op_parallelism_threads(args.threads)
    tf.config.set_visible_devices([], "GPU")
    threads = {
        "intra_op": threading.get_intra_op_parallelism_threads(),
        "inter_op": threading.get_inter_op_parallelism_threads(),
        "env": env,
    }
    return tf, {"version": tf.__version__, "threads": threads}


def make_step(tf, model, optimizer):
    """The hand-written training step: one graph, traced at its first call (in the warm-up)."""
    variables = model.trainable_variables
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(xent(labels=y, logits=model(x, training=True)))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    return step


def make_infer_step(tf, model):
    """The hand-written forward pass: one graph, evaluation mode, no tape; it returns the output."""

    @tf.function
    def step(x):
        return model(x, training=False)

    return step


def tensors(tf, batches):
    import numpy as np

    with tf.device("/CPU:0"):
        # NHWC, once and untimed, as the adapter does: TensorFlow's CPU convolutions are channels-last.
        return [
            (tf.constant(np.ascontiguousarray(x.transpose(0, 2, 3, 1))), tf.constant(y)) for x, y in batches
        ]


def solo_model(tf, args):
    """The Keras model from the project's one translation, initialised as the adapter does."""
    import keras

    from workers import models
    from workers.adapters.tensorflow.layers import Builder

    tf.random.set_seed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    return Builder(keras, args.seed).model(arch)[0]


def make_solo(tf, args, batches):
    import keras

    model = solo_model(tf, args)
    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=args.momentum)
    step = make_step(tf, model, optimizer)
    return step, tensors(tf, batches), lambda loss: float(loss.numpy()), bare_common.no_sync


def on_adapter(tf, adapter, args, batches):
    return make_step(tf, adapter.model, adapter.optimizer), tensors(tf, batches)


def infer_solo(tf, args, batches):
    step = make_infer_step(tf, solo_model(tf, args))
    images = [(x,) for x, _ in tensors(tf, batches)]
    return step, images, lambda out: float(tf.reduce_mean(out).numpy()), bare_common.no_sync


def infer_on_adapter(tf, adapter, args, batches):
    return make_infer_step(tf, adapter.model), [(x,) for x, _ in tensors(tf, batches)]


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "tensorflow",
            setup,
            make_solo,
            on_adapter,
            infer_solo=infer_solo,
            infer_on_adapter=infer_on_adapter,
        )
    )

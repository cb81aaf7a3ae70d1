"""Bench's TensorFlow port against keras.applications, in one process (benchmarks/frameworks/zoo_parity.py).

Run with the TensorFlow environment's interpreter. The zoo side is keras.applications' model
(weights=None: nothing is downloaded; classifier_activation=None, so that it returns logits for
the same loss as the adapter's), trained by the bare loop's hand-written tf.function step
(benchmarks/inside/bare_tensorflow_loop.py) with Keras's SGD and momentum, on the adapter's own NHWC
batch tensors. keras.applications ships no AlexNet.
"""

import sys

from benchmarks.inside import bare_tensorflow_loop, zoo_common

ZOO = {"resnet50": "ResNet50", "mobilenet_v2": "MobileNetV2", "vgg16": "VGG16"}


def zoo_model(tf, args):
    import keras

    if args.model not in ZOO:
        raise SystemExit(f"keras.applications ships no {args.model}")
    size = args.image_size
    build = getattr(keras.applications, ZOO[args.model])
    model = build(weights=None, input_shape=(size, size, 3), classes=args.classes, classifier_activation=None)
    count = zoo_common.trainable(v.shape for v in model.trainable_weights)
    return model, count, "keras.applications." + ZOO[args.model]


def zoo_step(tf, model, args):
    import keras

    optimizer = keras.optimizers.SGD(learning_rate=args.lr, momentum=args.momentum)
    return bare_tensorflow_loop.make_step(tf, model, optimizer)


if __name__ == "__main__":
    sys.exit(zoo_common.main("tensorflow", bare_tensorflow_loop.setup, zoo_model, zoo_step))

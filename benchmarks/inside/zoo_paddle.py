"""Bench's Paddle port against paddle.vision.models, in one process (benchmarks/frameworks/zoo_parity.py).

Run with the Paddle environment's interpreter. The zoo side is paddle.vision.models' model
(pretrained=False: nothing is downloaded), in train mode, trained by the bare loop's hand-written
eager step (benchmarks/inside/bare_paddle_loop.py) with paddle.optimizer.Momentum, on the adapter's own
tensor batches. Paddle's AlexNet takes 224 px images only (its first dense layer has a fixed
9216 = 256 x 6 x 6 inputs, with no adaptive pooling before it): other sizes are refused up front.
"""

import sys

from benchmarks.inside import bare_paddle_loop, zoo_common

ZOO = ("alexnet", "resnet50", "vgg16", "mobilenet_v2")


def zoo_model(paddle, args):
    if args.model not in ZOO:
        raise SystemExit(f"paddle.vision.models ships no {args.model}")
    model = getattr(paddle.vision.models, args.model)(pretrained=False, num_classes=args.classes)
    count = zoo_common.trainable(p.shape for p in model.parameters() if p.trainable and not p.stop_gradient)
    if not args.count_only:
        model.eval()
        size = args.image_size
        try:
            with paddle.no_grad():
                model(paddle.zeros([1, 3, size, size], dtype="float32"))
        except ValueError as exc:
            why = str(exc).strip().splitlines()[0]
            raise SystemExit(f"paddle.vision.models.{args.model} cannot take {size} px: {why}") from exc
    model.train()
    return model, count, "paddle.vision.models." + args.model


def zoo_step(paddle, model, args):
    optimizer = paddle.optimizer.Momentum(
        learning_rate=args.lr, momentum=args.momentum, parameters=model.parameters()
    )
    return bare_paddle_loop.make_step(paddle, model, optimizer)


if __name__ == "__main__":
    sys.exit(zoo_common.main("paddle", bare_paddle_loop.setup, zoo_model, zoo_step))

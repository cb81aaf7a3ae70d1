"""Bench's MXNet port against Gluon's model zoo, in one process (benchmarks/frameworks/zoo_parity.py).

Run with the MXNet environment's interpreter. The zoo side is mxnet.gluon.model_zoo.vision's
model (pretrained=False: nothing is downloaded), initialised (Xavier), its deferred shapes
inferred by one forward pass, hybridized with static_alloc and static_shape as the adapter's
net is, and trained by the bare loop's hand-written step (benchmarks/inside/bare_mxnet_loop.py) with a
Trainer set as the adapter's (SGD, momentum, no weight decay, no kvstore), on the adapter's own
NDArray batches. Gluon's zoo has ResNet50 v1 only (resnet50_v1b, the v1.5 stride placement, is
GluonCV's, not MXNet's).
"""

import sys

from benchmarks.inside import bare_mxnet_loop, zoo_common

ZOO = {"alexnet": "alexnet", "resnet50": "resnet50_v1", "vgg16": "vgg16", "mobilenet_v2": "mobilenetv2_1.0"}


def zoo_model(mx, args):
    from mxnet.gluon.model_zoo import vision

    if args.model not in ZOO:
        raise SystemExit(f"mxnet.gluon.model_zoo.vision ships no {args.model}")
    net = vision.get_model(ZOO[args.model], classes=args.classes, pretrained=False)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    size = args.image_size
    net(mx.nd.zeros((1, 3, size, size), ctx=mx.cpu()))  # deferred initialisation: shapes from the input
    mx.nd.waitall()
    params = net.collect_params().values()
    count = zoo_common.trainable(p.shape for p in params if p.grad_req != "null")
    net.hybridize(static_alloc=True, static_shape=True)
    return net, count, "mxnet.gluon.model_zoo.vision." + ZOO[args.model]


def zoo_step(mx, net, args):
    settings = {"learning_rate": args.lr, "momentum": args.momentum, "wd": 0.0}
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", settings, kvstore=None)
    return bare_mxnet_loop.make_step(mx, net, trainer, args.batch_size)


if __name__ == "__main__":
    sys.exit(zoo_common.main("mxnet", bare_mxnet_loop.setup, zoo_model, zoo_step))

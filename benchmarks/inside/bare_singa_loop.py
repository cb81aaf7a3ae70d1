"""A bare, hand-written Apache Singa training or inference loop: the baseline for the harness's step.

Python 3.6 code (singa 3.0.0.dev1 is a cp36 wheel). Run it with the Singa environment's interpreter
(benchmarks/harness/overhead.py does); it prints one JSON object. The layers come from the project's one
translation of workers.models, which carries the adapter's mends of this wheel's binding (without
them the loss, batch norm and momentum SGD fail; docs/frameworks/singa.md); the rest is Singa's own
API as its examples use it: a model.Model subclass whose train_one_batch is forward,
softmax_cross_entropy and opt.SGD, compiled with use_graph=True, so that every step after the
first replays the buffered graph. Each step copies its batch into the graph's input tensors with
Tensor.copy_data from tensors made beforehand (the wheel's numpy copy, copy_from_numpy, is
broken: the batches are made with the adapter's HostIO, untimed), then calls the model.

With --paired N, the in-process comparison of benchmarks/inside/bare_common.py, the bare step runs on the
adapter's own model: a device holds one buffered graph, so a second model beside the adapter's
cannot be compiled. Its graph also adds the loss into the adapter's loss sum, one small operator.

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the model is compiled for evaluation (is_train=False, no graph) and called in eval mode, as Singa's
examples test a model: Model.__call__ then runs forward() alone, eagerly, with autograd.training
off (batch norm on its running statistics, nothing kept for a backward pass). Each step copies its
batch into the model's input tensor with Tensor.copy_data first, as the training step does; the
harness's infer_step makes the same copy from its numpy batch (HostIO.put).
"""

import sys

from benchmarks.inside import bare_common


def setup(args):
    bare_common.set_thread_variables(bare_common.THREAD_VARIABLES, args.threads)
    from workers.adapters.singa import adapter as adapter_module
    from workers.adapters.singa import env as singa_env

    sg = adapter_module.import_singa()  # import singa, with the binding's mends
    threads = singa_env.threads_report(args.threads)
    return sg, {"version": sg["version"], "threads": threads}


def bare_model_class(sg):
    from singa import autograd, model

    class BareNet(model.Model):
        def __init__(self, layers, optimizer):
            super().__init__()
            self.steps, self.optimizer = layers, optimizer

        def forward(self, x):
            for layer in self.steps:
                x = layer(x)
            return x

        def train_one_batch(self, x, y):  # training only: eval mode calls forward() alone
            out = self.forward(x)
            loss = autograd.softmax_cross_entropy(out, y)
            self.optimizer(loss)
            return out, loss

    return BareNet


def device_tensors(sg, dev, batches):
    """The batches as tensors on the device (made untimed, through the adapter's HostIO)."""
    from workers.adapters.singa.binding import HostIO

    made = []
    for x, y in batches:
        tx = sg["tensor"].Tensor(x.shape, dev, sg["tensor"].float32)
        ty = sg["tensor"].Tensor(y.shape, dev, sg["tensor"].int32)
        HostIO.put(tx, x)
        HostIO.put(ty, y.astype("int32"))
        made.append((tx, ty))
    return made


def make_step(net, tx, ty):
    """The hand-written step: the batch into the graph's inputs, then one replay of the graph."""

    def step(x, y):
        tx.copy_data(x)
        ty.copy_data(y)
        return net(tx, ty)

    return step


def make_infer_step(net, tx):
    """The hand-written forward pass: the batch into the model's input, then the eval-mode call."""
    net.eval()

    def step(x):
        tx.copy_data(x)
        return net(tx)

    return step


def make_solo(sg, args, batches):
    from workers import models
    from workers.adapters.singa import layers as singa_layers
    from workers.adapters.singa.binding import HostIO

    dev = sg["device"].get_default_device()
    dev.SetRandSeed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size)
    translator = singa_layers.Translator(sg, dev, args.batch_size)
    layers = translator.layers(arch["layers"], tuple(arch["input"]))[0]
    tx, ty = device_tensors(sg, dev, batches[:1])[0]
    net = bare_model_class(sg)(layers, sg["opt"].SGD(lr=args.lr, momentum=args.momentum))
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    translator.initialise(args.seed)  # the parameters exist only after compile()
    step = make_step(net, tx, ty)
    return step, device_tensors(sg, dev, batches), lambda out: float(HostIO.get(out[1])[0]), dev.Sync


def on_adapter(sg, adapter, args, batches):
    return make_step(adapter.net, *adapter.graph_inputs()), device_tensors(sg, adapter.dev, batches)


def infer_solo(sg, args, batches):
    from workers import models
    from workers.adapters.singa import layers as singa_layers
    from workers.adapters.singa.binding import HostIO

    dev = sg["device"].get_default_device()
    dev.SetRandSeed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    translator = singa_layers.Translator(sg, dev, args.batch_size)
    layers = translator.layers(arch["layers"], tuple(arch["input"]))[0]
    tx = device_tensors(sg, dev, batches[:1])[0][0]
    net = bare_model_class(sg)(layers, None)  # no optimizer: nothing is trained
    net.compile([tx], is_train=False, use_graph=False, sequential=False)
    translator.initialise(args.seed)  # the parameters exist only after compile()
    images = [(x,) for x, _ in device_tensors(sg, dev, batches)]
    return make_infer_step(net, tx), images, lambda out: float(HostIO.get(out).mean()), dev.Sync


def infer_on_adapter(sg, adapter, args, batches):
    images = [(x,) for x, _ in device_tensors(sg, adapter.dev, batches)]
    return make_infer_step(adapter.net, adapter.graph_inputs()[0]), images


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "singa", setup, make_solo, on_adapter, infer_solo=infer_solo, infer_on_adapter=infer_on_adapter
        )
    )

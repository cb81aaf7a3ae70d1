"""A bare, hand-written Apache Singa training loop: the baseline the harness's step time is held to.

Python 3.6 code (singa 3.0.0.dev1 is a cp36 wheel). Run it with the Singa environment's interpreter
(benchmarks/overhead.py does); it prints one JSON object. The layers come from the project's one
translation of workers.models, which carries the adapter's mends of this wheel's binding (without
them the loss, batch norm and momentum SGD fail; docs/frameworks/singa.md); the rest is Singa's own
API as its examples use it: a model.Model subclass whose train_one_batch is forward,
softmax_cross_entropy and opt.SGD, compiled with use_graph=True, so that every step after the
first replays the buffered graph. Each step copies its batch into the graph's input tensors with
Tensor.copy_data from tensors made beforehand (the wheel's numpy copy, copy_from_numpy, is
broken: the batches are made with the adapter's HostIO, untimed), then calls the model.

With --paired N, the in-process comparison of benchmarks/bare_common.py, the bare step runs on the
adapter's own model: a device holds one buffered graph, so a second model beside the adapter's
cannot be compiled. Its graph also adds the loss into the adapter's loss sum, one small operator.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bare_common  # noqa: E402


def setup(args):
    bare_common.set_thread_variables(bare_common.THREAD_VARIABLES, args.threads)
    from workers.adapters import singa as adapter_module

    sg = adapter_module._import()  # import singa, with the binding's mends
    threads = adapter_module._threads_report(args.threads)
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

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = autograd.softmax_cross_entropy(out, y)
            self.optimizer(loss)
            return out, loss

    return BareNet


def device_tensors(sg, dev, batches):
    """The batches as tensors on the device (made untimed, through the adapter's HostIO)."""
    from workers.adapters.singa_binding import HostIO

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


def make_solo(sg, args, batches):
    from workers import models
    from workers.adapters import singa as adapter_module
    from workers.adapters.singa_binding import HostIO

    dev = sg["device"].get_default_device()
    dev.SetRandSeed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size)
    translator = adapter_module._Translator(sg, dev, args.batch_size)
    layers = translator.layers(arch["layers"], tuple(arch["input"]))[0]
    tx, ty = device_tensors(sg, dev, batches[:1])[0]
    net = bare_model_class(sg)(layers, sg["opt"].SGD(lr=args.lr, momentum=args.momentum))
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    translator.initialise(args.seed)  # the parameters exist only after compile()
    step = make_step(net, tx, ty)
    return step, device_tensors(sg, dev, batches), lambda out: float(HostIO.get(out[1])[0]), dev.Sync


def on_adapter(sg, adapter, args, batches):
    return make_step(adapter.net, adapter._tx, adapter._ty), device_tensors(sg, adapter.dev, batches)


if __name__ == "__main__":
    sys.exit(bare_common.main("singa", setup, make_solo, on_adapter))

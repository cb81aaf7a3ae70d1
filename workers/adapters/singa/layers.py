"""The model definition (workers.models) translated into singa layers, for the Singa adapter, and
the classes built on singa's own that mend what its wheel gets wrong (the adapter's docstring and
docs/frameworks/singa.md name each error). Python 3.6.

singa is not imported here: the adapter imports it once and hands its modules in.
"""

from workers import models
from workers.adapters import base
from workers.adapters.singa import attention
from workers.adapters.singa.binding import HostIO


def classes(autograd, layer, model, wrap):
    """Dropout, batch norm and the Model subclasses, defined once singa is imported."""

    class Dropout(autograd.Dropout):
        """autograd.Dropout with the inverted-dropout scale 1 / (1 - ratio)."""

        def forward(self, x):
            if autograd.training:
                self.scale = 1.0 / (1.0 - self.ratio)
                self.mask = wrap.Tensor(list(x.shape()), x.device())
                wrap.Bernoulli(1.0 - self.ratio, self.mask)
                x = wrap.MultFloat(wrap.__mul__(self.mask, x), self.scale)
            return x

    class BatchNormOp(autograd._BatchNorm2d):
        """Singa's CPU batch norm, with its vector-returning kernels unpacked."""

        def forward(self, x, scale, bias):
            if not autograd.training:
                return wrap.CpuBatchNormForwardInference(
                    self.handle, x, scale, bias, self.running_mean, self.running_var)
            y, mean, var = HostIO.unpack(wrap.CpuBatchNormForwardTraining(
                self.handle, x, scale, bias, self.running_mean, self.running_var), 3)
            self.cache = (x, scale, mean, var, y, bias)
            return y

        def backward(self, dy):
            x, scale, mean, var, y, bias = self.cache
            return tuple(HostIO.unpack(wrap.CpuBatchNormBackwardx(
                self.handle, y, dy, x, scale, bias, mean, var), 3))

    class BatchNorm(layer.BatchNorm2d):
        def forward(self, x):
            return BatchNormOp(self.handle, self.running_mean, self.running_var)(
                x, self.scale, self.bias)[0]

    class ConvOp(autograd._Conv2d):
        """A bias-free convolution that reads a zero bias owned by its layer.

        autograd._Conv2d makes a temporary zero bias tensor for every bias-free forward; a graph
        buffered from it replays a read of that freed tensor and segfaults on the first step.
        """

        def __init__(self, handle, zero):
            super(ConvOp, self).__init__(handle)
            self.zero = zero

        def forward(self, x, W):
            if autograd.training:
                self.inputs = (x, W)
            return wrap.CpuConvForward(x, W, self.zero, self.handle)

    class Conv(layer.Conv2d):
        zero = None

        def forward(self, x):
            if self.bias:
                return autograd.conv2d(self.handle, x, self.W, self.b)
            if self.zero is None:
                graph = x.device.graph_enabled()
                x.device.EnableGraph(False)  # made now, not buffered
                self.zero = wrap.Tensor((self.nb_kernels,), x.device)
                self.zero.SetFloatValue(0.0)
                x.device.EnableGraph(graph)
            return ConvOp(self.handle, self.zero)(x, self.W)[0]

    class Net(model.Model):
        """The translated layer list as a Model: its train_one_batch is what the graph buffers."""

        def __init__(self, steps, optimizer, loss_sum, flat=None):
            super(Net, self).__init__()
            self.steps, self.optimizer, self.loss_sum = steps, optimizer, loss_sum
            self.flat = flat  # a language model's (N * L, vocabulary): the loss over every position

        def forward(self, x):
            for step in self.steps:
                x = step(x)
            return x

        def train_one_batch(self, x, y):
            out = self.forward(x)
            if self.flat is not None:
                out = autograd.reshape(out, self.flat)
            loss = autograd.softmax_cross_entropy(out, y)
            self.optimizer(loss)
            self.loss_sum += loss  # buffered too: the loss never leaves the device per step
            return out, loss

    class Forward(model.Model):
        """The net's eval-mode forward as a Model, so that Singa buffers it as a graph.

        Singa buffers only a Model's train_one_batch, and only while that Model is training:
        this one's train_one_batch is the forward alone, called with the Model in training
        (so it buffers) and autograd.training off (dropout off, batch norm on its running
        statistics, nothing kept for backward). Every call replays the graph on the input tensor
        and returns the same output tensor, refilled.
        """

        def __init__(self, net):
            super(Forward, self).__init__()
            self.net = net
            self.graph(True, False)

        def forward(self, x):
            return self.net.forward(x)

        def train_one_batch(self, x):
            return self.net.forward(x)

        def __call__(self, x):
            self.training, autograd.training = True, False
            return self.train_one_batch(x)

    return {"Conv": Conv, "Dropout": Dropout, "BatchNorm": BatchNorm, "Net": Net, "Forward": Forward}


# -- translation of workers.models data into singa -----------------------------------------


class Translator(object):
    """Turns layer lists into callables on singa tensors and remembers what INIT applies to."""

    def __init__(self, sg, dev, batch_size):
        self.sg, self.dev, self.batch_size = sg, dev, batch_size
        self.made = []  # (node, layer object or attention.Parts, input channels) for initialise()
        self.by_path = {}  # node path (workers.models.pure's) -> (node, layer object or Parts)
        self.nodes = attention.Nodes(self)
        self._path = ""

    def layers(self, layers, shape, path=""):
        steps = []
        for i, node in enumerate(layers):
            self._path = "{}{}".format(path, i)
            steps.append(self.step(node, shape))
            shape = models.out_shape(node, shape)
            self.fits((self.batch_size,) + tuple(shape), "the output of {} node {}".format(
                node["op"], self._path))
        return steps, shape

    def fits(self, shape, what):
        """Unsupported where a float32 tensor of this shape passes singa's 2 GiB limit: its Device
        counts a block's bytes in an int and aborts the process on a larger one (device.cc: "Check
        failed: size >= 0 ... the size is too large", seen with gpt2_small at 32 x 1024 tokens)."""
        size = 4
        for n in shape:
            size *= int(n)
        if size > _MAX_BLOCK:
            raise base.Unsupported(
                "{} at batch size {} is a float32 tensor {} of {:,} bytes, above the {:,} "
                "(2 GiB - 1) singa {} can allocate: its Device counts a block's bytes in an int "
                "and aborts on a larger one (device.cc 'size is too large'); fewer samples "
                "(or tokens) per batch fit".format(what, self.batch_size, "x".join(str(n) for n in shape), size,
                              _MAX_BLOCK, self.sg["version"]))

    def step(self, node, shape):
        sg, op = self.sg, node["op"]
        ag, layer = sg["autograd"], sg["layer"]
        if op in attention.OPS:
            return self.nodes.step(node, shape)
        if op == "conv":
            if node["groups"] != 1:
                raise base.Unsupported(
                    "grouped convolution (groups={}): singa {}'s Conv2d raises 'Not implemented "
                    "yet' for group != 1 on CPU, and its oneDNN CPU kernel is built for groups=1 "
                    "only".format(node["groups"], sg["version"]))
            return self.keep(node, shape, sg["Conv"](
                node["out"], node["kernel"], stride=node["stride"], padding=node["padding"],
                bias=node["bias"]))
        if op == "dense":
            return self.dense(node, shape, layer.Linear(node["out"], bias=node["bias"]))
        if op == "bn":
            if abs(node["eps"] - 1e-5) > 1e-12:
                raise base.Unsupported("batch norm eps {}: singa's CPU kernel fixes it at 1e-5".format(
                    node["eps"]))
            # Singa's CPU factor is the new batch's weight: PyTorch's momentum convention.
            return self.keep(node, shape, sg["BatchNorm"](momentum=node["momentum"]))
        if op == "relu":
            return ag.relu
        if op == "relu6":
            return lambda x: ag.clip(x, 0.0, 6.0)
        if op == "maxpool":
            return layer.MaxPool2d(node["kernel"], node["stride"], node["padding"])
        if op == "adaptive_avgpool":
            return self.adaptive_avgpool(shape, node["size"])
        if op == "global_avgpool":
            return lambda x: ag.flatten(ag.globalaveragepool(x), 1)
        if op == "flatten":
            return lambda x: ag.flatten(x, 1)
        if op == "dropout":
            dropout, ratio = sg["Dropout"], node["p"]
            return lambda x: dropout(ratio)(x)[0]
        if op == "residual":
            return self.residual(node, shape)
        if op == "concat":
            return self.concat(node, shape)
        raise base.not_supported("layer op", op, "Singa")

    def keep(self, node, shape, made):
        # a convolution's input channels come first; every other node acts on the last axis
        channels = shape[0] if node["op"] in ("conv", "patch_embed") else shape[-1]
        self.made.append((node, made, channels))
        self.by_path[self._path] = (node, made)
        return made

    def dense(self, node, shape, linear):
        """layer.Linear on the last axis: an (N, L, D) input as (N * L, D) rows."""
        self.keep(node, shape, linear)
        if len(shape) == 1:
            return linear
        ag, rows = self.sg["autograd"], self.batch_size
        for size in shape[:-1]:
            rows *= size
        out = (self.batch_size,) + tuple(shape[:-1]) + (node["out"],)
        return lambda x: ag.reshape(linear(ag.reshape(x, (rows, shape[-1]))), out)

    def residual(self, node, shape):
        path = self._path
        body = self.layers(node["body"], shape, path + ".body.")[0]
        shortcut = self.layers(node["shortcut"], shape, path + ".shortcut.")[0]
        ag, post = self.sg["autograd"], node["post"]

        def run(x):
            out, short = x, x
            for step in body:
                out = step(out)
            for step in shortcut:
                short = step(short)
            out = ag.add(out, short)
            return ag.relu(out) if post == "relu" else out

        return run

    def concat(self, node, shape):
        if not hasattr(self.sg["wrap"], "VecTensor"):
            raise base.Unsupported(
                "concatenation (Inception's module): singa {}'s autograd.cat passes its inputs to "
                "ConcatOn as a singa_wrap.VecTensor, which this wheel's binding lacks (no "
                "std::vector<Tensor> typemap: ConcatOn refuses a list too)".format(self.sg["version"]))
        branches = [self.layers(branch, shape)[0] for branch in node["branches"]]
        cat = self.sg["autograd"].cat

        def run(x):
            outs = []
            for steps in branches:
                out = x
                for step in steps:
                    out = step(out)
                outs.append(out)
            return cat(outs, 1)

        return run

    def adaptive_avgpool(self, shape, size):
        """PyTorch's adaptive average pooling as one product with a fixed (H*W, size*size) matrix.

        Singa has no adaptive pooling; its bins (start floor(i*H/s), end ceil((i+1)*H/s)) need not
        be equal or disjoint, which AvgPool2d cannot express (e.g. AlexNet's 1x1 map to 6x6).
        """
        import numpy as np

        channels, height, width = shape
        if (height, width) == (size, size):
            return lambda x: x
        pool = np.zeros((height * width, size * size), dtype=np.float32)
        for i, (top, bottom) in enumerate(models.pool_bins(height, size)):
            rows = range(top, bottom)
            for j, (left, right) in enumerate(models.pool_bins(width, size)):
                cols = range(left, right)
                for r in rows:
                    for c in cols:
                        pool[r * width + c, i * size + j] = 1.0 / (len(rows) * len(cols))
        matrix = self.sg["tensor"].Tensor(pool.shape, self.dev, requires_grad=False, stores_grad=False)
        HostIO.put(matrix, pool)
        ag, n = self.sg["autograd"], self.batch_size

        def run(x):
            flat = ag.reshape(x, (n * channels, height * width))
            return ag.reshape(ag.matmul(flat, matrix), (n, channels, size, size))

        return run

    def initialise(self, seed):
        """Apply models.INIT to every parameter (seeded); name them; return (params, states)."""
        self.dev.SetRandSeed(seed)
        params, states = [], []
        for index, (node, made, in_channels) in enumerate(self.made):
            bn = node["op"] == "bn"
            fans = None if bn else models.fans(node, in_channels)
            for rule_name, rule in sorted(models.node_init(node).items()):
                for part, tensor in enumerate(_tensors(made, bn)[rule_name]):
                    if tensor is None:
                        continue
                    _apply_rule(tensor, rule, fans)
                    tensor.name = "{}.{}.{}.{}".format(index, node["op"], rule_name, part)
                    params.append((tensor.name, tensor))
                    states.append(tensor)
            if bn:
                made.running_mean.set_value(0.0)
                made.running_var.set_value(1.0)
                states += [made.running_mean, made.running_var]
        return params, states


_MAX_BLOCK = 2 ** 31 - 1


def _tensors(made, bn):
    """{INIT rule name: [tensor or None]} of a translated node."""
    if isinstance(made, attention.Parts):
        return made.tensors()
    if bn:
        return {"weight": [made.scale], "bias": [made.bias]}
    return {"weight": [getattr(made, "W", None)], "bias": [getattr(made, "b", None)]}


def _apply_rule(tensor, rule, fans):
    if rule["distribution"] == "constant":
        tensor.set_value(rule["value"])
    elif rule["distribution"] == "normal":
        tensor.gaussian(rule["mean"], models.init_scale(rule["scale"], *fans))
    elif rule["distribution"] == "uniform":
        bound = models.init_scale(rule["scale"], *fans)
        tensor.uniform(-bound, bound)
    else:
        raise ValueError("unknown INIT distribution {!r}".format(rule["distribution"]))

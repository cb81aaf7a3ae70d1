"""The model definition (workers.models) translated into Gluon blocks, for the MXNet adapter.

mxnet is not imported here at module level: the adapter hands it in after setup(), and the
HybridBlocks bench adds are made on first use. Every layer is told its input size, so nothing is
deferred: shapes and parameter counts are known without a forward pass.
"""

from workers import models
from workers.adapters import base
from workers.adapters.mxnet import attention

_BLOCKS = {}  # the HybridBlock classes made once mxnet is imported


class Translator(object):
    """Turns layer lists into HybridSequentials and remembers the blocks INIT applies to."""

    def __init__(self, mx):
        self.mx = mx
        # (node, [(INIT rule name, Parameter)], input channels) of every layer with parameters:
        # for initialise()
        self.made = []
        self.blocks = {}  # {node path (workers.models.pure's): block}, for load_canonical
        self.tables = []  # the nn.Embedding blocks made so far: the one a tied_output shares

    def sequential(self, layers, shape, path=""):
        """A HybridSequential for a layer list, and its output shape."""
        seq = self.mx.gluon.nn.HybridSequential()
        for i, node in enumerate(layers):
            key = "{}{}".format(path, i)
            made = self._blocks(node, shape, key)
            if len(made) == 1:
                self.blocks[key] = made[0]
            for block in made:
                seq.add(block)
            shape = models.out_shape(node, shape)
        return seq, shape

    def _blocks(self, node, shape, key):
        """The Gluon blocks of one node (every layer told its input size: no deferred init)."""
        nn, op = self.mx.gluon.nn, node["op"]
        if op in attention.OPS:
            return [attention.block(self, node, shape)]
        if op == "conv":
            block = nn.Conv2D(node["out"], node["kernel"], node["stride"], node["padding"],
                              groups=node["groups"], use_bias=node["bias"], in_channels=shape[0])
        elif op == "dense":  # on the last axis: each position of an (L, D) input
            block = nn.Dense(node["out"], use_bias=node["bias"], in_units=shape[-1], flatten=len(shape) == 1)
        elif op == "bn":
            # MXNet's momentum weighs the running value, PyTorch's the new batch statistic.
            block = nn.BatchNorm(axis=1, momentum=1.0 - node["momentum"], epsilon=node["eps"],
                                 in_channels=shape[0])
        elif op == "embedding":
            block = nn.Embedding(node["vocab"], node["dim"])
            self.tables.append(block)
        elif op == "gru":
            # Gates r, z, n and two biases per gate, as PyTorch's (both follow cuDNN).
            gru = self.mx.gluon.rnn.GRU(node["hidden"], layout="NTC", input_size=shape[-1])
            # l0_i2h_weight, l0_h2h_weight, l0_i2h_bias, l0_h2h_bias
            targets = [("weight" if name.endswith("weight") else "bias", param)
                       for name, param in gru.collect_params().items()]
            self.made.append((node, targets, shape[-1]))
            return [block_classes(self.mx)["LastState"](gru)]
        elif op == "residual":
            body = self.sequential(node["body"], shape, key + ".body.")[0]
            shortcut = self.sequential(node["shortcut"], shape, key + ".shortcut.")[0] if node["shortcut"] else None
            return [block_classes(self.mx)["Residual"](body, shortcut, node["post"] == "relu")]
        else:
            return self._stateless(nn, node, shape)
        if op == "bn":
            targets = [("weight", block.gamma), ("bias", block.beta),
                       ("running_mean", block.running_mean), ("running_var", block.running_var)]
        else:
            targets = [("weight", block.weight), ("bias", getattr(block, "bias", None))]
        self.made.append((node, targets, shape[-1] if op in ("dense", "embedding") else shape[0]))
        return [block]

    def _stateless(self, nn, node, shape):
        op = node["op"]
        if op == "relu":
            return [nn.Activation("relu")]
        if op == "relu6":
            return [nn.HybridLambda(_relu6)]
        if op == "maxpool":
            return [nn.MaxPool2D(node["kernel"], node["stride"], node["padding"])]
        if op == "adaptive_avgpool":
            if tuple(shape[1:]) == (node["size"], node["size"]):
                return []  # the identity (AlexNet and VGG16 at 224 px), as the TensorFlow port
            return [block_classes(self.mx)["AdaptiveAvgPool"](node["size"])]
        if op == "global_avgpool":
            return [nn.GlobalAvgPool2D(), nn.Flatten()]
        if op == "flatten":
            return [nn.Flatten()]
        if op == "dropout":
            return [nn.Dropout(node["p"])]
        if op == "concat":
            branches = [self.sequential(branch, shape)[0] for branch in node["branches"]]
            return [block_classes(self.mx)["Concat"](branches)]
        raise base.not_supported("layer op", op, "MXNet")


def _relu6(F, x):
    return F.clip(x, 0.0, 6.0)


def initialise(mx, node, targets, channels):
    """Apply models.INIT (the node's rules: models.node_init) to a block's parameters, drawing from
    MXNet's seeded generator. ``targets``: [(rule name, Parameter or None)]."""
    rules = models.node_init(node)
    if node["op"] == "bn":  # and the running statistics: mean 0, variance 1
        rules = dict(rules, running_mean={"distribution": "constant", "value": 0.0},
                     running_var={"distribution": "constant", "value": 1.0})
    for name, param in targets:
        rule = rules.get(name)
        if param is None or rule is None:  # a conv or dense without bias
            continue
        array = param.data()
        if rule["distribution"] == "constant":
            array[:] = rule["value"]
        elif rule["distribution"] == "normal":
            std = models.init_scale(rule["scale"], *models.fans(node, channels))
            mx.nd.random.normal(rule["mean"], std, shape=array.shape, out=array)
        elif rule["distribution"] == "uniform":
            bound = models.init_scale(rule["scale"], *models.fans(node, channels))
            mx.nd.random.uniform(-bound, bound, shape=array.shape, out=array)
        else:
            raise ValueError("unknown INIT distribution {!r}".format(rule["distribution"]))


def block_classes(mx):
    """Residual, Concat, AdaptiveAvgPool and LastState HybridBlocks, defined once mxnet is imported."""
    if _BLOCKS:
        return _BLOCKS
    nn = mx.gluon.nn

    class Residual(nn.HybridBlock):
        """body(x) + shortcut(x) (None: the identity), then ReLU when post."""

        def __init__(self, body, shortcut, post, **kwargs):
            super(Residual, self).__init__(**kwargs)
            self.body, self.shortcut, self.post = body, shortcut, post

        def hybrid_forward(self, F, x):
            out = self.body(x)
            out = out + (x if self.shortcut is None else self.shortcut(x))
            # Activation, not F.relu (the same function): as Gluon's own ResNets do, and a little
            # faster in MXNet 1.9's MKLDNN build (benchmarks/frameworks/mxnet_relu_activation.py).
            return F.Activation(out, act_type="relu") if self.post else out

    class AdaptiveAvgPool(nn.HybridBlock):
        """PyTorch's AdaptiveAvgPool2d windows (checked equal, also for inputs below size)."""

        def __init__(self, size, **kwargs):
            super(AdaptiveAvgPool, self).__init__(**kwargs)
            self.size = size

        def hybrid_forward(self, F, x):
            return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.size)

    class Concat(nn.HybridBlock):
        """Each branch on the same input, concatenated along the channels in branch order."""

        def __init__(self, branches, **kwargs):
            super(Concat, self).__init__(**kwargs)
            self.branches = branches
            for i, branch in enumerate(branches):
                self.register_child(branch, "branch{}".format(i))

        def hybrid_forward(self, F, x):
            return F.concat(*[branch(x) for branch in self.branches], dim=1)

    class LastState(nn.HybridBlock):
        """A batch-first GRU over the whole sequence from a zero state; its last state."""

        def __init__(self, gru, **kwargs):
            super(LastState, self).__init__(**kwargs)
            self.gru = gru

        def hybrid_forward(self, F, x):
            # The output at the last step is the last state (one layer, one direction).
            return F.squeeze(F.slice_axis(self.gru(x), axis=1, begin=-1, end=None), axis=1)

    _BLOCKS.update(Residual=Residual, AdaptiveAvgPool=AdaptiveAvgPool, Concat=Concat, LastState=LastState)
    return _BLOCKS

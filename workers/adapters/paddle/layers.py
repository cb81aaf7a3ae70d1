"""The model definition (workers.models) translated into paddle.nn layers, for the Paddle adapter.

paddle is not imported here at module level: the adapter hands it in after setup(), and the few
layer classes bench adds are made on first use. Paddle's defaults that differ from the benchmark's
scheme (initialisers, BatchNorm momentum) are set explicitly.
"""

from workers import models
from workers.adapters import base
from workers.adapters.paddle import attention

_RESIDUAL = []  # the Residual, Concat and LastState nn.Layer classes, made once paddle is imported


def sequential(paddle, layers, shape, tables=None):
    """paddle.nn.Sequential for a layer list, and its output shape.

    ``tables``: the nn.Embedding layers made so far, the one a tied_output ties to.
    """
    made = []
    tables = [] if tables is None else tables
    for node in layers:
        made.append(_layer(paddle, node, shape, tables))
        shape = models.out_shape(node, shape)
    return paddle.nn.Sequential(*made), shape


def _layer(paddle, node, shape, tables):
    nn, op = paddle.nn, node["op"]
    if op in attention.OPS:
        return attention.layer(paddle, node, shape, tables,
                               lambda op, fans, bias: _attrs(paddle, op, fans, bias, models.node_init(node)))
    if op == "conv":
        weight, bias = _attrs(paddle, op, models.fans(node, shape[0]), node["bias"])
        return nn.Conv2D(shape[0], node["out"], node["kernel"], stride=node["stride"],
                         padding=node["padding"], groups=node["groups"],
                         weight_attr=weight, bias_attr=bias)
    if op == "dense":
        # On the last axis: Linear takes (N, D) and (N, L, D) alike. Paddle stores the weight as
        # (in, out); Glorot's bound is symmetric in the fans.
        weight, bias = _attrs(paddle, op, models.fans(node, shape[-1]), node["bias"])
        return nn.Linear(shape[-1], node["out"], weight_attr=weight, bias_attr=bias)
    if op == "bn":
        norm = nn.BatchNorm2D if len(shape) == 3 else nn.BatchNorm1D
        weight, bias = _attrs(paddle, op, None, True)
        # Paddle's momentum is the weight of the running statistic: 1 - PyTorch's.
        return norm(shape[0], momentum=1.0 - node["momentum"], epsilon=node["eps"],
                    weight_attr=weight, bias_attr=bias)
    if op == "relu":
        return nn.ReLU()
    if op == "relu6":
        return nn.ReLU6()
    if op == "maxpool":
        return nn.MaxPool2D(node["kernel"], node["stride"], node["padding"])
    if op == "adaptive_avgpool":
        if tuple(shape[1:]) == (node["size"], node["size"]):
            return nn.Identity()  # AlexNet and VGG16 at 224 px, as the TensorFlow port skips it
        return nn.AdaptiveAvgPool2D(node["size"])
    if op == "global_avgpool":
        return nn.Sequential(nn.AdaptiveAvgPool2D(1), nn.Flatten())
    if op == "flatten":
        return nn.Flatten()
    if op == "dropout":
        # Paddle's default mode, upscale_in_train, is PyTorch's inverted dropout.
        return nn.Dropout(node["p"])
    if op == "embedding":
        weight = _attrs(paddle, op, models.fans(node, shape[-1]), False, models.node_init(node))[0]
        table = nn.Embedding(node["vocab"], node["dim"], weight_attr=weight)
        tables.append(table)
        return table
    if op == "gru":
        return _gru(paddle, node, shape)
    if op == "residual":
        body = sequential(paddle, node["body"], shape, tables)[0]
        shortcut = sequential(paddle, node["shortcut"], shape, tables)[0] if node["shortcut"] else None
        post = nn.ReLU() if node["post"] == "relu" else None
        return _residual_class(paddle)(body, shortcut, post)
    if op == "concat":
        branches = [sequential(paddle, branch, shape, tables)[0] for branch in node["branches"]]
        return _residual_class(paddle, "Concat")(branches)
    raise base.not_supported("layer op", op, "Paddle")


def _gru(paddle, node, shape):
    """paddle.nn.GRU, batch first, from a zero state; its last state.

    Paddle documents PyTorch's GRU: gates r, z, c stacked in that order in weight_ih_l0 (3H, I)
    and weight_hh_l0 (3H, H), two biases per gate, the recurrent one inside the reset product
    (c = tanh(W_ic x + b_ic + r * (W_hc h + b_hc)), h' = z * h + (1 - z) * c); the weights load
    one to one from PyTorch's (tests/test_paddle_adapter.py compares the outputs).
    """
    fans = models.fans(node, shape[-1])
    ih, bias_ih = _attrs(paddle, "gru", fans, True)  # one ParamAttr per parameter
    hh, bias_hh = _attrs(paddle, "gru", fans, True)
    gru = paddle.nn.GRU(shape[-1], node["hidden"], time_major=False, weight_ih_attr=ih,
                        weight_hh_attr=hh, bias_ih_attr=bias_ih, bias_hh_attr=bias_hh)
    return _residual_class(paddle, "LastState")(gru)


def _attrs(paddle, op, fans, with_bias, rules=None):
    """(weight_attr, bias_attr) applying models.INIT (or the node's own ``rules``); bias_attr False
    when there is no bias."""
    made = {}
    for name, rule in (rules or models.INIT[op]).items():
        made[name] = paddle.ParamAttr(initializer=_initializer(paddle.nn.initializer, rule, fans))
    return made["weight"], (made["bias"] if with_bias else False)


def _initializer(init, rule, fans):
    if rule["distribution"] == "constant":
        return init.Constant(rule["value"])
    if rule["distribution"] == "normal":
        return init.Normal(rule["mean"], models.init_scale(rule["scale"], *fans))
    if rule["distribution"] == "uniform":
        bound = models.init_scale(rule["scale"], *fans)
        return init.Uniform(-bound, bound)
    raise ValueError("unknown INIT distribution {!r}".format(rule["distribution"]))


def _residual_class(paddle, name="Residual"):
    if not _RESIDUAL:

        class Residual(paddle.nn.Layer):
            """body(x) + shortcut(x), then post; no shortcut is the identity."""

            def __init__(self, body, shortcut, post):
                super().__init__()
                self.body, self.shortcut, self.post = body, shortcut, post

            def forward(self, x):
                out = self.body(x)
                out = out + (x if self.shortcut is None else self.shortcut(x))
                return out if self.post is None else self.post(out)

        class Concat(paddle.nn.Layer):
            """Each branch on the same input, concatenated along the channels in branch order."""

            def __init__(self, branches):
                super().__init__()
                self.branches = paddle.nn.LayerList(branches)

            def forward(self, x):
                return paddle.concat([branch(x) for branch in self.branches], axis=1)

        class LastState(paddle.nn.Layer):
            """A batch-first GRU over the whole sequence from a zero state; its last state."""

            def __init__(self, gru):
                super().__init__()
                self.gru = gru

            def forward(self, x):
                return self.gru(x)[1][-1]

        _RESIDUAL.append({"Residual": Residual, "Concat": Concat, "LastState": LastState})
    return _RESIDUAL[0][name]

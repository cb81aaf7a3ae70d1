"""The model definition (workers.models) translated into torch.nn modules, for the PyTorch adapter.

torch is not imported here at module level: the adapter hands in ``torch.nn`` after setup(), and
the few module classes bench adds are made on first use.
"""

from workers import models
from workers.adapters import base

_RESIDUAL = []  # the Residual, Concat and LastState nn.Module classes, made once torch is imported


def sequential(nn, layers, shape):
    """nn.Sequential for a layer list, and its output shape.

    Activations run in place (as torchvision's do) except as the first layer of a list: its
    input is also read by someone else (the batch buffer, or a residual's shortcut).
    """
    modules = []
    for i, node in enumerate(layers):
        modules.append(_module(nn, node, shape, inplace=i > 0))
        shape = models.out_shape(node, shape)
    return nn.Sequential(*modules), shape


def _module(nn, node, shape, inplace):
    op = node["op"]
    if op == "conv":
        layer = nn.Conv2d(shape[0], node["out"], node["kernel"], node["stride"],
                          node["padding"], groups=node["groups"], bias=node["bias"])
        _initialise(layer, op, models.fans(node, shape[0]))
        return layer
    if op == "dense":
        layer = nn.Linear(shape[0], node["out"], bias=node["bias"])
        _initialise(layer, op, models.fans(node, shape[0]))
        return layer
    if op == "bn":
        norm = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
        layer = norm(shape[0], eps=node["eps"], momentum=node["momentum"])
        _initialise(layer, op, None)
        return layer
    if op in ("relu", "relu6"):
        return (nn.ReLU if op == "relu" else nn.ReLU6)(inplace=inplace)
    if op == "maxpool":
        return nn.MaxPool2d(node["kernel"], node["stride"], node["padding"])
    if op == "adaptive_avgpool":
        return nn.AdaptiveAvgPool2d(node["size"])
    if op == "global_avgpool":
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    if op == "flatten":
        return nn.Flatten()
    if op == "dropout":
        return nn.Dropout(node["p"])
    if op == "embedding":
        layer = nn.Embedding(node["vocab"], node["dim"])
        _initialise(layer, op, models.fans(node, shape[-1]))
        return layer
    if op == "gru":
        layer = nn.GRU(shape[-1], node["hidden"], batch_first=True)
        # weight_ih_l0, weight_hh_l0 (gates r, z, n stacked), bias_ih_l0, bias_hh_l0
        rules = models.INIT[op]
        for name, tensor in layer.named_parameters():
            rule = rules["weight" if name.startswith("weight") else "bias"]
            bound = models.init_scale(rule["scale"], *models.fans(node, shape[-1]))
            tensor.uniform_(-bound, bound)
        return _residual_class(nn, "LastState")(layer)
    if op == "concat":
        branches = [sequential(nn, branch, shape)[0] for branch in node["branches"]]
        return _residual_class(nn, "Concat")(branches)
    if op == "residual":
        body = sequential(nn, node["body"], shape)[0]
        shortcut = sequential(nn, node["shortcut"], shape)[0]
        post = nn.ReLU(inplace=True) if node["post"] == "relu" else None
        return _residual_class(nn)(body, shortcut, post)
    raise base.not_supported("layer op", op, "PyTorch")


def _initialise(layer, op, fans):
    """Apply models.INIT to a freshly made layer (inside torch.no_grad)."""
    for name, rule in models.INIT[op].items():
        tensor = getattr(layer, name)
        if tensor is None:
            continue
        if rule["distribution"] == "constant":
            tensor.fill_(rule["value"])
        elif rule["distribution"] == "normal":
            tensor.normal_(rule["mean"], models.init_scale(rule["scale"], *fans))
        elif rule["distribution"] == "uniform":
            bound = models.init_scale(rule["scale"], *fans)
            tensor.uniform_(-bound, bound)
        else:
            raise ValueError("unknown INIT distribution {!r}".format(rule["distribution"]))


def _residual_class(nn, name="Residual"):
    if not _RESIDUAL:
        import torch

        class Residual(nn.Module):
            """body(x) + shortcut(x), then post; an empty shortcut Sequential is the identity."""

            def __init__(self, body, shortcut, post):
                super().__init__()
                self.body, self.shortcut, self.post = body, shortcut, post

            def forward(self, x):
                out = self.body(x)
                out += self.shortcut(x)
                return out if self.post is None else self.post(out)

        class Concat(nn.Module):
            """Each branch on the same input, concatenated along the channels in branch order."""

            def __init__(self, branches):
                super().__init__()
                self.branches = nn.ModuleList(branches)

            def forward(self, x):
                return torch.cat([branch(x) for branch in self.branches], 1)

        class LastState(nn.Module):
            """A batch-first GRU over the whole sequence from a zero state; its last state."""

            def __init__(self, gru):
                super().__init__()
                self.gru = gru

            def forward(self, x):
                return self.gru(x)[1][-1]

        _RESIDUAL.append({"Residual": Residual, "Concat": Concat, "LastState": LastState})
    return _RESIDUAL[0][name]

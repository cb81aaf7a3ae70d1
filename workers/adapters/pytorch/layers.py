"""The model definition (workers.models) translated into torch.nn modules, for the PyTorch adapter.

torch is not imported here at module level: the adapter hands in ``torch.nn`` after setup(), and
the few module classes bench adds are made on first use.
"""

from workers import models
from workers.adapters import base

_RESIDUAL = []  # the Residual, Concat and LastState nn.Module classes, made once torch is imported


def sequential(nn, layers, shape, tables=None):
    """nn.Sequential for a layer list, and its output shape.

    Activations run in place (as torchvision's do) except as the first layer of a list: its
    input is also read by someone else (the batch buffer, or a residual's shortcut).
    ``tables``: the nn.Embedding modules made so far, the one a tied_output ties to.
    """
    modules = []
    tables = [] if tables is None else tables
    for i, node in enumerate(layers):
        modules.append(_module(nn, node, shape, inplace=i > 0, tables=tables))
        shape = models.out_shape(node, shape)
    return nn.Sequential(*modules), shape


def _module(nn, node, shape, inplace, tables):
    op = node["op"]
    if op in _ATTENTION_OPS:
        return _attention_module(nn, node, shape, tables)
    if op == "conv":
        layer = nn.Conv2d(shape[0], node["out"], node["kernel"], node["stride"],
                          node["padding"], groups=node["groups"], bias=node["bias"])
        _initialise(layer, op, models.fans(node, shape[0]))
        return layer
    if op == "dense":  # on the last axis: nn.Linear takes (N, D) and (N, L, D) alike
        layer = nn.Linear(shape[-1], node["out"], bias=node["bias"])
        _initialise(layer, op, models.fans(node, shape[-1]))
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
        _initialise(layer, op, models.fans(node, shape[-1]), models.node_init(node))
        tables.append(layer)
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
        branches = [sequential(nn, branch, shape, tables)[0] for branch in node["branches"]]
        return _residual_class(nn, "Concat")(branches)
    if op == "residual":
        body = sequential(nn, node["body"], shape, tables)[0]
        shortcut = sequential(nn, node["shortcut"], shape, tables)[0]
        post = nn.ReLU(inplace=True) if node["post"] == "relu" else None
        return _residual_class(nn)(body, shortcut, post)
    raise base.not_supported("layer op", op, "PyTorch")


def _initialise(layer, op, fans, rules=None):
    """Apply models.INIT (or the node's own ``rules``) to a freshly made layer (inside torch.no_grad)."""
    for name, rule in (rules or models.INIT[op]).items():
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


# -- the attention models' nodes ----------------------------------------------------------------

_ATTENTION_OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token",
                  "position_embedding", "first_token", "tied_output")
_ATTENTION = []  # the module classes, made once torch is imported

# How each attention node is written, as PyTorch's users write it (recorded in the run's execution).
HOW = {
    "attention": "torch.nn.functional.scaled_dot_product_attention (is_causal for the causal mask) "
                 "on q, k, v from one fused (3D, D) nn.Linear, then an output nn.Linear",
    "layernorm": "nn.LayerNorm",
    "gelu": "nn.GELU (approximate 'none' or 'tanh')",
    "patch_embed": "nn.Conv2d of stride patch, flattened and transposed to (N, L, D)",
}


def _attention_module(nn, node, shape, tables):
    op = node["op"]
    if op == "layernorm":
        layer = nn.LayerNorm(shape[-1], eps=node["eps"])
        _initialise(layer, op, None)
        return layer
    if op == "gelu":
        return nn.GELU(approximate=node["approximate"])
    classes = _attention_classes(nn)
    if op == "attention":
        layer = classes["SelfAttention"](shape[-1], node["heads"], node["causal"])
        rules = models.INIT[op]
        bound = models.init_scale(rules["weight"]["scale"], *models.fans(node, shape[-1]))
        for linear in (layer.qkv, layer.out):  # every D x D block alike: one bound for all
            linear.weight.uniform_(-bound, bound)
            linear.bias.fill_(rules["bias"]["value"])
        return layer
    if op == "patch_embed":
        layer = classes["PatchEmbed"](shape[0], node["dim"], node["patch"])
        _initialise(layer.conv, op, models.fans(node, shape[0]))
        return layer
    if op == "class_token":
        layer = classes["ClassToken"](shape[-1])
        _initialise(layer, op, None)
        return layer
    if op == "position_embedding":
        layer = classes["PositionEmbedding"](node["length"], shape[-1])
        _initialise(layer, op, (node["length"], shape[-1]))
        return layer
    if op == "first_token":
        return classes["FirstToken"]()
    if len(tables) != 1:  # tied_output; shapes.walk has checked the sizes
        raise ValueError("tied_output needs the model's one embedding, found {}".format(len(tables)))
    return classes["TiedOutput"](tables[0])


def _attention_classes(nn):
    if not _ATTENTION:
        import torch
        import torch.nn.functional as F

        class SelfAttention(nn.Module):
            """Multi-head self-attention: q, k and v from one (3D, D) projection (rows q, then k,
            then v: models.attention's three D x D projections stacked), PyTorch's fused
            scaled_dot_product_attention, an output projection."""

            def __init__(self, dim, heads, causal):
                super().__init__()
                self.heads, self.causal = heads, causal
                self.qkv = nn.Linear(dim, 3 * dim)
                self.out = nn.Linear(dim, dim)

            def forward(self, x):
                n, length, dim = x.shape
                qkv = self.qkv(x).view(n, length, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
                y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=self.causal)
                return self.out(y.transpose(1, 2).reshape(n, length, dim))

        class PatchEmbed(nn.Module):
            def __init__(self, channels, dim, patch):
                super().__init__()
                self.conv = nn.Conv2d(channels, dim, patch, patch)

            def forward(self, x):
                return self.conv(x).flatten(2).transpose(1, 2)

        class ClassToken(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(dim))

            def forward(self, x):
                return torch.cat([self.weight.expand(x.shape[0], 1, -1), x], 1)

        class PositionEmbedding(nn.Module):
            def __init__(self, length, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(length, dim))

            def forward(self, x):
                return x + self.weight[:x.shape[1]]

        class FirstToken(nn.Module):
            def forward(self, x):
                return x[:, 0]

        class TiedOutput(nn.Module):
            """Logits from the embedding's table (shared, not copied): x E^T, no bias. The
            embedding is held in a tuple so that it is not registered twice as a submodule."""

            def __init__(self, embedding):
                super().__init__()
                self.tied = (embedding,)

            def forward(self, x):
                return F.linear(x, self.tied[0].weight)

        _ATTENTION.append({"SelfAttention": SelfAttention, "PatchEmbed": PatchEmbed,
                           "ClassToken": ClassToken, "PositionEmbedding": PositionEmbedding,
                           "FirstToken": FirstToken, "TiedOutput": TiedOutput})
    return _ATTENTION[0]


def load_canonical(torch, model, params):
    """Set a built model's attention-model parameters from workers.models.pure's canonical layout
    ({path: {name: array}}; the paths are nn.Sequential's own module names): the cross-checks'
    way in (tests/attention_checks.py)."""
    modules = dict(model.named_modules())
    with torch.no_grad():
        for path, values in params.items():
            module = modules[path]
            tensor = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in values.items()}
            if "q_weight" in tensor:  # attention: q, k, v stacked in the fused projection
                module.qkv.weight.copy_(torch.cat([tensor[k + "_weight"] for k in "qkv"]))
                module.qkv.bias.copy_(torch.cat([tensor[k + "_bias"] for k in "qkv"]))
                module.out.weight.copy_(tensor["out_weight"])
                module.out.bias.copy_(tensor["out_bias"])
                continue
            target = module.conv if hasattr(module, "conv") else module
            for name, value in tensor.items():
                getattr(target, name).copy_(value)

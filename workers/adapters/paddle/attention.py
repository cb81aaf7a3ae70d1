"""The attention models' nodes (workers.models, issue 25) in paddle.nn, for the Paddle adapter.

Written as Paddle's users write a transformer: paddle.nn.MultiHeadAttention (its q_proj, k_proj,
v_proj and out_proj Linear layers, the causal mask through attn_mask), nn.LayerNorm, nn.GELU, a
Conv2D of stride patch for the patch embedding, and the tied output as
paddle.matmul(x, embedding.weight, transpose_y=True) on the embedding's one parameter.

paddle.nn.functional.scaled_dot_product_attention also runs on the CPU in Paddle 3.3.1, but there
it picks its "math" backend (flash and memory-efficient attention need a CUDA device), a Python
composition of the same matrix products and softmax; nn.MultiHeadAttention is the library layer
Paddle's guides and its own TransformerEncoderLayer use, so that is the one written here.
paddle is handed in by the caller (layers.py); the Layer classes are made on first use.
"""

from workers import models

OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token", "position_embedding",
       "first_token", "tied_output")

# How each attention node is written (recorded in the run's execution["layers"]).
HOW = {
    "attention": "paddle.nn.MultiHeadAttention (q_proj, k_proj, v_proj, out_proj Linear layers; "
                 "its matmul, softmax, matmul), the causal mask as its float attn_mask (-inf above the diagonal)",
    "layernorm": "paddle.nn.LayerNorm",
    "gelu": "paddle.nn.GELU (approximate 'none' or 'tanh')",
    "patch_embed": "paddle.nn.Conv2D of stride patch, flattened and transposed to (N, L, D)",
    "tied_output": "paddle.matmul(x, embedding.weight, transpose_y=True) on the embedding's one table",
}

_CLASSES = []  # the Layer classes, made once paddle is imported


def _release(paddle):
    """(major, minor) of the Paddle imported; a development build ("0.0.0") counts as the newest."""
    parts = []
    for part in paddle.__version__.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) if part else ""
        parts.append(int(digits[:6]) if digits else 0)
    found = tuple(parts + [0] * (2 - len(parts)))
    return (10 ** 6, 0) if found == (0, 0) else found


def layer(paddle, node, shape, tables, attrs):
    """The paddle.nn.Layer for an attention node on input ``shape``; ``tables`` holds the
    nn.Embedding layers made so far (a tied_output's table); ``attrs(op, fans, with_bias)`` gives
    the (weight_attr, bias_attr) that apply the node's models.INIT rules."""
    nn, op, classes = paddle.nn, node["op"], _classes(paddle)
    if op == "layernorm":
        weight, bias = attrs(op, None, True)
        return nn.LayerNorm(shape[-1], epsilon=node["eps"], weight_attr=weight, bias_attr=bias)
    if op == "gelu":
        # Before 3.2 Paddle's GELU takes the approximation as a bool (True: tanh), and a string
        # fails only at the first forward pass (workers/releases.py's era entry).
        if _release(paddle) < (3, 2):
            return nn.GELU(approximate=node["approximate"] == "tanh")
        return nn.GELU(approximate=node["approximate"])
    if op == "attention":
        # One ParamAttr for all four projections: each is D x D, so Glorot's bound is the same.
        weight, bias = attrs(op, models.fans(node, shape[-1]), True)
        return classes["SelfAttention"](shape, node["heads"], node["causal"], weight, bias)
    if op == "patch_embed":
        weight, bias = attrs(op, models.fans(node, shape[0]), True)
        return classes["PatchEmbed"](nn.Conv2D(shape[0], node["dim"], node["patch"], stride=node["patch"],
                                               weight_attr=weight, bias_attr=bias))
    if op == "class_token":
        return classes["ClassToken"]([shape[-1]], attrs(op, None, False)[0])
    if op == "position_embedding":
        size = (node["length"], shape[-1])
        return classes["PositionEmbedding"](list(size), attrs(op, size, False)[0])
    if op == "first_token":
        return classes["FirstToken"]()
    if len(tables) != 1:  # tied_output; shapes.walk has checked the sizes
        raise ValueError("tied_output needs the model's one embedding, found {}".format(len(tables)))
    return classes["TiedOutput"](tables[0])


def _classes(paddle):
    if _CLASSES:
        return _CLASSES[0]
    nn = paddle.nn

    class SelfAttention(nn.Layer):
        """nn.MultiHeadAttention on (N, L, D) as self-attention; the causal mask is a (L, L)
        buffer, 0 where a position may attend and -inf above the diagonal, not saved with the
        parameters."""

        def __init__(self, shape, heads, causal, weight_attr, bias_attr):
            super().__init__()
            length, dim = shape
            self.attention = nn.MultiHeadAttention(dim, heads, weight_attr=weight_attr, bias_attr=bias_attr)
            self.causal = causal
            if causal:
                # Paddle's float form of attn_mask, added to the scores (its bool form would be
                # cast to it in every forward).
                mask = paddle.triu(paddle.full([length, length], float("-inf"), dtype="float32"), 1)
                self.register_buffer("mask", mask, persistable=False)

        def forward(self, x):
            if self.causal:
                return self.attention(x, attn_mask=self.mask)
            return self.attention(x)

    class PatchEmbed(nn.Layer):
        """The convolution's (N, D, H', W') grid read row by row: (N, H' * W', D)."""

        def __init__(self, conv):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            return self.conv(x).flatten(2).transpose([0, 2, 1])

    class ClassToken(nn.Layer):
        def __init__(self, shape, attr):
            super().__init__()
            self.weight = self.create_parameter(shape, attr=attr)

        def forward(self, x):
            token = self.weight.reshape([1, 1, -1]).expand([x.shape[0], 1, self.weight.shape[0]])
            return paddle.concat([token, x], axis=1)

    class PositionEmbedding(nn.Layer):
        """A learned (length, D) table; the first L rows are added to an (N, L, D) input."""

        def __init__(self, shape, attr):
            super().__init__()
            self.weight = self.create_parameter(shape, attr=attr)

        def forward(self, x):
            return x + self.weight[:x.shape[1]]

    class FirstToken(nn.Layer):
        def forward(self, x):
            return x[:, 0]

    class TiedOutput(nn.Layer):
        """Logits from the embedding's own table, x E^T, no bias. The embedding is held in a
        tuple, so that it is not registered a second time (its table is counted once)."""

        def __init__(self, embedding):
            super().__init__()
            self.tied = (embedding,)

        def forward(self, x):
            return paddle.matmul(x, self.tied[0].weight, transpose_y=True)

    _CLASSES.append({"SelfAttention": SelfAttention, "PatchEmbed": PatchEmbed, "ClassToken": ClassToken,
                     "PositionEmbedding": PositionEmbedding, "FirstToken": FirstToken,
                     "TiedOutput": TiedOutput})
    return _CLASSES[0]


def how(nodes):
    """execution["layers"]: how each attention node the model uses is written; empty for the rest."""
    used = set()
    _collect(nodes, used)
    return {op: HOW[op] for op in sorted(used) if op in HOW}


def _collect(nodes, used):
    for node in nodes:
        used.add(node["op"])
        for key in ("body", "shortcut"):
            _collect(node.get(key) or [], used)


def load_canonical(paddle, model, params):
    """Set a built model's parameters from workers.models.pure's canonical layout (PyTorch's:
    {path: {name: array}}, the paths nn.Sequential's own sublayer names): the cross-checks' way
    in (tests/attention_checks.py). Paddle's Linear weight is (in, out), the transpose of the
    canonical (out, in)."""
    import numpy as np

    layers = dict(model.named_sublayers())
    for path, values in params.items():
        target = layers[path]
        arrays = {k: np.asarray(v, dtype=np.float32) for k, v in values.items()}
        if "q_weight" in arrays:  # attention: the four projections of nn.MultiHeadAttention
            mha = target.attention
            for name in ("q", "k", "v", "out"):
                linear = getattr(mha, name + "_proj")
                linear.weight.set_value(arrays[name + "_weight"].T)
                linear.bias.set_value(arrays[name + "_bias"])
            continue
        if isinstance(target, paddle.nn.Linear):
            arrays["weight"] = arrays["weight"].T
        if hasattr(target, "conv"):
            target = target.conv
        for name, value in arrays.items():
            getattr(target, name).set_value(value)

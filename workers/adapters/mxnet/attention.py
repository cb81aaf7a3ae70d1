"""The attention models' nodes (workers.models: ViT and GPT) in Gluon, for the MXNet adapter.

Gluon 1.x has no multi-head attention block. What its users reach for is GluonNLP's, whose BERT
and Transformer run self-attention on MXNet's fused contrib operators: one (3D, D) projection whose
rows interleave each head's query, key and value, ``contrib.interleaved_matmul_selfatt_qk`` (the
scaled scores of every head, one batched product), a softmax, ``..._valatt`` (the weighted values,
heads joined), an output projection. Those operators are time-major (L, N, ...), so the block
transposes its (N, L, D) input once and its output back. The causal mask is added to the scores
before the softmax. mxnet is imported by the adapter; the blocks are made on first use.
"""

import math

_CLASSES = {}

# How each attention node is written in Gluon (recorded in the run's execution["layers"]).
HOW = {
    "attention": "mxnet.nd.contrib.interleaved_matmul_selfatt_qk and interleaved_matmul_selfatt_valatt "
                 "(MXNet's fused self-attention operators, as GluonNLP's BERT uses them) on one "
                 "Dense(3D, flatten=False) projection with each head's q, k, v rows interleaved, "
                 "time-major; F.softmax, with the causal mask (-1e9 above the diagonal, from "
                 "contrib.arange_like) added to the scores before it; an output Dense(D, flatten=False). "
                 "The fused operators are float32 only on CPU: under AMP bf16 the projection's output "
                 "is amp_cast to float32 before them",
    "layernorm": "gluon.nn.LayerNorm(epsilon=eps)",
    "gelu": "gluon.nn.GELU (exact, erf) for approximate 'none'; the tanh form written with F.tanh "
            "(Gluon 1.9 has no tanh GELU), as GluonNLP's GELU(approximation='tanh')",
    "patch_embed": "gluon.nn.Conv2D of stride patch, reshaped and transposed to (N, L, D)",
    "tied_output": "gluon.nn.Dense(vocab, flatten=False, use_bias=False, params=embedding.params): "
                   "the embedding's own weight Parameter (one parameter, counted once)",
}

OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token", "position_embedding",
       "first_token", "tied_output")
_MASKED = -1e9  # added to a score that a query may not see: exp() of it is exactly 0 in float32


def block(translator, node, shape):
    """The Gluon block of one attention-model node (shape: its input's, without the batch), with
    the INIT targets of a node that holds parameters appended to translator.made."""
    mx, op = translator.mx, node["op"]
    nn, classes = mx.gluon.nn, block_classes(mx)
    if op == "layernorm":
        layer = nn.LayerNorm(axis=-1, epsilon=node["eps"], in_channels=shape[-1])
        translator.made.append((node, [("weight", layer.gamma), ("bias", layer.beta)], shape[-1]))
        return layer
    if op == "gelu":
        return nn.GELU() if node["approximate"] == "none" else classes["TanhGELU"]()
    if op == "attention":
        layer = classes["SelfAttention"](shape[-1], node["heads"], node["causal"])
        # Each of the four D x D projections Glorot-uniform on its own: all have fan_in = fan_out
        # = D, so one bound draws the stacked (3D, D) matrix as it draws each block.
        targets = [("weight", layer.qkv.weight), ("bias", layer.qkv.bias),
                   ("weight", layer.out.weight), ("bias", layer.out.bias)]
        translator.made.append((node, targets, shape[-1]))
        return layer
    if op == "patch_embed":
        layer = classes["PatchEmbed"](shape[0], node["dim"], node["patch"])
        translator.made.append((node, [("weight", layer.conv.weight), ("bias", layer.conv.bias)], shape[0]))
        return layer
    if op == "class_token":
        layer = classes["ClassToken"](shape[-1])
        translator.made.append((node, [("weight", layer.weight)], shape[-1]))
        return layer
    if op == "position_embedding":
        layer = classes["PositionEmbedding"](node["length"], shape[-1])
        translator.made.append((node, [("weight", layer.weight)], shape[-1]))
        return layer
    if op == "first_token":
        return classes["FirstToken"]()
    if len(translator.tables) != 1:  # tied_output; shapes.walk has checked the sizes
        raise ValueError("tied_output needs the model's one embedding, found {}".format(len(translator.tables)))
    table = translator.tables[0]
    # Gluon's own sharing: a Dense built on the embedding's ParameterDict finds the embedding's
    # "weight" there ((vocab, D), as Dense's (units, in_units)) instead of making a second one.
    return nn.Dense(node["vocab"], flatten=False, use_bias=False, in_units=shape[-1], params=table.params)


def block_classes(mx):
    """The HybridBlocks of the attention nodes, defined once mxnet is imported."""
    if _CLASSES:
        return _CLASSES
    nn = mx.gluon.nn

    class SelfAttention(nn.HybridBlock):
        """Multi-head self-attention on MXNet's fused interleaved operators (module docstring)."""

        def __init__(self, dim, heads, causal, **kwargs):
            super(SelfAttention, self).__init__(**kwargs)
            self.heads, self.causal = heads, causal
            with self.name_scope():
                self.qkv = nn.Dense(3 * dim, flatten=False, in_units=dim)
                self.out = nn.Dense(dim, flatten=False, in_units=dim)

        def hybrid_forward(self, F, x):
            x = F.transpose(x, axes=(1, 0, 2))  # (L, N, D): the operators' layout
            # (L, N, 3D), per head [q, k, v] rows. MXNet 1.9's fused attention operators are float32
            # only on CPU ("Only FP32 is supported on CPU") and AMP has no rule for them: under bf16
            # the projection's output is cast back (amp_cast to float32 is a no-op in float32)
            qkv = F.amp_cast(self.qkv(x), dtype="float32")
            scores = F.contrib.interleaved_matmul_selfatt_qk(qkv, heads=self.heads)  # (N*H, L, L), scaled
            if self.causal:
                query = F.reshape(F.contrib.arange_like(scores, axis=1), (-1, 1))
                key = F.reshape(F.contrib.arange_like(scores, axis=2), (1, -1))
                scores = F.broadcast_add(scores, F.expand_dims(F.broadcast_greater(key, query) * _MASKED, 0))
            weights = F.softmax(scores, axis=-1)
            joined = F.contrib.interleaved_matmul_selfatt_valatt(qkv, weights, heads=self.heads)
            return F.transpose(self.out(joined), axes=(1, 0, 2))

    class TanhGELU(nn.HybridBlock):
        """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): GPT-2's GELU."""

        def hybrid_forward(self, F, x):
            return 0.5 * x * (1.0 + F.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x ** 3))))

    class PatchEmbed(nn.HybridBlock):
        def __init__(self, channels, dim, patch, **kwargs):
            super(PatchEmbed, self).__init__(**kwargs)
            with self.name_scope():
                self.conv = nn.Conv2D(dim, patch, patch, in_channels=channels)

        def hybrid_forward(self, F, x):
            # (N, D, H', W') to (N, H' W', D): the grid read row by row
            return F.transpose(F.reshape(self.conv(x), (0, 0, -1)), axes=(0, 2, 1))

    class ClassToken(nn.HybridBlock):
        def __init__(self, dim, **kwargs):
            super(ClassToken, self).__init__(**kwargs)
            self.weight = self.params.get("weight", shape=(dim,))

        def hybrid_forward(self, F, x, weight):
            first = F.slice_axis(x, axis=1, begin=0, end=1)  # (N, 1, D): the shape to broadcast to
            return F.concat(F.broadcast_like(F.reshape(weight, (1, 1, -1)), first), x, dim=1)

    class PositionEmbedding(nn.HybridBlock):
        """x plus the table's first L rows (GPT's context may be longer than the sequence)."""

        def __init__(self, length, dim, **kwargs):
            super(PositionEmbedding, self).__init__(**kwargs)
            self.weight = self.params.get("weight", shape=(length, dim))

        def hybrid_forward(self, F, x, weight):
            rows = F.slice_like(F.expand_dims(weight, 0), x, axes=(1,))
            return F.broadcast_add(x, rows)

    class FirstToken(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.squeeze(F.slice_axis(x, axis=1, begin=0, end=1), axis=1)

    _CLASSES.update(SelfAttention=SelfAttention, TanhGELU=TanhGELU, PatchEmbed=PatchEmbed,
                    ClassToken=ClassToken, PositionEmbedding=PositionEmbedding, FirstToken=FirstToken)
    return _CLASSES


def load_canonical(mx, blocks, params):
    """Set a built model's parameters from workers.models.pure's canonical layout ({path: {name:
    array}}; ``blocks``: the Translator's {path: block}): the cross-checks' way in
    (tests/attention_checks.py). An attention's q, k and v go into the interleaved (3D, D)
    projection: head h's rows are its q rows, then its k rows, then its v rows."""
    import numpy as np

    for path, values in params.items():
        layer = blocks[path]
        if "q_weight" in values:
            heads = layer.heads
            dim = values["q_weight"].shape[0]
            weight = np.stack([values[k + "_weight"].reshape(heads, dim // heads, dim) for k in "qkv"], 1)
            bias = np.stack([values[k + "_bias"].reshape(heads, dim // heads) for k in "qkv"], 1)
            pairs = [(layer.qkv.weight, weight.reshape(3 * dim, dim)), (layer.qkv.bias, bias.reshape(-1)),
                     (layer.out.weight, values["out_weight"]), (layer.out.bias, values["out_bias"])]
        elif hasattr(layer, "gamma"):  # layer norm
            pairs = [(layer.gamma, values["weight"]), (layer.beta, values["bias"])]
        else:
            target = layer.conv if hasattr(layer, "conv") else layer
            pairs = [(getattr(target, name), value) for name, value in values.items()]
        for param, value in pairs:
            param.set_data(mx.nd.array(value, dtype="float32"))

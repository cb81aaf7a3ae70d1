"""The attention models' nodes (issue 25) as Flax (linen) modules, for layers.Network.

Written as Flax's users write a transformer: ``nn.MultiHeadDotProductAttention`` (its separate
query, key, value and output DenseGeneral projections, Flax's dot_product_attention inside) with
``nn.make_causal_mask`` for the causal mask, ``nn.LayerNorm``, ``nn.gelu``, the patch embedding as
an ``nn.Conv`` of stride patch, and the tied output as ``nn.Embed.attend`` on the model's one
embedding. Imported by layers.py once jax and flax are imported.

Parameter names (each node's layer is named after its place in the walk, as layers.py names every
layer): attentionN/{query,key,value,out}/{kernel,bias}, layernormN/{scale,bias},
patch_embedN/{kernel,bias}, class_tokenN/cls, position_embeddingN/pos_embedding,
embeddingN/embedding. ``load_canonical`` maps workers.models.pure's canonical (PyTorch) layout
onto them.
"""

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from workers import models
from workers.adapters.jax.initializers import constant, normal, uniform

OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token", "position_embedding",
       "first_token", "tied_output")

# What MultiHeadDotProductAttention calls between its projections (BENCH_JAX_ATTENTION; the
# adapter's setup() reads it): "flax", Linen's default attention_fn, flax.linen.dot_product_attention
# (einsums and a softmax in the compute dtype, the causal mask nn.make_causal_mask); "jax.nn",
# jax.nn.dot_product_attention with is_causal (what Flax NNX's attention module calls when there is
# no dropout: float32 scores, and cuDNN's fused kernel where JAX's GPU build picks it).
KERNELS = ("flax", "jax.nn")
_KERNEL_HOW = {
    "flax": "flax.linen.dot_product_attention (einsums and a softmax), "
            "nn.make_causal_mask for the causal mask",
    "jax.nn": "attention_fn=jax.nn.dot_product_attention (is_causal for the causal mask; XLA's "
              "implementation or cuDNN's fused kernel, as JAX picks)",
}

# How each attention node is written, as Flax's users write it (recorded in the run's execution).
HOW = {
    "attention": "flax.linen.MultiHeadDotProductAttention (query, key, value and out DenseGeneral "
                 "projections; deterministic, no weight dropout) with {}",
    "layernorm": "flax.linen.LayerNorm",
    "gelu": "flax.linen.gelu (approximate=False: erf; approximate=True: tanh)",
    "patch_embed": "flax.linen.Conv of stride patch (NHWC), reshaped row by row to (N, L, D)",
    "tied_output": "flax.linen.Embed.attend on the token embedding (one table)",
}


def _initializer(rule, fans):
    """A Flax initializer for one models.INIT rule (as the PyTorch translation applies it)."""
    if rule["distribution"] == "constant":
        return constant(rule["value"])
    scale = models.init_scale(rule["scale"], *fans)
    if rule["distribution"] == "normal":  # every normal rule here has mean 0
        return normal(scale)
    return uniform(scale)


class ClassToken(nn.Module):
    """A learned (D,) token put first in every sequence."""

    @nn.compact
    def __call__(self, x):
        rule = models.INIT["class_token"]["weight"]
        token = self.param("cls", _initializer(rule, None), (x.shape[-1],))
        token = jnp.broadcast_to(token.astype(x.dtype), (x.shape[0], 1, x.shape[-1]))
        return jnp.concatenate([token, x], axis=1)


class PositionEmbedding(nn.Module):
    """A learned (length, D) table added to a sequence's positions (its first L rows for L tokens)."""

    length: int

    @nn.compact
    def __call__(self, x):
        rule = models.INIT["position_embedding"]["weight"]
        fans = (self.length, x.shape[-1])
        table = self.param("pos_embedding", _initializer(rule, fans), (self.length, x.shape[-1]))
        return x + table[:x.shape[1]].astype(x.dtype)


def how(op, kernel="flax"):
    """HOW[op], the attention's with its kernel's words."""
    return HOW[op].format(_KERNEL_HOW[kernel]) if op == "attention" else HOW[op]


def module(node, x, shape, name, tables, kernel="flax"):
    """The output of attention node ``node`` on ``x`` (input shape ``shape``, channels first for
    an image); called inside layers.Network's compact __call__, so its modules are the Network's
    submodules. ``tables``: the nn.Embed modules made so far (a tied_output uses the one);
    ``kernel``: the attention's (KERNELS)."""
    op = node["op"]
    if op == "layernorm":
        rules = models.INIT[op]
        return nn.LayerNorm(epsilon=node["eps"], scale_init=_initializer(rules["weight"], None),
                            bias_init=_initializer(rules["bias"], None), name=name)(x)
    if op == "gelu":
        return nn.gelu(x, approximate=node["approximate"] == "tanh")
    if op == "attention":
        return _attention(node, x, shape, name, kernel)
    if op == "patch_embed":
        rules, fans, p = models.INIT[op], models.fans(node, shape[0]), node["patch"]
        y = nn.Conv(node["dim"], (p, p), (p, p), padding="VALID", name=name,
                    kernel_init=_initializer(rules["weight"], fans),
                    bias_init=_initializer(rules["bias"], fans))(x)
        return y.reshape((y.shape[0], -1, y.shape[-1]))  # (N, H'W', D): the grid row by row
    if op == "class_token":
        return ClassToken(name=name)(x)
    if op == "position_embedding":
        return PositionEmbedding(node["length"], name=name)(x)
    if op == "first_token":
        return x[:, 0]
    if op == "tied_output":
        if len(tables) != 1:  # shapes.walk has checked the sizes
            raise ValueError("tied_output needs the model's one embedding, found {}".format(len(tables)))
        return tables[0].attend(x)
    raise ValueError("not an attention node: {!r}".format(op))


def _attention(node, x, shape, name, kernel):
    rules, dim = models.INIT["attention"], shape[-1]
    fans = models.fans(node, dim)  # each projection D x D: one Glorot bound for all four
    mask, options = None, {}
    if kernel == "jax.nn":
        options["attention_fn"] = functools.partial(jax.nn.dot_product_attention,
                                                    is_causal=bool(node["causal"]))
    elif node["causal"]:  # (1, 1, L, L): position i attends to positions j <= i
        mask = nn.make_causal_mask(jnp.ones((1, x.shape[1]), jnp.int32), dtype=jnp.bool_)
    layer = nn.MultiHeadDotProductAttention(
        num_heads=node["heads"], kernel_init=_initializer(rules["weight"], fans),
        bias_init=_initializer(rules["bias"], fans), dropout_rate=0.0, deterministic=True, name=name,
        **options)
    return layer(x, mask=mask)


def layer_names(layers):
    """{canonical path ("3.body.1"): the Flax layer name ("attention5")}: layers.Network's walk,
    which counts every node (residuals and branches included) in the order it meets them."""
    names, count = {}, [0]

    def walk(nodes, path):
        for i, node in enumerate(nodes):
            key = "{}{}".format(path, i)
            names[key] = "{}{}".format(node["op"], count[0])
            count[0] += 1
            if node["op"] == "residual":
                walk(node["body"], key + ".body.")
                walk(node["shortcut"], key + ".shortcut.")
            elif node["op"] == "concat":
                for branch in node["branches"]:
                    walk(branch, key + ".branch.")

    walk(layers, "")
    return names


def load_canonical(params, arch, canonical):
    """``params`` (the Flax parameter tree) with every node of ``canonical`` ({path: {name:
    array}} in workers.models.pure's layout: PyTorch's) put in its place, as float32; a new tree."""
    import numpy as np

    names = layer_names(arch["layers"])
    ops = dict((path, node["op"]) for path, node in _paths(arch["layers"], ""))
    out = jax.tree_util.tree_map(lambda a: a, dict(params))  # a new outer tree; leaves replaced
    for path, values in canonical.items():
        v = dict((k, np.asarray(a, np.float32)) for k, a in values.items())
        out[names[path]] = _flax_layout(ops[path], v, params[names[path]])
    return out


def _flax_layout(op, v, current):
    """One node's canonical arrays in its Flax layer's names and shapes (checked against them)."""
    if op == "attention":
        d = v["q_weight"].shape[0]
        heads, depth = current["query"]["kernel"].shape[1:]
        layer = {}
        for short, long in (("q", "query"), ("k", "key"), ("v", "value")):
            # y = x W^T: DenseGeneral's kernel[i, h, e] = W[h * depth + e, i]
            layer[long] = {"kernel": v[short + "_weight"].T.reshape(d, heads, depth),
                           "bias": v[short + "_bias"].reshape(heads, depth)}
        layer["out"] = {"kernel": v["out_weight"].T.reshape(heads, depth, d), "bias": v["out_bias"]}
    elif op == "dense":
        layer = {"kernel": v["weight"].T, "bias": v["bias"]} if "bias" in v else {"kernel": v["weight"].T}
    elif op == "layernorm":
        layer = {"scale": v["weight"], "bias": v["bias"]}
    elif op == "patch_embed":  # (D, C, p, p) -> HWIO
        layer = {"kernel": v["weight"].transpose(2, 3, 1, 0), "bias": v["bias"]}
    elif op == "class_token":
        layer = {"cls": v["weight"]}
    elif op == "position_embedding":
        layer = {"pos_embedding": v["weight"]}
    elif op == "embedding":
        layer = {"embedding": v["weight"]}
    else:
        raise ValueError("no canonical layout for {!r}".format(op))
    got = jax.tree_util.tree_map(lambda a: tuple(a.shape), layer)
    want = jax.tree_util.tree_map(lambda a: tuple(a.shape), dict(current))
    if got != want:
        raise ValueError("{}: canonical shapes {} for Flax's {}".format(op, got, want))
    return layer


def _paths(layers, path):
    for i, node in enumerate(layers):
        key = "{}{}".format(path, i)
        yield key, node
        if node["op"] == "residual":
            for item in _paths(node["body"], key + ".body."):
                yield item
            for item in _paths(node["shortcut"], key + ".shortcut."):
                yield item

"""The attention models' nodes (workers.models: ViT and GPT) in Keras 3, for layers.Builder, and
load_canonical, which sets a built model from workers.models.pure's canonical layout (the checks).

Keras's own layers where it has them: MultiHeadAttention, LayerNormalization, Conv2D for the patch
embedding, Embedding. Four small layers Keras lacks (the class token, the learned positions, the
first token, and the embedding that also reads its table backwards for the tied output) are made
once keras is imported.
"""

import functools

from workers import models

_CLASSES = {}

OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token", "position_embedding",
       "first_token", "tied_output")

# How each node is written, as Keras's users write it (recorded in the run's execution["layers"]).
HOW = {
    "attention": "keras.layers.MultiHeadAttention (use_causal_mask=True for the causal mask): "
                 "EinsumDense query, key, value and output projections, then "
                 "keras.ops.dot_product_attention, which on the TensorFlow backend is two tf.einsum "
                 "and a float32 tf.nn.softmax (Keras has no fused attention kernel for TensorFlow)",
    "layernorm": "keras.layers.LayerNormalization",
    "gelu": "keras.activations.gelu (approximate=False: erf; True: tanh) in an Activation layer",
    "patch_embed": "keras.layers.Conv2D of stride patch on NHWC, reshaped row by row to (N, L, D)",
    "tied_output": "the token Embedding layer called again with reverse=True: x times its "
                   "transposed table (KerasHub's ReversibleEmbedding; one variable)",
}


def uses_tied_output(layers):
    return any(node["op"] == "tied_output" for node in layers)


def node(builder, node, x, shape, path):
    """The Keras layers for an attention-model node on ``x`` (channels-first ``shape``)."""
    keras, op = builder.keras, node["op"]
    layers, classes = keras.layers, _layer_classes(keras)
    if op == "layernorm":
        layer = layers.LayerNormalization(epsilon=node["eps"],
                                          gamma_initializer=builder.initializer(op, "weight", None),
                                          beta_initializer=builder.initializer(op, "bias", None))
    elif op == "gelu":
        approximate = {"none": False, "tanh": True}[node["approximate"]]
        return layers.Activation(functools.partial(keras.activations.gelu, approximate=approximate))(x)
    elif op == "attention":
        return _attention(builder, node, x, shape, path)
    elif op == "patch_embed":
        fans = models.fans(node, shape[0])
        conv = layers.Conv2D(node["dim"], node["patch"], node["patch"], "valid",
                             kernel_initializer=builder.initializer(op, "weight", fans),
                             bias_initializer=builder.initializer(op, "bias", fans))
        builder.paths[path] = conv
        grid = models.out_shape(node, shape)[0]
        return layers.Reshape((grid, node["dim"]))(conv(x))  # (H', W') row by row: i * W' + j
    elif op == "class_token":
        layer = classes["ClassToken"](builder.initializer(op, "weight", None))
    elif op == "position_embedding":
        init = builder.initializer(op, "weight", models.fans(node, shape[-1]))
        layer = classes["PositionEmbedding"](node["length"], init)
    elif op == "first_token":
        return classes["FirstToken"]()(x)
    else:  # tied_output: shapes.walk has checked the sizes
        if len(builder.tables) != 1:
            raise ValueError("tied_output needs the model's one embedding, found {}".format(
                len(builder.tables)))
        return builder.tables[0](x, reverse=True)
    builder.paths[path] = layer
    return layer(x)


def _attention(builder, node, x, shape, path):
    """keras.layers.MultiHeadAttention, self-attention; each projection Glorot uniform on its own.

    MultiHeadAttention clones its kernel initializer for the four projections, seed included, so a
    seeded initializer would draw the query, key and value kernels alike: each is drawn again
    here from its own seed once the call has built them.
    """
    keras, dim, heads = builder.keras, shape[-1], node["heads"]
    rules = models.INIT["attention"]
    bound = models.init_scale(rules["weight"]["scale"], *models.fans(node, dim))
    layer = keras.layers.MultiHeadAttention(
        heads, dim // heads, use_bias=True, kernel_initializer="zeros",
        bias_initializer=builder.initializer("attention", "bias", None))
    out = layer(x, x, use_causal_mask=node["causal"])
    for dense in projections(layer):
        init = keras.initializers.RandomUniform(-bound, bound, seed=builder.next_seed())
        dense.kernel.assign(init(tuple(dense.kernel.shape), dtype=dense.kernel.dtype))
    builder.paths[path] = layer
    return out


def projections(layer):
    return layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense


def embedding(builder, node, shape):
    """An Embedding layer (the tied kind where the model has a tied_output), INIT's rule or the
    node's own std."""
    rule = models.node_init(node)["weight"]
    fans = models.fans(node, shape[-1])
    keras = builder.keras
    if rule["distribution"] == "normal":
        init = keras.initializers.RandomNormal(rule["mean"], models.init_scale(rule["scale"], *fans),
                                               seed=builder.next_seed())
    else:
        init = builder.initializer("embedding", "weight", fans)
    cls = _layer_classes(keras)["TiedEmbedding"] if builder.tied else keras.layers.Embedding
    layer = cls(node["vocab"], node["dim"], embeddings_initializer=init)
    builder.tables.append(layer)
    return layer


def _layer_classes(keras):
    if not _CLASSES:
        ops = keras.ops

        class ClassToken(keras.layers.Layer):
            """A learned (D,) vector put before the sequence."""

            def __init__(self, initializer, **kwargs):
                super(ClassToken, self).__init__(**kwargs)
                self.initializer = initializer

            def build(self, input_shape):
                self.weight = self.add_weight(shape=(input_shape[-1],), initializer=self.initializer,
                                              name="weight")

            def call(self, x):
                token = ops.cast(self.weight, x.dtype)
                token = ops.broadcast_to(token, (ops.shape(x)[0], 1, x.shape[-1]))
                return ops.concatenate([token, x], axis=1)

        class PositionEmbedding(keras.layers.Layer):
            """A learned (length, D) table added to the first L positions."""

            def __init__(self, length, initializer, **kwargs):
                super(PositionEmbedding, self).__init__(**kwargs)
                self.length, self.initializer = length, initializer

            def build(self, input_shape):
                self.weight = self.add_weight(shape=(self.length, input_shape[-1]),
                                              initializer=self.initializer, name="weight")

            def call(self, x):
                return x + ops.cast(self.weight[:x.shape[1]], x.dtype)

        class FirstToken(keras.layers.Layer):
            def call(self, x):
                return x[:, 0]

            def compute_output_shape(self, input_shape):
                return (input_shape[0], input_shape[2])

        class TiedEmbedding(keras.layers.Embedding):
            """An Embedding that, called with reverse=True, gives logits x E^T from its own table."""

            def call(self, inputs, reverse=False):
                if not reverse:
                    return super(TiedEmbedding, self).call(inputs)
                table = ops.cast(self.embeddings, self.compute_dtype)
                return ops.matmul(ops.cast(inputs, self.compute_dtype), ops.transpose(table))

            def compute_output_spec(self, inputs, reverse=False):
                if not reverse:
                    return super(TiedEmbedding, self).compute_output_spec(inputs)
                shape = tuple(inputs.shape[:-1]) + (self.input_dim,)
                return keras.KerasTensor(shape, dtype=self.compute_dtype)

        _CLASSES.update(ClassToken=ClassToken, PositionEmbedding=PositionEmbedding,
                        FirstToken=FirstToken, TiedEmbedding=TiedEmbedding)
    return _CLASSES


def load_canonical(paths, params):
    """Set a built model's parameters from workers.models.pure's canonical (PyTorch) layout:
    ``paths`` the Builder's {node path: Keras layer}, ``params`` {path: {name: array}}."""
    import numpy as np

    for path, values in params.items():
        layer = paths[path]
        p = {k: np.asarray(v, dtype=np.float32) for k, v in values.items()}
        name = type(layer).__name__
        if name == "MultiHeadAttention":
            _load_attention(layer, p)
        elif name == "Dense":
            layer.kernel.assign(p["weight"].T)
            if "bias" in p:
                layer.bias.assign(p["bias"])
        elif name == "Conv2D":  # (D, C, p, p) to (p, p, C, D)
            layer.kernel.assign(p["weight"].transpose(2, 3, 1, 0))
            layer.bias.assign(p["bias"])
        elif name == "LayerNormalization":
            layer.gamma.assign(p["weight"])
            layer.beta.assign(p["bias"])
        elif "Embedding" in name and hasattr(layer, "embeddings"):
            layer.embeddings.assign(p["weight"])
        else:  # ClassToken, PositionEmbedding
            layer.weight.assign(p["weight"])


def _load_attention(layer, p):
    """Each (D, D) projection W (y = x W^T) as Keras's kernels: query, key and value (D, heads,
    D/heads) = W^T split by output column, head by head; output (heads, D/heads, D) = W^T split
    by input row."""
    query, key, value, output = projections(layer)
    heads, width = query.kernel.shape[1], query.kernel.shape[2]
    for dense, name in ((query, "q"), (key, "k"), (value, "v")):
        dense.kernel.assign(p[name + "_weight"].T.reshape(-1, heads, width))
        dense.bias.assign(p[name + "_bias"].reshape(heads, width))
    output.kernel.assign(p["out_weight"].T.reshape(heads, width, -1))
    output.bias.assign(p["out_bias"])

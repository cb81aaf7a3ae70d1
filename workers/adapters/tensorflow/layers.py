"""The model definition (workers.models) translated into a Keras 3 functional model, for the
TensorFlow adapter.

keras is not imported here at module level: the adapter hands it in after setup(), and the two
layers Keras lacks are made on first use.
"""

from workers import models
from workers.adapters import base
from workers.adapters.tensorflow import transformer

_LAYERS = {}  # the custom Keras layer classes, made once keras is imported
_SEED_STRIDE = 100003  # per-layer initialiser and dropout seeds: seed * stride + layer number


class Builder(object):
    """Walks an architecture's layer list, calling Keras layers on functional-API tensors.

    Shapes are tracked channels-first, as workers.models defines them; the tensors are NHWC.
    """

    def __init__(self, keras, seed):
        self.keras = keras
        self.layers = keras.layers
        self.seed = seed
        self.count = 0
        self.paths = {}  # {node path (workers.models.pure's): the Keras layer holding its parameters}
        self.tables = []  # the Embedding layers made so far, the one a tied_output reads
        self.tied = False

    def model(self, arch):
        self.tied = transformer.uses_tied_output(arch["layers"])
        if arch["tokens"]:
            inputs = self.keras.Input(shape=tuple(arch["input"]), dtype="int64", name="tokens")
        else:
            c, h, w = arch["input"]
            inputs = self.keras.Input(shape=(h, w, c), name="images")
        outputs, shape = self.walk(arch["layers"], inputs, tuple(arch["input"]))
        return self.keras.Model(inputs, outputs, name=arch["name"]), shape

    def walk(self, layers, x, shape, path=""):
        for i, node in enumerate(layers):
            x = self.node(node, x, shape, "{}{}".format(path, i))
            shape = models.out_shape(node, shape)
        return x, shape

    def next_seed(self):
        self.count += 1
        return self.seed * _SEED_STRIDE + self.count

    def initializer(self, op, name, fans):
        """A seeded Keras initializer for models.INIT[op][name]."""
        init, rule = self.keras.initializers, models.INIT[op][name]
        if rule["distribution"] == "constant":
            return init.Constant(rule["value"])
        scale = models.init_scale(rule["scale"], *fans)
        if rule["distribution"] == "normal":
            return init.RandomNormal(rule["mean"], scale, seed=self.next_seed())
        if rule["distribution"] == "uniform":
            return init.RandomUniform(-scale, scale, seed=self.next_seed())
        raise ValueError("unknown INIT distribution {!r}".format(rule["distribution"]))

    def node(self, node, x, shape, path):
        op, layers = node["op"], self.layers
        if op in transformer.OPS:
            return transformer.node(self, node, x, shape, path)
        if op == "conv":
            return self.conv(node, x, shape)
        if op == "dense":  # on the last axis: a flat (C,) input or each position of an (L, D) one
            fans = models.fans(node, shape[-1])
            layer = layers.Dense(node["out"], use_bias=node["bias"],
                                 kernel_initializer=self.initializer(op, "weight", fans),
                                 bias_initializer=self.initializer(op, "bias", fans))
            self.paths[path] = layer
            return layer(x)
        if op == "bn":
            return layers.BatchNormalization(
                axis=-1, momentum=1.0 - node["momentum"], epsilon=node["eps"],
                gamma_initializer=self.initializer(op, "weight", None),
                beta_initializer=self.initializer(op, "bias", None),
                moving_mean_initializer="zeros", moving_variance_initializer="ones")(x)
        if op in ("relu", "relu6"):
            return layers.ReLU(max_value=6.0 if op == "relu6" else None)(x)
        if op == "maxpool":
            return self.maxpool(node, x)
        if op == "adaptive_avgpool":
            return self.adaptive_avgpool(node["size"], x, shape)
        if op == "global_avgpool":
            return layers.GlobalAveragePooling2D()(x)
        if op == "flatten":
            return layers.Flatten()(x)  # H, W, C order: a fixed permutation of the next dense's inputs
        if op == "dropout":
            return layers.Dropout(node["p"], seed=self.next_seed())(x)
        if op == "residual":
            body = self.walk(node["body"], x, shape, path + ".body.")[0]
            shortcut = self.walk(node["shortcut"], x, shape, path + ".shortcut.")[0] if node["shortcut"] else x
            out = layers.Add()([body, shortcut])
            return layers.ReLU()(out) if node["post"] == "relu" else out
        if op == "concat":  # channels-last: channels are the last axis
            return layers.Concatenate(axis=-1)([self.walk(b, x, shape)[0] for b in node["branches"]])
        if op == "embedding":
            layer = transformer.embedding(self, node, shape)
            self.paths[path] = layer
            return layer(x)
        if op == "gru":
            return self.gru(node, x, shape)
        raise base.not_supported("layer op", op, "TensorFlow")

    def conv(self, node, x, shape):
        layers, k, s, p = self.layers, node["kernel"], node["stride"], node["padding"]
        fans = models.fans(node, shape[0])
        weight, bias = self.initializer("conv", "weight", fans), self.initializer("conv", "bias", fans)
        padding = _padding(k, s, p)
        if padding == "valid" and p:
            x = layers.ZeroPadding2D(p)(x)
        if node["groups"] > 1 and node["groups"] == shape[0]:
            # Depthwise: TensorFlow's own kernel (a grouped Conv2D goes through XLA on CPU).
            return layers.DepthwiseConv2D(k, s, padding, depth_multiplier=node["out"] // shape[0],
                                          use_bias=node["bias"], depthwise_initializer=weight,
                                          bias_initializer=bias)(x)
        return layers.Conv2D(node["out"], k, s, padding, groups=node["groups"], use_bias=node["bias"],
                             kernel_initializer=weight, bias_initializer=bias)(x)

    def gru(self, node, x, shape):
        """PyTorch's GRU (workers.models) is Keras's with reset_after=True; its last state only.

        Each of kernel, recurrent kernel and the (2, 3H) bias draws from its own seed.
        """
        fans = models.fans(node, shape[-1])
        return self.layers.GRU(node["hidden"], reset_after=True,
                               kernel_initializer=self.initializer("gru", "weight", fans),
                               recurrent_initializer=self.initializer("gru", "weight", fans),
                               bias_initializer=self.initializer("gru", "bias", fans))(x)

    def maxpool(self, node, x):
        k, s, p = node["kernel"], node["stride"], node["padding"]
        padding = _padding(k, s, p)
        if padding == "valid" and p:
            x = _layer_classes(self.keras)["pad"](p, float("-inf"))(x)  # padding never wins the max
        return self.layers.MaxPooling2D(k, s, padding)(x)

    def adaptive_avgpool(self, size, x, shape):
        h, w = shape[1], shape[2]
        if (h, w) == (size, size):
            return x
        if h % size == 0 and w % size == 0:
            return self.layers.AveragePooling2D((h // size, w // size))(x)
        pool = _layer_classes(self.keras)["adaptive"]
        return pool(models.pool_matrix(h, size), models.pool_matrix(w, size))(x)


def _padding(kernel, stride, padding):
    """'same' where TensorFlow's 'same' is exactly PyTorch's symmetric padding, else 'valid'.

    With stride 1 and 2p = k - 1, 'same' pads p on every side (max-pool padding never counts);
    with stride 2 TensorFlow pads the bottom and right first, so those get explicit padding.
    """
    if padding and stride == 1 and 2 * padding == kernel - 1:
        return "same"
    return "valid"


def _layer_classes(keras):
    """Two small layers Keras lacks, defined once keras is imported."""
    if not _LAYERS:

        class ConstantPad2D(keras.layers.Layer):
            """Symmetric spatial padding of NHWC tensors with a constant (-inf before max-pool)."""

            def __init__(self, padding, value, **kwargs):
                super(ConstantPad2D, self).__init__(**kwargs)
                self.padding, self.value = padding, value

            def call(self, x):
                p = self.padding
                return keras.ops.pad(x, [[0, 0], [p, p], [p, p], [0, 0]], constant_values=self.value)

        class AdaptiveAveragePooling2D(keras.layers.Layer):
            """PyTorch's AdaptiveAvgPool2d as fixed averaging matrices: out = A_h . x . A_w^T."""

            def __init__(self, rows, cols, **kwargs):
                super(AdaptiveAveragePooling2D, self).__init__(**kwargs)
                self.rows, self.cols = rows, cols  # constants, not weights

            def call(self, x):
                rows = keras.ops.convert_to_tensor(self.rows, dtype=x.dtype)
                cols = keras.ops.convert_to_tensor(self.cols, dtype=x.dtype)
                return keras.ops.einsum("ih,nhwc,jw->nijc", rows, x, cols)

        _LAYERS.update(pad=ConstantPad2D, adaptive=AdaptiveAveragePooling2D)
    return _LAYERS

"""workers.models architectures as one Flax (linen) module, for the JAX adapter.

Imported by the adapter after setup() has imported jax and flax. Shapes are tracked
channels-first, as workers.models defines them; the arrays are NHWC (token ids: (N, L) int32).
Every layer with weights is named after its place in the walk (``conv0``, ``bn1``, ``dense17``,
``gru1``, ...), so the weights of one architecture can be matched one to one with another
framework's (tests/test_jax_adapter.py). The attention models' nodes are in attention.py.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from workers import models
from workers.adapters.jax import attention
from workers.adapters.jax.initializers import normal, uniform


DEPTHWISE = ("shifted", "grouped")  # how a depthwise convolution is computed (see depthwise)


def network(arch, depthwise="grouped", attention_kernel="flax"):
    """The Flax module for an architecture; call init/apply with NHWC images (or int32 token
    ids, shape (N, L)) and train=. ``depthwise``: "shifted" computes a convolution with one
    filter per channel by `depthwise`, "grouped" by flax's grouped nn.Conv. ``attention_kernel``:
    what the attention module calls (attention.KERNELS)."""
    return Network(layers=_frozen(arch["layers"]), input_shape=tuple(arch["input"]),
                   depthwise=depthwise, attention_kernel=attention_kernel)


def _frozen(value):
    """Lists and dicts as tuples, so the module's attributes hash (Flax compares modules)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _node(frozen):
    node = {}
    for key, value in frozen:
        if key in ("body", "shortcut"):
            value = [_node(n) for n in value]
        elif key == "branches":  # concat: a list of layer lists
            value = [[_node(n) for n in branch] for branch in value]
        node[key] = value
    return node


class BatchNorm(nn.Module):
    """PyTorch's BatchNorm: normalises with the biased batch variance, but keeps the unbiased one
    (n / (n - 1)) in its running average; momentum weighs the new statistic (the models' rule).

    flax.linen.BatchNorm keeps the biased variance: written out here so both frameworks'
    evaluation sees the same statistics.
    """

    momentum: float
    eps: float

    @nn.compact
    def __call__(self, x, train):
        c = x.shape[-1]
        scale = self.param("scale", nn.initializers.ones, (c,))
        bias = self.param("bias", nn.initializers.zeros, (c,))
        mean_v = self.variable("batch_stats", "mean", lambda: jnp.zeros((c,), jnp.float32))
        var_v = self.variable("batch_stats", "var", lambda: jnp.ones((c,), jnp.float32))
        axes = tuple(range(x.ndim - 1))
        if train:
            mean = x.mean(axes)
            var = jnp.square(x - mean).mean(axes)
            n = x.size // c
            if not self.is_initializing():
                m = self.momentum
                mean_v.value = (1 - m) * mean_v.value + m * mean
                var_v.value = (1 - m) * var_v.value + m * var * (n / max(n - 1, 1))
        else:  # the float32 statistics in the compute dtype (a bf16/fp16 run stays 16-bit)
            mean, var = mean_v.value.astype(x.dtype), var_v.value.astype(x.dtype)
        return (x - mean) * (scale * jax.lax.rsqrt(var + self.eps)) + bias


class GRU(nn.Module):
    """PyTorch's GRU (one layer, batch first, from a zero state), in PyTorch's parameter layout:
    weight_ih (3H, I), weight_hh (3H, H), bias_ih, bias_hh, gates r, z, n stacked in that order.
    Returns the last state (N, H).

    flax.linen.GRUCell is another function: it has no recurrent biases for r and z, so it has fewer
    parameters; written out here, with the recurrence a jax.lax.scan over the time steps.
    """

    hidden: int

    @nn.compact
    def __call__(self, x):
        gates, inputs = 3 * self.hidden, x.shape[-1]
        fans = (inputs, self.hidden)
        rules = models.INIT["gru"]
        weight = uniform(models.init_scale(rules["weight"]["scale"], *fans))
        bias = uniform(models.init_scale(rules["bias"]["scale"], *fans))
        w_ih = self.param("weight_ih", weight, (gates, inputs))
        w_hh = self.param("weight_hh", weight, (gates, self.hidden))
        b_ih = self.param("bias_ih", bias, (gates,))
        b_hh = self.param("bias_hh", bias, (gates,))
        # Every step's input projection in one product, time first for the scan: (L, N, 3H).
        projected = jnp.einsum("nli,gi->lng", x, w_ih) + b_ih

        def step(h, xg):
            x_r, x_z, x_n = jnp.split(xg, 3, axis=-1)
            h_r, h_z, h_n = jnp.split(h @ w_hh.T + b_hh, 3, axis=-1)
            r = jax.nn.sigmoid(x_r + h_r)
            z = jax.nn.sigmoid(x_z + h_z)
            n = jnp.tanh(x_n + r * h_n)
            return (1.0 - z) * n + z * h, None

        h0 = jnp.zeros((x.shape[0], self.hidden), projected.dtype)
        return jax.lax.scan(step, h0, projected)[0]


class Network(nn.Module):
    layers: tuple
    input_shape: tuple
    depthwise: str = "grouped"
    attention_kernel: str = "flax"

    @nn.compact
    def __call__(self, x, train):
        # The node counter that names the layers, and the nn.Embed modules made so far (the one a
        # tied_output multiplies by).
        counter = [0, []]
        return self.walk([_node(n) for n in self.layers], x, self.input_shape, train, counter)[0]

    def walk(self, layers, x, shape, train, counter):
        for node in layers:
            x = self.node(node, x, shape, train, counter)
            shape = models.out_shape(node, shape)
        return x, shape

    def node(self, node, x, shape, train, counter):
        op = node["op"]
        counter[0] += 1
        name = "{}{}".format(op, counter[0] - 1)
        if op in attention.OPS:
            return attention.module(node, x, shape, name, counter[1], self.attention_kernel)
        if op == "conv":
            fans = models.fans(node, shape[0])
            p = node["padding"]
            init = normal(models.init_scale("he_fan_out", *fans))
            if self.depthwise == "shifted" and 1 < node["groups"] == shape[0] == node["out"]:
                return DepthwiseConv(node["out"], node["kernel"], node["stride"], p, node["bias"],
                                     init, nn.initializers.zeros, name=name)(x)
            return nn.Conv(node["out"], (node["kernel"],) * 2, (node["stride"],) * 2,
                           padding=((p, p), (p, p)), feature_group_count=node["groups"],
                           use_bias=node["bias"], name=name,
                           kernel_init=init, bias_init=nn.initializers.zeros)(x)
        if op == "dense":  # on the last axis: a flat (D,) input or each position of an (L, D) one
            fans = models.fans(node, shape[-1])
            return nn.Dense(node["out"], use_bias=node["bias"], name=name,
                            kernel_init=uniform(models.init_scale("glorot", *fans)),
                            bias_init=nn.initializers.zeros)(x)
        if op == "bn":
            return BatchNorm(node["momentum"], node["eps"], name=name)(x, train)
        if op == "relu":
            return nn.relu(x)
        if op == "relu6":
            return jnp.clip(x, 0.0, 6.0)
        if op == "maxpool":
            k, s, p = node["kernel"], node["stride"], node["padding"]
            # reduce_window pads with -inf for a max: padding never wins, as in PyTorch.
            return nn.max_pool(x, (k, k), (s, s), padding=((p, p), (p, p)))
        if op == "adaptive_avgpool":
            return _adaptive_avgpool(x, node["size"], shape)
        if op == "global_avgpool":
            return x.mean(axis=(1, 2))
        if op == "flatten":
            return x.reshape((x.shape[0], -1))  # H, W, C order: a fixed permutation of the next dense
        if op == "dropout":
            return nn.Dropout(node["p"], deterministic=not train, name=name)(x)
        if op == "embedding":
            # A lookup in a (vocab, dim) table: Flax's Embed is exactly that (jnp.take).
            std = models.init_scale(models.node_init(node)["weight"]["scale"], *models.fans(node, shape[-1]))
            table = nn.Embed(node["vocab"], node["dim"], embedding_init=normal(std), name=name)
            counter[1].append(table)
            return table(x)
        if op == "gru":
            return GRU(node["hidden"], name=name)(x)
        if op == "concat":
            # Each branch on the same input; NHWC, so the channels are the last axis.
            outs = [self.walk(branch, x, shape, train, counter)[0] for branch in node["branches"]]
            return jnp.concatenate(outs, axis=-1)
        if op == "residual":
            body = self.walk(node["body"], x, shape, train, counter)[0]
            short = self.walk(node["shortcut"], x, shape, train, counter)[0] if node["shortcut"] else x
            out = body + short
            return nn.relu(out) if node["post"] == "relu" else out
        from workers.adapters import base
        raise base.not_supported("layer op", op, "JAX")


def depthwise(x, kernel, stride, pad):
    """A depthwise convolution (NHWC; kernel (k, k, 1, C): one k x k filter per channel) written as
    k * k strided slices of the padded input, each times its kernel tap, summed: the function of
    lax.conv_general_dilated with feature_group_count = C. XLA's CPU backend fuses this into
    elementwise loops, forward and backward; the grouped convolution falls to a much slower path
    there (docs/fairness.md, "JAX's MobileNetV2"; benchmarks/frameworks/jax_depthwise.py)."""
    k = kernel.shape[0]
    n, h, w, c = x.shape
    ho = (h + 2 * pad - k) // stride + 1
    wo = (w + 2 * pad - k) // stride + 1
    padded = jnp.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    out = None
    for a in range(k):
        for b in range(k):
            end = (n, a + stride * (ho - 1) + 1, b + stride * (wo - 1) + 1, c)
            tap = jax.lax.slice(padded, (0, a, b, 0), end, (1, stride, stride, 1)) * kernel[a, b, 0]
            out = tap if out is None else out + tap
    return out


class DepthwiseConv(nn.Module):
    """nn.Conv with feature_group_count = channels = features, computed by `depthwise`: the same
    parameters (kernel (k, k, 1, C), bias (C,)) under the same names, so weights match one to one."""

    features: int
    kernel_size: int
    stride: int
    padding: int
    use_bias: bool
    kernel_init: object
    bias_init: object

    @nn.compact
    def __call__(self, x):
        k = self.kernel_size
        kernel = self.param("kernel", self.kernel_init, (k, k, 1, self.features))
        y = depthwise(x, kernel, self.stride, self.padding)
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, (self.features,))
        return y


def _adaptive_avgpool(x, size, shape):
    h, w = shape[1], shape[2]
    if (h, w) == (size, size):
        return x
    if h % size == 0 and w % size == 0:
        window = (h // size, w // size)
        return nn.avg_pool(x, window, window)
    # PyTorch's overlapping windows as fixed averaging matrices: out = A_h . x . A_w^T.
    rows = jnp.asarray(models.pool_matrix(h, size), x.dtype)
    cols = jnp.asarray(models.pool_matrix(w, size), x.dtype)
    return jnp.einsum("ih,nhwc,jw->nijc", rows, x, cols)

"""The benchmark's architectures, written once as data.

Every framework adapter translates the same layer list into its own layers, so the models are
identical by construction; ``infer`` counts parameters in pure Python and the tests hold each
framework's count to it. Standard library only, Python 3.6 syntax (Singa's interpreter).

Conventions every translator must follow (see docs/models.md):

- shapes are channels-first, (C, H, W); ``flatten`` flattens in C, H, W order;
- convolution and max-pool padding is explicit and symmetric, output sizes round down;
- ``bn`` momentum is the weight of the new batch statistic (PyTorch's convention; Keras's
  ``momentum`` is ``1 - momentum``); ``global_avgpool`` yields a (C,) vector;
- ``residual`` adds ``body(x)`` and ``shortcut(x)`` (an empty shortcut is the identity), then
  applies ``post`` ("relu" or None);
- ``concat`` runs each of its ``branches`` (layer lists) on the same input and concatenates their
  outputs along the channels, in branch order (Inception's module);
- a recurrent model's input is a sequence of token ids, shape (L,); ``embedding`` maps it to
  (L, dim); ``gru`` runs over the L steps from a zero state and yields its last state (hidden,):
  PyTorch's GRU (cuDNN's), with gates in the order reset, update, new, and two biases per gate
  (input and recurrent), the recurrent one inside the reset product of the new gate:
  n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h. Keras's GRU with
  ``reset_after=True`` is the same function with the gates in the order update, reset, new.
"""

import math

MODELS = ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16", "googlenet")  # image models
RECURRENT = ("gru",)  # sequence models: token ids in, no image size
ALL_MODELS = MODELS + RECURRENT

# The public comparison's IMDB sentiment network (ilkarman/DeepLearningFrameworks): a vocabulary of
# 30,000 words, embeddings of 125, one GRU layer of 100 units, sequences of 150 tokens. Token ids
# follow Keras's IMDB convention: 0 pads, 1 starts a review, 2 stands for a word outside the
# vocabulary, words are 3 and up.
VOCAB = 30000
EMBEDDING = 125
GRU_UNITS = 100
SEQ_LEN = 150
PAD, START, OOV = 0, 1, 2

# PyTorch's BatchNorm defaults, written down so that frameworks with other defaults
# (Keras: eps 1e-3, momentum 0.99 in its convention) are set to the same values.
BN_EPS = 1e-5
BN_MOMENTUM = 0.1

# PyTorch lays image batches out channels_last from this image size up, on the CPU (docs/fairness.md,
# "PyTorch"): measured faster for ResNet50 at 64, 128 and 224 px and VGG16 at 224 px; at 32 px
# ResNet50 was 1.35x slower in it. Here, not in the adapter, because the orchestrator's fairness
# notes name it too, and the orchestrator never imports an adapter.
CHANNELS_LAST_MIN_SIZE = 64

# The initialisation every adapter applies after building, so that no framework starts from a
# better or worse place because of its own defaults. "scale" names how to compute the number
# passed to the distribution; init_scale() computes it, fans() gives fan_in and fan_out.
# - conv: He/Kaiming normal on fan_out (the ResNet/MobileNet/torchvision choice for ReLU nets).
# - dense: Glorot/Xavier uniform. Every framework ships it under one definition, it scales with
#   the layer's width (a fixed std such as 0.01 does not), and it is Keras's default.
# - biases 0; batch-norm gamma 1 and beta 0 (running mean 0, running variance 1).
INIT = {
    "conv": {
        "weight": {"distribution": "normal", "mean": 0.0, "scale": "he_fan_out"},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    "dense": {
        "weight": {"distribution": "uniform", "scale": "glorot"},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    "bn": {
        "weight": {"distribution": "constant", "value": 1.0},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    # embedding: N(0, 1), PyTorch's default (Keras's is uniform on +-0.05).
    "embedding": {
        "weight": {"distribution": "normal", "mean": 0.0, "scale": "one"},
    },
    # gru: every weight and both biases uniform on +-1/sqrt(hidden), PyTorch's, MXNet's and Paddle's
    # default (Keras: Glorot kernel, orthogonal recurrent kernel, zero biases).
    "gru": {
        "weight": {"distribution": "uniform", "scale": "one_over_sqrt_hidden"},
        "bias": {"distribution": "uniform", "scale": "one_over_sqrt_hidden"},
    },
}


def init_scale(rule, fan_in, fan_out):
    """The number an INIT weight rule needs: the std of a normal, the bound of a uniform.

    he_fan_out: std = sqrt(2 / fan_out).
    glorot: uniform on [-b, b] with b = sqrt(6 / (fan_in + fan_out)).
    """
    if rule == "he_fan_out":
        return math.sqrt(2.0 / fan_out)
    if rule == "glorot":
        return math.sqrt(6.0 / (fan_in + fan_out))
    if rule == "one":
        return 1.0
    if rule == "one_over_sqrt_hidden":  # fan_out is the hidden size for a gru node (fans())
        return 1.0 / math.sqrt(fan_out)
    raise ValueError("unknown init scale rule {!r}".format(rule))


def fans(node, in_channels):
    """(fan_in, fan_out) of a conv or dense node, as PyTorch computes them.

    For a grouped conv fan_in is divided by the groups but fan_out is not (out * k * k); other
    frameworks compute fan_out of depthwise kernels differently, hence the explicit formula.
    """
    if node["op"] == "dense":
        return in_channels, node["out"]
    if node["op"] == "gru":
        return in_channels, node["hidden"]
    if node["op"] == "embedding":
        return node["vocab"], node["dim"]
    area = node["kernel"] * node["kernel"]
    return in_channels // node["groups"] * area, node["out"] * area


# -- layer constructors: the vocabulary ---------------------------------------------------------


def conv(out, kernel, stride=1, padding=0, groups=1, bias=True):
    return {"op": "conv", "out": out, "kernel": kernel, "stride": stride,
            "padding": padding, "groups": groups, "bias": bias}


def bn():
    return {"op": "bn", "eps": BN_EPS, "momentum": BN_MOMENTUM}


def maxpool(kernel, stride, padding=0):
    return {"op": "maxpool", "kernel": kernel, "stride": stride, "padding": padding}


def dense(out):
    return {"op": "dense", "out": out, "bias": True}


def simple(op):
    """relu, relu6, flatten, global_avgpool: nodes without attributes."""
    return {"op": op}


def dropout(p):
    return {"op": "dropout", "p": p}


def adaptive_avgpool(size):
    return {"op": "adaptive_avgpool", "size": size}


def residual(body, shortcut, post):
    return {"op": "residual", "body": body, "shortcut": shortcut, "post": post}


def concat(branches):
    return {"op": "concat", "branches": branches}


def embedding(vocab, dim):
    return {"op": "embedding", "vocab": vocab, "dim": dim}


def gru(hidden):
    """One GRU layer over the whole sequence, from a zero state; its output is the last state."""
    return {"op": "gru", "hidden": hidden}


# -- the five models ----------------------------------------------------------------------------


def _small_cnn(classes):
    """ilkarman/DeepLearningFrameworks' CIFAR-10 CNN; its dense input follows the image size."""
    relu = simple("relu")
    return [
        conv(50, 3, padding=1), relu, conv(50, 3, padding=1), relu,
        maxpool(2, 2), dropout(0.25),
        conv(100, 3, padding=1), relu, conv(100, 3, padding=1), relu,
        maxpool(2, 2), dropout(0.25),
        simple("flatten"), dense(512), relu, dropout(0.5), dense(classes),
    ]


def _alexnet(classes):
    """Single-tower AlexNet as torchvision, Gluon and Paddle ship it."""
    relu = simple("relu")
    return [
        conv(64, 11, 4, 2), relu, maxpool(3, 2),
        conv(192, 5, 1, 2), relu, maxpool(3, 2),
        conv(384, 3, 1, 1), relu, conv(256, 3, 1, 1), relu, conv(256, 3, 1, 1), relu,
        maxpool(3, 2), adaptive_avgpool(6), simple("flatten"),
        dropout(0.5), dense(4096), relu, dropout(0.5), dense(4096), relu, dense(classes),
    ]


def _vgg16(classes):
    relu = simple("relu")
    layers = []
    for block in ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512)):
        for width in block:
            layers += [conv(width, 3, padding=1), relu]
        layers.append(maxpool(2, 2))
    return layers + [
        adaptive_avgpool(7), simple("flatten"),
        dense(4096), relu, dropout(0.5), dense(4096), relu, dropout(0.5), dense(classes),
    ]


def _conv_bn(out, kernel, stride=1, groups=1, act="relu"):
    """Bias-free conv with 'same'-style padding for odd kernels, BN, optional activation."""
    layers = [conv(out, kernel, stride, (kernel - 1) // 2, groups, bias=False), bn()]
    return layers + ([simple(act)] if act else [])


def _inverted_residual(inp, out, stride, expand):
    hidden = inp * expand
    body = _conv_bn(hidden, 1, act="relu6") if expand != 1 else []
    body += _conv_bn(hidden, 3, stride, groups=hidden, act="relu6")
    body += _conv_bn(out, 1, act=None)
    if stride == 1 and inp == out:
        return [residual(body, [], None)]
    return body


def _mobilenet_v2(classes):
    """Width 1.0: every channel count is already a multiple of 8, so no rounding is needed."""
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    layers = _conv_bn(32, 3, 2, act="relu6")
    inp = 32
    for expand, out, repeats, stride in settings:
        for i in range(repeats):
            layers += _inverted_residual(inp, out, stride if i == 0 else 1, expand)
            inp = out
    layers += _conv_bn(1280, 1, act="relu6")
    return layers + [simple("global_avgpool"), dropout(0.2), dense(classes)]


def _bottleneck(inp, width, stride):
    """ResNet v1.5: the stride sits on the 3x3 conv, not on the first 1x1."""
    out = width * 4
    body = _conv_bn(width, 1) + _conv_bn(width, 3, stride) + _conv_bn(out, 1, act=None)
    shortcut = []
    if stride != 1 or inp != out:
        shortcut = [conv(out, 1, stride, 0, bias=False), bn()]
    return residual(body, shortcut, "relu")


def _resnet50(classes):
    layers = _conv_bn(64, 7, 2) + [maxpool(3, 2, 1)]
    inp = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(_bottleneck(inp, width, stride if i == 0 else 1))
            inp = width * 4
    return layers + [simple("global_avgpool"), dense(classes)]


def _inception(c1, c3r, c3, c5r, c5, pool):
    """Inception v1's module, torchvision's variant: four branches (1x1; 1x1 then 3x3; 1x1 then
    3x3 where the paper has 5x5; 3x3 max-pool then 1x1), each convolution bias-free with batch
    norm and ReLU, concatenated along the channels."""
    return concat([
        _conv_bn(c1, 1),
        _conv_bn(c3r, 1) + _conv_bn(c3, 3),
        _conv_bn(c5r, 1) + _conv_bn(c5, 3),
        [maxpool(3, 1, 1)] + _conv_bn(pool, 1),
    ])


def _googlenet(classes):
    """GoogLeNet (Inception v1) as torchvision builds it, without its auxiliary classifiers:
    batch norm after every convolution (the BN-free original does not train from this benchmark's
    initialisation: its loss diverged within four steps), 3x3 in the "5x5" branch, no local
    response normalisation. torchvision's ceil-mode pools are written as padded floor-mode pools,
    which give the same sizes at 224 px (56, 28, 14, 7) and the same parameters."""
    return (
        _conv_bn(64, 7, 2) + [maxpool(3, 2, 1)]
        + _conv_bn(64, 1) + _conv_bn(192, 3) + [maxpool(3, 2, 1)]
        + [_inception(64, 96, 128, 16, 32, 32), _inception(128, 128, 192, 32, 96, 64), maxpool(3, 2, 1)]
        + [_inception(192, 96, 208, 16, 48, 64), _inception(160, 112, 224, 24, 64, 64),
           _inception(128, 128, 256, 24, 64, 64), _inception(112, 144, 288, 32, 64, 64),
           _inception(256, 160, 320, 32, 128, 128), maxpool(2, 2)]
        + [_inception(256, 160, 320, 32, 128, 128), _inception(384, 192, 384, 48, 128, 128)]
        + [simple("global_avgpool"), dropout(0.2), dense(classes)]
    )


def _gru(classes):
    """The IMDB sentiment GRU: embedding, one GRU layer, its last state to a dense layer."""
    return [embedding(VOCAB, EMBEDDING), gru(GRU_UNITS), dense(classes)]


_BUILDERS = {
    "small_cnn": _small_cnn,
    "alexnet": _alexnet,
    "mobilenet_v2": _mobilenet_v2,
    "resnet50": _resnet50,
    "vgg16": _vgg16,
    "googlenet": _googlenet,
    "gru": _gru,
}


POOLS = ("maxpool", "adaptive_avgpool", "global_avgpool")


def build_arch(name, classes, image_size, features=False):
    """The architecture as data: {"name", "input": [3, H, W], "classes", "layers", "output"}.

    ``output`` is the shape the layers end in: [classes], or with ``features`` the pooled
    features (see features_layers). Every translator checks its model against it.
    """
    if name not in _BUILDERS:
        raise ValueError("unknown model {!r}; known: {}".format(name, ", ".join(ALL_MODELS)))
    layers = _BUILDERS[name](classes)
    shape = input_shape(name, image_size)
    if features:
        layers = features_layers(layers, shape)
    arch = {"name": name, "input": list(shape), "classes": classes, "layers": layers,
            "features": bool(features), "tokens": name in RECURRENT}
    arch["output"] = list(_walk(layers, arch["input"])[0]) if features else [classes]
    return arch


def input_shape(name, image_size):
    """(3, H, W) for an image model; (SEQ_LEN,) token ids for a recurrent one (no image size)."""
    return (SEQ_LEN,) if name in RECURRENT else (3, image_size, image_size)


def features_layers(layers, shape):
    """The layers up to the last top-level pooling layer, flattened: the pooled features the
    feature-extraction benchmarks read (ResNet50 and MobileNetV2: the global average pool,
    2048 and 1280 values; AlexNet and VGG16: their adaptive pool, flattened; small_cnn: its
    last max-pool, flattened). The classifier after it is left out. A recurrent model's
    features are its last GRU state."""
    if any(node["op"] == "gru" for node in layers):
        return list(layers[:max(i for i, node in enumerate(layers) if node["op"] == "gru") + 1])
    last = max(i for i, node in enumerate(layers) if node["op"] in POOLS)
    kept = list(layers[:last + 1])
    if len(_walk(kept, shape)[0]) != 1:
        kept.append(simple("flatten"))
    return kept


# -- shape inference ----------------------------------------------------------------------------


def _window(size, kernel, stride, padding, what):
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ValueError("{} (kernel {}, stride {}, padding {}) gets a spatial size of {} and "
                         "would give {}".format(what, kernel, stride, padding, size, out))
    return out


def _spatial_input(shape, what):
    if len(shape) != 3:
        raise ValueError("{} needs a (C, H, W) input, got {}".format(what, list(shape)))
    return shape


def _spatial(node, shape, what):
    c, h, w = _spatial_input(shape, what)
    args = (node["kernel"], node["stride"], node["padding"], what)
    return c, _window(h, *args), _window(w, *args)


def out_shape(node, shape):
    """Output shape (a tuple) of ``node`` for an input ``shape``; ValueError if it cannot apply."""
    op = node["op"]
    if op == "conv":
        c, h, w = _spatial(node, shape, "conv")
        if c % node["groups"] or node["out"] % node["groups"]:
            raise ValueError("conv groups {} do not divide {} -> {} channels".format(
                node["groups"], c, node["out"]))
        return node["out"], h, w
    if op == "maxpool":
        return _spatial(node, shape, "maxpool")
    if op in ("bn", "relu", "relu6", "dropout"):
        return tuple(shape)
    if op == "adaptive_avgpool":
        return _spatial_input(shape, op)[0], node["size"], node["size"]
    if op == "global_avgpool":
        return (_spatial_input(shape, op)[0],)
    if op == "flatten":
        size = 1
        for dim in shape:
            size *= dim
        return (size,)
    if op == "dense":
        if len(shape) != 1:
            raise ValueError("dense needs a flat input, got {}".format(list(shape)))
        return (node["out"],)
    if op == "embedding":
        if len(shape) != 1:
            raise ValueError("embedding needs a (L,) sequence of token ids, got {}".format(list(shape)))
        return shape[0], node["dim"]
    if op == "gru":
        if len(shape) != 2:
            raise ValueError("gru needs a (L, features) sequence, got {}".format(list(shape)))
        return (node["hidden"],)
    if op == "concat":
        outs = [_walk(branch, shape)[0] for branch in node["branches"]]
        if any(len(o) != 3 or o[1:] != outs[0][1:] for o in outs):
            raise ValueError("concat branches give {}: their spatial sizes differ".format(
                [list(o) for o in outs]))
        return (sum(o[0] for o in outs),) + tuple(outs[0][1:])
    if op == "residual":
        body = _walk(node["body"], shape)[0]
        short = _walk(node["shortcut"], shape)[0]
        if body != short:
            raise ValueError("residual body gives {} but shortcut gives {}".format(
                list(body), list(short)))
        return body
    raise ValueError("unknown op {!r}".format(op))


def node_parameters(node, shape):
    """Trainable parameters of ``node`` for an input ``shape`` (BN running stats excluded)."""
    op = node["op"]
    if op == "conv":
        per_out = shape[0] // node["groups"] * node["kernel"] * node["kernel"]
        return node["out"] * (per_out + (1 if node["bias"] else 0))
    if op == "bn":
        return 2 * shape[0]
    if op == "embedding":
        return node["vocab"] * node["dim"]
    if op == "gru":  # three gates, input and recurrent weights, two biases each
        hidden = node["hidden"]
        return 3 * hidden * (shape[-1] + hidden) + 2 * 3 * hidden
    if op == "dense":
        return node["out"] * (shape[0] + (1 if node["bias"] else 0))
    if op == "residual":
        return _walk(node["body"], shape)[1] + _walk(node["shortcut"], shape)[1]
    if op == "concat":
        return sum(_walk(branch, shape)[1] for branch in node["branches"])
    return 0


def _walk(layers, shape):
    """(output shape, parameters) of a layer list."""
    shape = tuple(shape)
    total = 0
    for node in layers:
        new_shape = out_shape(node, shape)
        total += node_parameters(node, shape)
        shape = new_shape
    return shape, total


def infer(arch):
    """{"output_shape": [...], "parameters": n} by shape inference; ValueError if it cannot run."""
    shape, total = _walk(arch["layers"], arch["input"])
    if list(shape) != arch["output"]:
        raise ValueError("{} ends in shape {}, expected {}".format(
            arch["name"], list(shape), arch["output"]))
    return {"output_shape": list(shape), "parameters": total}


_MIN_SIZE = {}
_MAX_SEARCH = 4096


def min_image_size(name):
    """The smallest square image size ``name`` accepts (searched upward once, then cached);
    1 for a recurrent model, which takes no image."""
    if name in RECURRENT:
        return 1
    if name not in _MIN_SIZE:
        for size in range(1, _MAX_SEARCH + 1):
            try:
                infer(build_arch(name, 10, size))
            except ValueError:
                continue
            _MIN_SIZE[name] = size
            break
        else:
            raise ValueError("{} accepts no image size up to {}".format(name, _MAX_SEARCH))
    return _MIN_SIZE[name]


def check_image_size(name, image_size):
    """Raise ValueError when ``name`` cannot run on ``image_size`` x ``image_size`` images."""
    needed = min_image_size(name)
    if image_size < needed:
        raise ValueError("image_size {} is too small for {} (needs at least {})".format(
            image_size, name, needed))

"""The numbers every framework is set to, so that none starts from its own defaults: which
models exist, the IMDB network's sizes, batch norm's, the optimizers' and the initialisation's
constants, and the adaptive average pool's averaging matrix. Standard library, Python 3.6.
"""

import math

MODELS = ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16", "googlenet",
          "vit_b16", "vit_tiny")  # image models
RECURRENT = ("gru",)  # sequence classifiers: token ids in, a class out, no image size
LANGUAGE = ("gpt2_small", "gpt_tiny")  # language models: token ids in, the next token at each position
TOKEN_MODELS = RECURRENT + LANGUAGE  # every model that reads token ids
ALL_MODELS = MODELS + RECURRENT + LANGUAGE
ATTENTION = ("vit_b16", "vit_tiny", "gpt2_small", "gpt_tiny")  # the transformers (issue 25)

# The language models' sizes: (vocabulary, context, width, layers, heads, MLP width). gpt2_small is
# GPT-2's smallest (124,439,808 parameters with its output tied to the token embedding); gpt_tiny
# is a small decoder of the same shape for tests and quick matrices.
GPT = {
    "gpt2_small": (50257, 1024, 768, 12, 12, 3072),
    "gpt_tiny": (512, 128, 64, 2, 4, 256),
}
# The vision transformers' sizes: (patch, width, layers, heads, MLP width). vit_b16 is ViT-B/16
# (torchvision's vit_b_16: 86,567,656 parameters at 224 px and 1000 classes); vit_tiny a small one.
VIT = {
    "vit_b16": (16, 768, 12, 12, 3072),
    "vit_tiny": (4, 64, 2, 4, 128),
}
VIT_LN_EPS = 1e-6  # torchvision's ViT
GPT_LN_EPS = 1e-5  # GPT-2's layer_norm_epsilon
GPT_INIT_STD = 0.02  # GPT-2's initializer_range: token and position embeddings

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

# PyTorch's optimizer defaults, the reference every other adapter writes out for its own optimizer
# where that framework's defaults differ (docs/frameworks/<framework>.md): Adam's betas and epsilon,
# RMSProp's smoothing constant (alpha; Keras's and Paddle's rho, MXNet's gamma1) and epsilon.
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8
RMSPROP_ALPHA = 0.99
RMSPROP_EPS = 1e-8

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
    # The attention models' nodes (torchvision's ViT and GPT-2's choices where they agree):
    # layer norm gamma 1, beta 0; each of the four attention projections (query, key, value,
    # output; D x D) Glorot uniform on its own (fan_in = fan_out = D), biases 0; the patch
    # embedding's convolution normal with std sqrt(1 / fan_in) (torchvision's), bias 0; the class
    # token 0; position embeddings N(0, 0.02) (GPT-2's initializer_range). A number as "scale" is
    # the std (or bound) itself.
    "layernorm": {
        "weight": {"distribution": "constant", "value": 1.0},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    "attention": {
        "weight": {"distribution": "uniform", "scale": "glorot"},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    "patch_embed": {
        "weight": {"distribution": "normal", "mean": 0.0, "scale": "one_over_sqrt_fan_in"},
        "bias": {"distribution": "constant", "value": 0.0},
    },
    "class_token": {
        "weight": {"distribution": "constant", "value": 0.0},
    },
    "position_embedding": {
        "weight": {"distribution": "normal", "mean": 0.0, "scale": 0.02},
    },
}


def node_init(node):
    """INIT's rules for ``node``: its op's, with an embedding's own ``std`` where it has one."""
    rules = INIT[node["op"]]
    if node["op"] == "embedding" and node.get("std") is not None:
        rules = dict(rules, weight={"distribution": "normal", "mean": 0.0, "scale": node["std"]})
    return rules


def init_scale(rule, fan_in, fan_out):
    """The number an INIT weight rule needs: the std of a normal, the bound of a uniform.

    A number: itself. he_fan_out: std = sqrt(2 / fan_out).
    glorot: uniform on [-b, b] with b = sqrt(6 / (fan_in + fan_out)).
    """
    if isinstance(rule, (int, float)):
        return float(rule)
    if rule == "he_fan_out":
        return math.sqrt(2.0 / fan_out)
    if rule == "glorot":
        return math.sqrt(6.0 / (fan_in + fan_out))
    if rule == "one":
        return 1.0
    if rule == "one_over_sqrt_fan_in":
        return 1.0 / math.sqrt(fan_in)
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
    if node["op"] == "attention":  # each projection is D x D
        return in_channels, in_channels
    if node["op"] == "patch_embed":
        area = node["patch"] * node["patch"]
        return in_channels * area, node["dim"] * area
    if node["op"] in ("layernorm", "class_token", "position_embedding"):
        return in_channels, in_channels
    area = node["kernel"] * node["kernel"]
    return in_channels // node["groups"] * area, node["out"] * area


def pool_bins(size, out):
    """[(start, end)] of PyTorch's adaptive average pool along one axis of ``size`` to ``out``:
    output i averages inputs floor(i * size / out) to ceil((i + 1) * size / out) - 1 (end is
    exclusive). The bins need not be equal or disjoint (AlexNet's 1x1 map to 6x6)."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def pool_matrix(size, out):
    """(out, size) averaging matrix of PyTorch's adaptive average pool along one axis, for the
    frameworks that have no adaptive pool of that shape (out = A_h . x . A_w^T)."""
    rows = []
    for start, end in pool_bins(size, out):
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    return rows

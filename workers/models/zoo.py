"""The models, written in the vocabulary, and what the orchestrator asks of them: the architecture
as data (build_arch), the input shape, the pooled features, the smallest image size each accepts.
"""

from workers.models.reference import (
    ALL_MODELS, EMBEDDING, GPT, GPT_INIT_STD, GPT_LN_EPS, GRU_UNITS, LANGUAGE, RECURRENT, SEQ_LEN,
    TOKEN_MODELS, VIT, VIT_LN_EPS, VOCAB,
)
from workers.models.shapes import infer, walk
from workers.models.vocabulary import (
    adaptive_avgpool, attention, bn, class_token, concat, conv, dense, dropout, embedding,
    first_token, gelu, gru, layernorm, maxpool, patch_embed, position_embedding, residual, simple,
    tied_output,
)

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


# -- the attention models -------------------------------------------------------------------------


def _encoder_block(width, heads, mlp, eps, approximate, causal, p):
    """A pre-norm transformer block, as ViT and GPT-2 both have it: x + attention(norm(x)), then
    x + MLP(norm(x)), the MLP dense(mlp), GELU, dense(width); dropout ``p`` after the attention
    and after the MLP where p > 0 (GPT-2's residual dropout)."""
    drop = [dropout(p)] if p else []
    return [
        residual([layernorm(eps), attention(heads, causal)] + drop, [], None),
        residual([layernorm(eps), dense(mlp), gelu(approximate), dense(width)] + drop, [], None),
    ]


def _vit(name, classes, image_size):
    """ViT (torchvision's vit_b_16 layout): patch embedding, class token, learned positions for
    every patch and the class token, pre-norm blocks with exact GELU, a final layer norm, the class
    token's features to the classifier. No dropout (torchvision's default, 0.0)."""
    patch, width, depth, heads, mlp = VIT[name]
    grid = image_size // patch
    layers = [patch_embed(width, patch), class_token(), position_embedding(grid * grid + 1)]
    for _ in range(depth):
        layers += _encoder_block(width, heads, mlp, VIT_LN_EPS, "none", False, 0.0)
    return layers + [layernorm(VIT_LN_EPS), first_token(), dense(classes)]


def _gpt(name):
    """GPT-2: token embedding and learned positions (both N(0, 0.02)), embedding dropout 0.1,
    pre-norm causal blocks with the tanh GELU and residual dropout 0.1, a final layer norm, logits
    from the token embedding's table (tied, no bias). No attention-weight dropout (GPT-2 has 0.1
    there; the fused attentions of the frameworks differ in whether and how they apply it)."""
    vocab, context, width, depth, heads, mlp = GPT[name]
    layers = [embedding(vocab, width, std=GPT_INIT_STD), position_embedding(context), dropout(0.1)]
    for _ in range(depth):
        layers += _encoder_block(width, heads, mlp, GPT_LN_EPS, "tanh", True, 0.1)
    return layers + [layernorm(GPT_LN_EPS), tied_output(vocab)]


_BUILDERS = {
    "small_cnn": _small_cnn,
    "alexnet": _alexnet,
    "mobilenet_v2": _mobilenet_v2,
    "resnet50": _resnet50,
    "vgg16": _vgg16,
    "googlenet": _googlenet,
    "gru": _gru,
}
_SIZED = {  # builders that also need the image size or the sequence length
    "vit_b16": lambda classes, size, length: _vit("vit_b16", classes, size),
    "vit_tiny": lambda classes, size, length: _vit("vit_tiny", classes, size),
    "gpt2_small": lambda classes, size, length: _gpt("gpt2_small"),
    "gpt_tiny": lambda classes, size, length: _gpt("gpt_tiny"),
}


POOLS = ("maxpool", "adaptive_avgpool", "global_avgpool")


def build_arch(name, classes, image_size, features=False, sequence_length=None):
    """The architecture as data: {"name", "input": [3, H, W], "classes", "layers", "output"}.

    ``output`` is the shape the layers end in: [classes], or with ``features`` the pooled
    features (see features_layers); a language model's is [L, vocabulary] (its "classes" are
    the vocabulary; the ``classes`` argument does not apply). Every translator checks its model
    against it. ``tokens``: the input is token ids; ``language``: the output is the next token at
    every position (the loss and accuracy are over all positions).
    """
    if name in _SIZED:
        layers = _SIZED[name](classes, image_size, sequence_length)
    elif name in _BUILDERS:
        layers = _BUILDERS[name](classes)
    else:
        raise ValueError("unknown model {!r}; known: {}".format(name, ", ".join(ALL_MODELS)))
    shape = input_shape(name, image_size, sequence_length)
    language = name in LANGUAGE
    if language:
        classes = GPT[name][0]
    if features:
        layers = features_layers(layers, shape)
    arch = {"name": name, "input": list(shape), "classes": classes, "layers": layers,
            "features": bool(features), "tokens": name in TOKEN_MODELS, "language": language}
    if features or language:
        arch["output"] = list(walk(layers, arch["input"])[0])
    else:
        arch["output"] = [classes]
    return arch


def default_sequence_length(name):
    """A token model's sequence length where none is set: the GRU's SEQ_LEN, a language model's
    context; None for an image model."""
    if name in LANGUAGE:
        return GPT[name][1]
    if name in RECURRENT:
        return SEQ_LEN
    return None


def tokens_per_sample(name, sequence_length=None):
    """Tokens in one sample of a token model (what its throughput in tokens/s multiplies by); None
    for an image model."""
    if name not in TOKEN_MODELS:
        return None
    return input_shape(name, 1, sequence_length)[0]


def input_shape(name, image_size, sequence_length=None):
    """(3, H, W) for an image model; (L,) token ids for a token model (no image size): the GRU's
    SEQ_LEN, a language model's ``sequence_length`` (its context where None)."""
    if name in RECURRENT:
        return (SEQ_LEN,)
    if name in LANGUAGE:
        return (sequence_length or GPT[name][1],)
    return (3, image_size, image_size)


def features_layers(layers, shape):
    """The layers up to the last top-level pooling layer, flattened: the pooled features the
    feature-extraction benchmarks read (ResNet50 and MobileNetV2: the global average pool,
    2048 and 1280 values; AlexNet and VGG16: their adaptive pool, flattened; small_cnn: its
    last max-pool, flattened). The classifier after it is left out. A recurrent model's
    features are its last GRU state; a ViT's the class token's features after the final norm."""
    if any(node["op"] == "first_token" for node in layers):
        return list(layers[:max(i for i, node in enumerate(layers) if node["op"] == "first_token") + 1])
    if any(node["op"] == "gru" for node in layers):
        return list(layers[:max(i for i, node in enumerate(layers) if node["op"] == "gru") + 1])
    last = max(i for i, node in enumerate(layers) if node["op"] in POOLS)
    kept = list(layers[:last + 1])
    if len(walk(kept, shape)[0]) != 1:
        kept.append(simple("flatten"))
    return kept


_MIN_SIZE = {}
_MAX_SEARCH = 4096


def min_image_size(name):
    """The smallest square image size ``name`` accepts (searched upward once, then cached);
    1 for a token model, which takes no image."""
    if name in TOKEN_MODELS:
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

"""Which model-zoo model each of bench's models is compared with, per framework, and how they differ.

benchmarks/frameworks/zoo_parity.py prints these notes beside its timings; tests/test_zoo_parity.py holds the
parameter counts to them (counted by the real frameworks); docs/fairness.md explains them. The
differences were read from the zoo models' own definitions in the installed versions
(TensorFlow 2.21 / Keras 3.15, MXNet 1.9.1, Paddle 3.3.1, transformers 5.24) and their printed
layer lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.inside import zoo_common


@dataclass(frozen=True)
class Pair:
    zoo: str  # the constructor, as the framework ships it
    # Zoo minus port, trainable parameters at 1000 classes and 224 px (0: the same count).
    extra_parameters: int
    differences: tuple[str, ...]  # empty: the same architecture, layer for layer


SAME = ()
NO_ADAPTIVE_POOL = (
    "no adaptive average pooling before the classifier: its first dense layer's inputs follow the "
    "image size (the same count as bench's only at 224 px, where bench's pooling is the identity)"
)

PAIRS: dict[tuple[str, str], Pair] = {
    ("tensorflow", "resnet50"): Pair(
        "keras.applications.ResNet50",
        26_560,
        (
            "every convolution has a bias (53 convolutions, 26,560 biases; bench's, like the "
            "reference ResNet50, have none before BatchNorm)",
            "ResNet v1: the stride of each downsampling block is on its first 1x1 convolution "
            "(bench: v1.5, on the 3x3), so three 3x3 convolutions run on a quarter of the positions",
            "BatchNorm epsilon 1.001e-5 (bench: 1e-5)",
        ),
    ),
    ("tensorflow", "mobilenet_v2"): Pair(
        "keras.applications.MobileNetV2",
        0,
        (
            "stride-2 convolutions pad asymmetrically (TensorFlow's 'same', or ZeroPadding2D of "
            "0 top/left and 1 bottom/right); bench pads 1 on every side, as PyTorch does, with "
            "ZeroPadding2D and 'valid'",
            "no dropout before the classifier (bench: dropout 0.2)",
            "BatchNorm epsilon 1e-3 and momentum 0.999 (bench: 1e-5 and 0.9 in Keras's terms)",
        ),
    ),
    ("tensorflow", "vgg16"): Pair(
        "keras.applications.VGG16",
        0,
        (NO_ADAPTIVE_POOL, "no dropout in the classifier (bench: dropout 0.5 after each hidden dense layer)"),
    ),
    ("mxnet", "alexnet"): Pair(
        "mxnet.gluon.model_zoo.vision.alexnet",
        0,
        (NO_ADAPTIVE_POOL, "dropout after each hidden dense layer (bench, like torchvision: before)"),
    ),
    ("mxnet", "resnet50"): Pair(
        "mxnet.gluon.model_zoo.vision.resnet50_v1",
        18_880,
        (
            "ResNet v1: the stride of each downsampling block is on its first 1x1 convolution "
            "(bench: v1.5, on the 3x3); Gluon's zoo has no v1b (that is GluonCV's)",
            "the two 1x1 convolutions of every bottleneck's body have biases (18,880)",
        ),
    ),
    ("mxnet", "vgg16"): Pair("mxnet.gluon.model_zoo.vision.vgg16", 0, (NO_ADAPTIVE_POOL,)),
    ("mxnet", "mobilenet_v2"): Pair(
        "mxnet.gluon.model_zoo.vision.mobilenetv2_1.0",
        88,
        (
            "the first inverted residual (expansion 1) still has a 1x1 expansion convolution, "
            "BatchNorm and ReLU6 (+1,088 parameters)",
            "the classifier is a 1x1 convolution without bias (-1,000), with no dropout before it "
            "(bench: dense with bias, dropout 0.2)",
        ),
    ),
    ("paddle", "alexnet"): Pair(
        "paddle.vision.models.alexnet",
        0,
        (
            "no adaptive average pooling: its first dense layer has a fixed 9216 inputs, so it "
            "takes 224 px images only",
            "dropout in 'downscale_in_infer' mode (the kept units are not scaled in training)",
        ),
    ),
    ("paddle", "resnet50"): Pair("paddle.vision.models.resnet50", 0, SAME),
    ("paddle", "vgg16"): Pair("paddle.vision.models.vgg16", 0, SAME),
    ("paddle", "mobilenet_v2"): Pair("paddle.vision.models.mobilenet_v2", 0, SAME),
    # The attention models against Hugging Face Transformers (benchmarks/inside/zoo_pytorch.py), both
    # sides on PyTorch's scaled_dot_product_attention; the same parameters, differently laid out.
    **{
        ("pytorch", vit): Pair(
            "transformers.ViTForImageClassification",
            0,
            (
                "query, key and value are three nn.Linear layers (three matrix products a step); "
                "bench's port stacks them in one (3D, D) nn.Linear (one)",
                "the attention heads are split and merged by view/permute copies of its own",
            ),
        )
        for vit in ("vit_b16", "vit_tiny")
    },
    **{
        ("pytorch", gpt): Pair(
            "transformers.GPT2LMHeadModel",
            0,
            (
                "its projections are transformers' Conv1D (addmm with an (in, out) weight) where "
                "bench's port has nn.Linear ((out, in): the same numbers, transposed)",
                "it builds a causal mask and position ids each step; bench's port passes is_causal "
                "to scaled_dot_product_attention and slices its position table",
            ),
        )
        for gpt in ("gpt2_small", "gpt_tiny")
    },
}

# Frameworks without a model zoo bench can run here, and why.
UNAVAILABLE = {
    "singa": "Apache Singa ships no model zoo (its examples define their models by hand)",
    "jax": (
        "Flax ships no model zoo (the flax package has layers; its ImageNet ResNet is example code "
        "in its repository, not part of the package)"
    ),
}

NOT_SHIPPED = {
    ("tensorflow", "alexnet"): "keras.applications ships no AlexNet",
}
# PyTorch's CNNs have no zoo here: torchvision cannot be installed beside the CPU build of torch in
# this environment (its wheels for torch 2.13 need libtorch_cuda; docs/fairness.md).
TORCHVISION = (
    "torchvision cannot be installed beside the CPU build of torch in this environment: its wheels "
    "for torch 2.13 need libtorch_cuda (docs/fairness.md); the attention models compare with "
    "Hugging Face Transformers instead"
)
for _model in ("small_cnn", "alexnet", "mobilenet_v2", "resnet50", "vgg16", "googlenet", "gru"):
    NOT_SHIPPED[("pytorch", _model)] = TORCHVISION


def pairs_of(framework: str) -> list[str]:
    """bench's models that have a zoo counterpart in this framework."""
    return [model for (fw, model) in PAIRS if fw == framework]


# --- work per image, computed from the architecture (not measured) -----------------------------


def multiply_adds(layers: list[dict], shape: tuple[int, ...]) -> int:
    """Forward multiply-adds per image of convolutions and dense layers (the bulk of the work;
    the backward pass does about twice as many), walking workers.models layers."""
    from workers import models

    total = 0
    for node in layers:
        out = models.out_shape(node, shape)
        if node["op"] == "conv":
            per_output = shape[0] // node["groups"] * node["kernel"] ** 2
            total += out[0] * out[1] * out[2] * per_output
        elif node["op"] == "dense":
            total += shape[0] * node["out"]
        elif node["op"] == "residual":
            total += multiply_adds(node["body"], shape) + multiply_adds(node["shortcut"], shape)
        elif node["op"] == "concat":
            total += sum(multiply_adds(branch, shape) for branch in node["branches"])
        shape = out
    return total


def as_resnet_v1(layers: list[dict]) -> list[dict]:
    """bench's ResNet laid out as v1 (benchmarks/inside/zoo_common.py, which the zoo scripts run)."""
    return zoo_common.as_resnet_v1(layers)

"""The architectures as data: reference parameter counts, shape inference, image-size limits.

Pure Python, no framework: these counts are what every framework adapter is held to.
"""

from __future__ import annotations

import math

import pytest

from workers import data, models

# The reference counts docs/models.md lists (1000 classes at 224x224; small_cnn 10 classes at 32x32).
REFERENCE = {
    "small_cnn": (10, 32, 3_441_592),
    "alexnet": (1000, 224, 61_100_840),
    "mobilenet_v2": (1000, 224, 3_504_872),
    "resnet50": (1000, 224, 25_557_032),
    "vgg16": (1000, 224, 138_357_544),
    "googlenet": (1000, 224, 6_624_904),  # torchvision's GoogLeNet without its auxiliary heads
    "vit_b16": (1000, 224, 86_567_656),  # torchvision's vit_b_16 (issue 25)
    # vit_tiny at 32 px: patches of 4 (8 x 8 = 64 and the class token: 65 positions), width 64,
    # two blocks of MLP width 128, 10 classes; the sum written out, term by term.
    "vit_tiny": (
        10,
        32,
        (
            64 * (3 * 4 * 4 + 1)
            + 64
            + 65 * 64
            + 2 * (2 * 64 + 4 * 64 * 65 + 2 * 64 + 128 * 65 + 64 * 129)
            + 2 * 64
            + 10 * 65
        ),
    ),
}
MIN_SIZE = {
    "small_cnn": 4,
    "alexnet": 63,
    "mobilenet_v2": 1,
    "resnet50": 1,
    "vgg16": 32,
    "googlenet": 17,
    "vit_b16": 16,
    "vit_tiny": 4,
}
VOCABULARY = {
    "conv": {"out", "kernel", "stride", "padding", "groups", "bias"},
    "bn": {"eps", "momentum"},
    "relu": set(),
    "relu6": set(),
    "maxpool": {"kernel", "stride", "padding"},
    "adaptive_avgpool": {"size"},
    "global_avgpool": set(),
    "flatten": set(),
    "dense": {"out", "bias"},
    "dropout": {"p"},
    "residual": {"body", "shortcut", "post"},
    "concat": {"branches"},
    "embedding": {"vocab", "dim"},
    "gru": {"hidden"},
    "layernorm": {"eps"},
    "gelu": {"approximate"},
    "attention": {"heads", "causal"},
    "patch_embed": {"dim", "patch"},
    "class_token": set(),
    "position_embedding": {"length"},
    "first_token": set(),
    "tied_output": {"vocab"},
}
OPTIONAL = {"embedding": {"std"}}


def _nodes(layers):
    for node in layers:
        yield node
        if node["op"] == "residual":
            yield from _nodes(node["body"])
            yield from _nodes(node["shortcut"])
        if node["op"] == "concat":
            for branch in node["branches"]:
                yield from _nodes(branch)


@pytest.mark.parametrize("name", models.MODELS)
def test_reference_parameter_counts(name):
    classes, size, expected = REFERENCE[name]
    arch = models.build_arch(name, classes, size)
    assert arch["input"] == [3, size, size] and arch["classes"] == classes
    assert models.infer(arch) == {"output_shape": [classes], "parameters": expected}


@pytest.mark.parametrize("name", models.MODELS)
@pytest.mark.parametrize("classes", [10, 1000])
def test_every_model_infers_at_64(name, classes):
    assert models.infer(models.build_arch(name, classes, 64))["output_shape"] == [classes]


@pytest.mark.parametrize("name", ["alexnet", "mobilenet_v2", "resnet50", "vgg16"])
def test_counts_do_not_depend_on_image_size(name):
    counts = {models.infer(models.build_arch(name, 1000, s))["parameters"] for s in (64, 224, 300)}
    assert counts == {REFERENCE[name][2]}


def test_small_cnn_dense_input_follows_image_size():
    # 100 channels at image_size / 4 on each side feed the first dense layer.
    grow = models.infer(models.build_arch("small_cnn", 10, 64))["parameters"] - 3_441_592
    assert grow == (100 * 16 * 16 - 100 * 8 * 8) * 512


@pytest.mark.parametrize("name", models.MODELS)
def test_only_the_vocabulary_is_used(name):
    for node in _nodes(models.build_arch(name, 10, 64)["layers"]):
        assert set(node) - {"op"} - OPTIONAL.get(node["op"], set()) == VOCABULARY[node["op"]], node


@pytest.mark.parametrize("name", models.MODELS)
def test_min_image_size(name):
    size = models.min_image_size(name)
    assert size == MIN_SIZE[name]
    models.infer(models.build_arch(name, 10, size))
    if size > 1:
        with pytest.raises(ValueError):
            models.infer(models.build_arch(name, 10, size - 1))


def test_check_image_size_message():
    with pytest.raises(ValueError) as info:
        models.check_image_size("alexnet", 32)
    assert str(info.value) == "image_size 32 is too small for alexnet (needs at least 63)"
    models.check_image_size("alexnet", 63)
    models.check_image_size("vgg16", 224)


def test_too_small_names_the_layer():
    with pytest.raises(ValueError, match="maxpool .* spatial size of 2"):
        models.infer(models.build_arch("alexnet", 10, 62))


def test_unknown_model():
    with pytest.raises(ValueError, match="unknown model 'lenet'; known: small_cnn"):
        models.build_arch("lenet", 10, 32)


def test_residual_shapes_must_agree():
    arch = {
        "name": "bad",
        "input": [3, 8, 8],
        "classes": 4,
        "layers": [
            models.residual([models.conv(8, 3, padding=1)], [], None),
        ],
    }
    with pytest.raises(ValueError, match="residual body gives \\[8, 8, 8\\] but shortcut"):
        models.infer(arch)


def test_resnet50_is_v15_and_mobilenet_has_residuals():
    layers = models.build_arch("resnet50", 1000, 224)["layers"]
    down = [n for n in layers if n["op"] == "residual" and n["shortcut"]]
    assert len(down) == 4
    # v1.5: the stride-2 blocks put the stride on the 3x3 conv, not on the first 1x1.
    strided = [c for n in down for c in n["body"] if c["op"] == "conv" and c["stride"] == 2]
    assert [c["kernel"] for c in strided] == [3, 3, 3]
    mobile = models.build_arch("mobilenet_v2", 1000, 224)["layers"]
    assert sum(n["op"] == "residual" for n in mobile) == 10


def test_googlenet_is_inception_v1():
    layers = models.build_arch("googlenet", 1000, 224)["layers"]
    modules = [n for n in layers if n["op"] == "concat"]
    assert len(modules) == 9 and all(len(m["branches"]) == 4 for m in modules)
    shape = (3, 224, 224)
    sizes = []
    for node in layers:
        shape = models.out_shape(node, shape)
        if node["op"] == "concat":
            sizes.append(shape)
    # the paper's table 1: 3a 256 and 3b 480 at 28, 4a-4e 512 512 512 528 832 at 14, 5a 832, 5b 1024 at 7
    assert [s[0] for s in sizes] == [256, 480, 512, 512, 512, 528, 832, 832, 1024]
    assert [s[1] for s in sizes] == [28, 28, 14, 14, 14, 14, 14, 7, 7]
    assert not [
        n for n in models.build_arch("googlenet", 1000, 224, features=True)["layers"] if n["op"] == "dense"
    ]


def test_concat_branches_must_agree_in_size():
    arch = {
        "name": "bad",
        "input": [3, 8, 8],
        "classes": 4,
        "output": [4],
        "layers": [models.concat([[models.conv(4, 3, padding=1)], [models.conv(4, 3)]])],
    }
    with pytest.raises(ValueError, match="concat branches give .*: their spatial sizes differ"):
        models.infer(arch)


def test_init_is_data_and_scales():
    conv = models.conv(64, 3)
    assert models.fans(conv, 32) == (32 * 9, 64 * 9)
    depthwise = models.conv(96, 3, groups=96)
    assert models.fans(depthwise, 96) == (9, 96 * 9)  # fan_out is not divided by groups
    assert models.init_scale("he_fan_out", 288, 576) == math.sqrt(2 / 576)
    assert models.init_scale("glorot", 6400, 512) == math.sqrt(6 / 6912)
    for op, rules in models.INIT.items():
        tables = ("embedding", "class_token", "position_embedding")  # a table or a vector, no bias
        assert set(rules) == ({"weight"} if op in tables else {"weight", "bias"}), op
        for rule in rules.values():
            assert rule["distribution"] in ("normal", "uniform", "constant")
            if rule["distribution"] != "constant":
                models.init_scale(rule["scale"], 1, 1)
    with pytest.raises(ValueError):
        models.init_scale("lecun", 1, 1)


def test_split_sizes_without_numpy():
    assert data.split_sizes({"dataset_size": 256, "val_fraction": 0.2}) == (205, 51)
    assert data.split_sizes({"dataset_size": 6003, "val_fraction": 0.2}) == (4802, 1201)
    assert data.split_sizes({"dataset_size": 10, "val_fraction": 0.0}) == (10, 0)


def test_the_imdb_gru():
    """The public comparison's network: embedding 30,000 x 125, GRU 100, dense to 2 classes."""
    arch = models.build_arch("gru", 2, 224)
    assert arch["input"] == [150] and arch["tokens"]  # token ids; the image size does not apply
    assert [node["op"] for node in arch["layers"]] == ["embedding", "gru", "dense"]
    # 30,000 * 125 embeddings; GRU: 3 gates * 100 * (125 + 100) weights + 2 * 3 * 100 biases
    # (PyTorch's nn.GRU layout: input and recurrent bias per gate); dense 100 * 2 + 2
    assert models.infer(arch) == {"output_shape": [2], "parameters": 3_750_000 + 68_100 + 202}
    assert models.infer(models.build_arch("gru", 2, 8)) == models.infer(arch)
    features = models.build_arch("gru", 2, 64, features=True)
    assert features["output"] == [100] and features["layers"][-1]["op"] == "gru"
    assert models.min_image_size("gru") == 1
    for node in arch["layers"]:
        assert set(node) - {"op"} == VOCABULARY[node["op"]]


def test_gru_shapes_are_checked():
    with pytest.raises(ValueError, match="gru needs a"):
        models.out_shape(models.gru(10), (3, 8, 8))
    with pytest.raises(ValueError, match="embedding needs a"):
        models.out_shape(models.embedding(10, 4), (3, 8, 8))
    with pytest.raises(ValueError, match=r"dense needs a flat \(D,\) or an \(L, D\) input"):
        models.out_shape(models.dense(2), (3, 150, 125))
    assert models.out_shape(models.dense(2), (150, 125)) == (150, 2)  # each position (attention models)


def test_gru_init_scales():
    node = models.gru(100)
    fan_in, fan_out = models.fans(node, 125)
    assert models.init_scale(models.INIT["gru"]["weight"]["scale"], fan_in, fan_out) == pytest.approx(0.1)
    emb = models.embedding(30000, 125)
    assert models.init_scale(models.INIT["embedding"]["weight"]["scale"], *models.fans(emb, 150)) == 1.0

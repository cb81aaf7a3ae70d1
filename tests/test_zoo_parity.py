"""Zoo parity (benchmarks/frameworks/zoo_parity.py): bench's ports against the frameworks' own model zoos.

The parameter counts are counted by the real frameworks, in their own environments: bench's port
as its adapter builds it, and the zoo model as the framework ships it, at 224 px and 1000 classes,
must agree or differ by exactly the difference benchmarks/frameworks/zoo_models.py documents. A smoke test
runs the whole benchmark at a tiny size (its ratio is printed, never judged: timings on a shared
machine are not results).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.frameworks import zoo_models
from tests.drivers import framework_python, run_module
from workers import models

REPO = Path(__file__).resolve().parent.parent


ZOO_FRAMEWORKS = ("tensorflow", "mxnet", "paddle", "pytorch")  # PyTorch's: Hugging Face's attention models
# Reference counts (docs/models.md, torchvision's): ResNet50 v1.5 without conv biases, and Keras's with them.
RESNET50 = 25_557_032
KERAS_RESNET50 = 25_583_592


def parity(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.frameworks.zoo_parity", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_pair_names_a_model_and_explains_a_count_difference():
    for (framework, model), pair in zoo_models.PAIRS.items():
        assert framework in ZOO_FRAMEWORKS and model in models.ALL_MODELS
        assert pair.zoo.split(".")[0] in ("keras", "mxnet", "paddle", "transformers")
        if pair.extra_parameters:
            assert pair.differences, f"{framework} {model}: a count difference with no explanation"
    assert set(zoo_models.UNAVAILABLE) == {"singa", "jax"}


@pytest.mark.parametrize("framework", ["singa", "jax"])
def test_frameworks_without_a_zoo_say_why(framework):
    done = parity("--framework", framework, "--model", "resnet50")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{framework}: zoo parity unavailable: ")
    assert zoo_models.UNAVAILABLE[framework] in done.stdout


@pytest.mark.framework
def test_pytorch_has_no_cnn_zoo_and_says_why():
    """torchvision is the CNN zoo PyTorch's users reach for: its absence is checked in the PyTorch
    environment, not only remembered; the attention models compare with transformers instead."""
    framework_python("pytorch")
    done = parity("--framework", "pytorch", "--model", "resnet50")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pytorch resnet50: no zoo model to compare with: torchvision cannot")
    assert "(here: ModuleNotFoundError: No module named 'torchvision')" in done.stdout


def test_a_model_the_zoo_lacks_is_said():
    done = parity("--framework", "tensorflow", "--model", "alexnet")
    assert done.returncode == 0 and "keras.applications ships no AlexNet" in done.stdout, done.stderr


def test_model_is_required_without_counts():
    done = parity("--framework", "paddle")
    assert done.returncode == 2 and "--model is required" in done.stderr


@pytest.mark.slow
@pytest.mark.framework
@pytest.mark.parametrize("framework", ZOO_FRAMEWORKS)
def test_port_and_zoo_parameter_counts_agree_or_differ_as_documented(framework):
    python = framework_python(framework)
    pairs = zoo_models.pairs_of(framework)
    args = ["--count-only", "--model", ",".join(pairs), "--image-size", "224", "--classes", "1000"]
    args += ["--batch-size", "1", "--steps", "1", "--threads", "1"]
    done = run_module(python, f"benchmarks.inside.zoo_{framework}", *args, timeout=900)
    lines = {line["model"]: line for line in map(json.loads, done.stdout.splitlines()) if line}
    assert sorted(lines) == sorted(pairs)
    for model, line in lines.items():
        pair = zoo_models.PAIRS[(framework, model)]
        assert line["zoo"] == pair.zoo
        assert line["port_parameters"] == models.infer(models.build_arch(model, 1000, 224))["parameters"]
        assert line["zoo_parameters"] - line["port_parameters"] == pair.extra_parameters, (model, line)
    if framework == "pytorch":  # the attention models' reference counts (issue 25)
        assert lines["vit_b16"]["zoo_parameters"] == 86_567_656
        assert lines["gpt2_small"]["zoo_parameters"] == 124_439_808
        return
    assert lines["resnet50"]["port_parameters"] == RESNET50
    if framework == "tensorflow":
        assert lines["resnet50"]["zoo_parameters"] == KERAS_RESNET50


@pytest.mark.slow
@pytest.mark.framework
def test_zoo_parity_runs_end_to_end_and_prints_a_ratio(tmp_path):
    framework_python("paddle")
    saved = tmp_path / "zoo.json"
    done = parity(
        *("--framework", "paddle", "--model", "mobilenet_v2", "--image-size", "32", "--batch-size", "2"),
        *("--classes", "10", "--steps", "3", "--passes", "2", "--warmup", "1", "--threads", "1"),
        *("--idle-wait", "0", "--save", str(saved)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"bench/zoo per pass: median \d+\.\d{4}, range \d+\.\d{4}-\d+\.\d{4}", done.stdout)
    assert "architectures: the same, layer for layer" in done.stdout
    result = json.loads(saved.read_text())["result"]
    assert result["zoo"] == "paddle.vision.models.mobilenet_v2"
    assert result["port_parameters"] == result["zoo_parameters"] == 2_236_682
    for side in ("bench", "zoo"):  # 2 passes, every step taken by both sides
        assert [sum(1 for _ in p) for p in result["paired"][side]] == [-(-3 // result["chunk"])] * 2


@pytest.mark.slow
@pytest.mark.framework
@pytest.mark.parametrize("model", ["resnet50", "mobilenet_v2"])
def test_paddle_port_runs_the_zoo_models_operators(model):
    """Same architecture, so the same operators per step: the port's only extra is the adapter's
    loss accumulation (one add_), which keeps the loss on the device instead of reading it."""
    python = framework_python("paddle")
    args = ["--ops", "--model", model, "--image-size", "32", "--classes", "10", "--batch-size", "2"]
    args += ["--steps", "2", "--warmup", "1", "--threads", "1"]
    done = run_module(python, "benchmarks.inside.zoo_paddle", *args, timeout=600)
    out = json.loads(done.stdout.splitlines()[-1])
    bench, zoo = out["bench_ops"], out["zoo_ops"]
    assert bench.pop("add_") == 1 and "add_" not in zoo
    assert bench == zoo and sum(zoo.values()) > 100


def test_multiply_adds_and_the_v1_layout():
    """The work figures docs/fairness.md quotes, computed from the architectures."""
    arch = models.build_arch("resnet50", 1000, 224)
    shape = tuple(arch["input"])
    v15 = zoo_models.multiply_adds(arch["layers"], shape)
    v1_layers = zoo_models.as_resnet_v1(arch["layers"])
    v1 = zoo_models.multiply_adds(v1_layers, shape)
    assert (v15, v1) == (4_089_184_256, 3_857_973_248) and round(v15 / v1, 3) == 1.060
    assert models.infer({**arch, "layers": v1_layers})["parameters"] == models.infer(arch)["parameters"]
    assert arch["layers"] != v1_layers  # a copy: bench's own architecture is left as it is
    vgg = models.build_arch("vgg16", 1000, 224)
    assert round(zoo_models.multiply_adds(vgg["layers"], tuple(vgg["input"])) / 1e9, 2) == 15.47


@pytest.mark.slow
@pytest.mark.framework
def test_the_language_model_pair_runs_end_to_end(tmp_path):
    """bench's tiny GPT against transformers' GPT2LMHeadModel on the same token batches (issue 25)."""
    framework_python("pytorch")
    saved = tmp_path / "zoo.json"
    done = parity(
        *("--framework", "pytorch", "--model", "gpt_tiny", "--sequence-length", "16", "--batch-size", "2"),
        *("--classes", "10", "--steps", "2", "--passes", "2", "--warmup", "1", "--threads", "1"),
        *("--idle-wait", "0", "--save", str(saved)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"bench/zoo per pass: median \d+\.\d{4}", done.stdout)
    assert "architectures differ:" in done.stdout and "Conv1D" in done.stdout
    result = json.loads(saved.read_text())["result"]
    assert result["zoo"] == "transformers.GPT2LMHeadModel"
    assert result["port_parameters"] == result["zoo_parameters"] == 141_056

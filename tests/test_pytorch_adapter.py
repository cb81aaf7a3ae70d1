"""The PyTorch adapter against the real framework, driven in the PyTorch environment's interpreter.

torch never enters this pytest process: one driver script runs every check in a subprocess
(paying torch's import once) and writes plain JSON; each test reads its own part of it.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.drivers import checked, drive
from workers import models

# Every model but vit_b16, whose 86 M parameters are built in every framework once, by
# tests/test_across_frameworks.py (bench models): here that would cost minutes per framework.
ADAPTER_MODELS = [m for m in models.MODELS if m != "vit_b16"]

REPO = Path(__file__).resolve().parent.parent

# sha256 (first 16 hex digits) of the arrays data.synthetic gives for DIGEST_CONFIG; the same
# with numpy 1.19.5 (Python 3.6), 1.23.5 and 2.4.6, so every framework trains on the same data.
DIGEST_CONFIG = {"dataset_size": 40, "val_fraction": 0.25, "image_size": 16, "classes": 10, "seed": 0}
DIGEST = "9409296c7d431d99"
# The same for data.load's token sequences (model gru): numpy 1.19.5, 1.23.5 and 2.4.6 agree.
TOKEN_CONFIG = {"model": "gru", "dataset_size": 40, "val_fraction": 0.25, "classes": 2, "seed": 0}
TOKEN_DIGEST = "d19312f377d134a8"

DRIVER = textwrap.dedent(
    """
    import hashlib
    from tests.driver_checks import configurer, run_checks
    from workers import data, models, runner
    from workers.adapters import base

    config, adapter = configurer("pytorch", batch_size=32, classes=10)

    def check_models():
        import torch
        a, _ = adapter()
        out = {}
        for name in [m for m in models.MODELS if m != "vit_b16"]:
            arch = models.build_arch(name, 1000, 64)
            count = a.build(arch)
            a.model.eval()
            with torch.no_grad():
                shape = list(a.model(torch.zeros(2, 3, 64, 64)).shape)
            out[name] = {"torch": count, "infer": models.infer(arch)["parameters"], "shape": shape}
            a.model = a.optimizer = a._initial = None  # free VGG's 0.5 GB before the next one
        out["small_cnn_32"] = a.build(models.build_arch("small_cnn", 10, 32))
        return out

    def digest(arrays):
        h = hashlib.sha256()
        for key in ("x_train", "y_train", "x_val", "y_val"):
            h.update(arrays[key].tobytes())
        return h.hexdigest()[:16]

    def check_data(golden_config):
        one, two = data.synthetic(config()), data.synthetic(config())
        return {
            "same": all((one[k] == two[k]).all() for k in one),
            "other_seed_differs": digest(data.synthetic(config(seed=1))) != digest(one),
            "shapes": {k: list(v.shape) for k, v in one.items()},
            "dtypes": {k: str(v.dtype) for k, v in one.items()},
            "train_per_class": [int((one["y_train"] == c).sum()) for c in range(10)],
            "digest": digest(data.synthetic(golden_config)),
        }

    def state(a):
        return {k: v.clone() for k, v in a.model.state_dict().items()}

    def same(s1, s2):
        return all(bool((s1[k] == s2[k]).all()) for k in s1)

    def train_epoch(a, epoch, train_size):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        return a.epoch_loss()

    def check_train():
        a, info = adapter()
        a.build(models.build_arch("small_cnn", 10, 32))
        initial = state(a)
        train_size, val_size = a.load_data()
        a.reset()  # as the runner does before each repeat
        epochs = []
        for epoch in range(1, a.config["epochs"] + 1):
            epochs.append([train_epoch(a, epoch, train_size)] + list(a.evaluate()))
        trained_differs = not same(initial, state(a))
        a.reset()
        restored, fresh_optimizer = same(initial, state(a)), len(a.optimizer.state)
        return {"info": info, "sizes": [train_size, val_size], "epochs": epochs,
                "training_mode_after_eval": a.model.training,
                "trained_differs": trained_differs, "reset_restores": restored,
                "optimizer_state_after_reset": fresh_optimizer,
                "repeat_first_loss": train_epoch(a, 1, train_size)}

    def check_gru(token_config):
        import torch
        a, _ = adapter(model="gru", classes=2, batch_size=64, dataset_size=1280, optimizer="adam",
                       lr=0.001, threads=1)
        count = a.build_model()
        gru = [m for m in a.model.modules() if isinstance(m, torch.nn.GRU)][0]
        bound = max(float(p.abs().max()) for p in gru.parameters())
        shape = list(a.forward_shape(2))
        train_size, val_size = a.load_data()
        a.reset()
        epochs = [[train_epoch(a, epoch, train_size)] + list(a.evaluate()) for epoch in (1, 2, 3)]
        f, _ = adapter(model="gru", classes=2, batch_size=8, dataset_size=40, task="inference",
                       features=True, threads=1)
        f.build_model()
        f.load_data()
        f.prepare_epoch(runner.epoch_order(0, 1, 32))
        f.infer_step(0)
        return {"parameters": count, "shape": shape, "gru_bound": bound, "epochs": epochs,
                "features": list(f._output.shape), "digest": digest(data.load(token_config))}

    def check_cuda():
        import torch
        try:
            adapter(device="cuda")
        except base.Unavailable as exc:
            return {"available": torch.cuda.is_available(), "error": str(exc)}
        return {"available": torch.cuda.is_available(), "error": None}

    def check_oom():
        import torch
        a, _ = adapter()
        cases = [MemoryError(), torch.cuda.OutOfMemoryError("CUDA out of memory."),
                 RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"),
                 RuntimeError("shape mismatch"), ValueError("out of memory")]
        return [a.is_oom(exc) for exc in cases]

    def check_layout():
        # channels_last against contiguous: layouts in effect, same numbers; the default by size.
        # ResNet50 (batch 4, 32 px) for the layouts and a forward pass; its training is too
        # ill-conditioned there (batch norm over 4 values) to compare steps: small_cnn for those.
        import os
        import torch
        out = {}
        for layout in ("channels_last", "contiguous_format"):
            os.environ["BENCH_TORCH_MEMORY_FORMAT"] = layout
            try:
                a, info = adapter(model="resnet50", image_size=32, batch_size=4, dataset_size=20,
                                  classes=3, threads=1)
                s, _ = adapter(image_size=32, batch_size=16, dataset_size=80, threads=1)
            finally:
                del os.environ["BENCH_TORCH_MEMORY_FORMAT"]
            fmt = getattr(torch, layout)
            for each in (a, s):
                each.build_model()
                train_size, _ = each.load_data()
                each.reset()
                each.prepare_epoch(runner.epoch_order(0, 1, train_size))
            conv = [m for m in a.model.modules() if isinstance(m, torch.nn.Conv2d)][0]
            x = a._batches[0][0]
            with torch.no_grad():
                logits = a.model.eval()(x).clone()
            for m in s.model.modules():  # dropout draws its mask in memory order: the masks of
                if isinstance(m, torch.nn.Dropout):  # the two layouts differ, so none here
                    m.p = 0.0
            losses = []
            for i in range(3):
                s.train_step(i)
                losses.append(s.epoch_loss())
            first = [m for m in s.model.modules() if isinstance(m, torch.nn.Conv2d)][0]
            out[layout] = {"setting": info["settings"]["memory_format"],
                           "weight": conv.weight.is_contiguous(memory_format=fmt),
                           "batch": x.is_contiguous(memory_format=fmt),
                           "small_batch": s._batches[0][0].is_contiguous(memory_format=fmt),
                           "logits": logits.tolist(), "losses": losses,
                           "stepped": first.weight.detach().flatten()[:64].tolist()}
        out["default"] = {size: adapter(image_size=size)[1]["settings"]["memory_format"]
                          for size in (32, 63, 64, 224)}  # unset: the CPU default by size
        out["gru"] = adapter(model="gru", classes=2)[1]["settings"]["memory_format"]
        return out

    def check_threads():  # last: it changes this process's thread pools
        return adapter(threads=1)[1]["threads"]

    run_checks(globals())
    """
)

CHECKS = [["models", []], ["data", [DIGEST_CONFIG]], ["train", []], ["gru", [TOKEN_CONFIG]], ["cuda", []]]
CHECKS.append(["oom", []])
CHECKS.append(["layout", []])
CHECKS.append(["threads", []])


@pytest.fixture(scope="module")
def driven(pytorch_python, tmp_path_factory):
    return checked(drive(pytorch_python, tmp_path_factory.mktemp("pytorch"), DRIVER, CHECKS)[0])


@pytest.mark.framework
def test_module_imports_without_torch(pytorch_python):
    """In the framework's own interpreter, where importing the framework would succeed and be seen:
    only the adapter's setup() imports it."""
    code = (
        "import sys, workers.adapters.pytorch as p; assert 'torch' not in sys.modules; print(p.Adapter.name)"
    )
    proc = subprocess.run(
        [str(pytorch_python), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "pytorch", proc.stderr


@pytest.mark.framework
@pytest.mark.parametrize("name", ADAPTER_MODELS)
def test_torch_parameter_count_equals_infer(driven, name):
    got = driven("models")[name]
    assert got["torch"] == got["infer"]
    assert got["shape"] == [2, 1000]


@pytest.mark.framework
def test_small_cnn_reference_count(driven):
    assert driven("models")["small_cnn_32"] == 3_441_592


@pytest.mark.framework
def test_synthetic_data_is_deterministic_and_balanced(driven):
    got = driven("data")
    assert got["same"] and got["other_seed_differs"]
    assert got["shapes"] == {
        "x_train": [320, 3, 32, 32],
        "y_train": [320],
        "x_val": [80, 3, 32, 32],
        "y_val": [80],
    }
    assert got["dtypes"] == {
        "x_train": "float32",
        "y_train": "int64",
        "x_val": "float32",
        "y_val": "int64",
    }
    assert got["train_per_class"] == [32] * 10
    assert got["digest"] == DIGEST, "the synthetic data changed: every framework must see the same"


@pytest.mark.framework
def test_small_cnn_learns_the_synthetic_data(driven):
    got = driven("train")
    assert got["sizes"] == [320, 80]
    losses = [e[0] for e in got["epochs"]]
    accuracies = [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.6, got["epochs"]
    assert accuracies[-1] >= 0.6, got["epochs"]  # chance is 0.1
    assert got["training_mode_after_eval"]


@pytest.mark.framework
def test_the_gru_is_the_reference_and_learns_the_synthetic_tokens(driven):
    got = driven("gru")
    assert got["parameters"] == models.infer(models.build_arch("gru", 2, 64))["parameters"] == 3_818_302
    assert got["shape"] == [2, 2] and got["features"] == [8, 100]
    assert 0.09 < got["gru_bound"] <= 0.1  # models.INIT: uniform on +-1/sqrt(100)
    losses, accuracies = [e[0] for e in got["epochs"]], [e[2] for e in got["epochs"]]
    assert losses[-1] < losses[0] * 0.7, got["epochs"]
    assert accuracies[-1] > 0.7, got["epochs"]  # chance is 0.5
    assert got["digest"] == TOKEN_DIGEST, "the synthetic tokens changed: every framework must see the same"


@pytest.mark.framework
def test_reset_restores_the_initial_weights(driven):
    got = driven("train")
    assert got["trained_differs"] and got["reset_restores"]
    assert got["optimizer_state_after_reset"] == 0
    # weights, optimizer state and random stream all restored: the repeat retraces epoch 1
    assert got["repeat_first_loss"] == pytest.approx(got["epochs"][0][0], rel=1e-4)


@pytest.mark.framework
def test_setup_reports_versions(driven):
    info = driven("train")["info"]
    assert info["framework_version"].startswith("2.")
    assert info["python_version"] and info["device_name"]
    assert info["threads"]["requested"] == 0 and info["threads"]["intra_op"] >= 1


@pytest.mark.framework
def test_cuda_unavailable_says_why(driven):
    got = driven("cuda")
    if got["available"]:
        pytest.skip("this machine has a CUDA device")
    assert got["error"] and ("CPU-only build" in got["error"] or "no CUDA device" in got["error"])


@pytest.mark.framework
def test_is_oom(driven):
    assert driven("oom") == [True, True, True, False, False]


@pytest.mark.framework
def test_channels_last_from_64_px_and_the_same_numbers_in_either_layout(driven):
    got = driven("layout")
    # unset: channels_last from 64 px (docs/fairness.md), NCHW below and for the GRU
    assert got["default"] == {
        "32": "contiguous_format",
        "63": "contiguous_format",
        "64": "channels_last",
        "224": "channels_last",
    }
    assert got["gru"] == "contiguous_format"
    for layout in ("channels_last", "contiguous_format"):
        assert got[layout]["setting"] == layout
        assert got[layout]["weight"] and got[layout]["batch"], layout
    last, plain = got["channels_last"], got["contiguous_format"]
    flat = [v for row in last["logits"] for v in row]
    assert flat == pytest.approx([v for row in plain["logits"] for v in row], rel=1e-4, abs=1e-5)
    assert last["small_batch"] and plain["small_batch"]
    assert last["losses"] == pytest.approx(plain["losses"], rel=1e-4)  # small_cnn, 3 steps
    assert last["stepped"] == pytest.approx(plain["stepped"], rel=1e-2, abs=2e-4)  # weights ~0.05


@pytest.mark.framework
def test_threads_are_applied_and_reported(driven):
    threads = driven("threads")
    assert threads["requested"] == 1 and threads["intra_op"] == 1
    assert "interop_applied" in threads

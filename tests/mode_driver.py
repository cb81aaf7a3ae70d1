"""The framework-side half of the mode and precision tests (tests/test_modes_<framework>.py).

Imported by a driver script in the framework's own environment (tests/drivers.py starts it), never
by pytest's side: standard library only, Python 3.6 code. ``checks(framework)`` returns the
check_<name> functions the driver puts in its globals before tests.driver_checks.run_checks.

One combination (mode, precision) is one adapter: built, trained a few epochs on small_cnn at a
tiny size (evaluated after each), then asked for inference steps in the same mode (the same
adapter, its task switched to inference: the framework then reuses what evaluation compiled
where it can). With ``dropout`` false the arch has no dropout layers, so the first training
steps' losses of two modes can be compared (random masks would differ between modes).
"""

import os
import time

from tests.driver_checks import configurer
from workers import models, runner
from workers.adapters import base

# Tiny: 192 training images (12 steps of 16), 48 validation images (3 full batches: evaluation
# never meets a partial batch, so a compiled model sees one shape), 4 classes (chance 0.25).
SIZES = dict(image_size=16, dataset_size=240, val_fraction=0.2, classes=4, batch_size=16, epochs=3, threads=1)
FIRST_STEPS = 2  # training steps whose losses are read one by one (no dropout only)


def _files(folder):
    """How many files a folder holds, None where it is not set."""
    if not folder:
        return None
    return sum(len(names) for _, _, names in os.walk(folder))


def no_dropout_arch(config):
    arch = models.build_arch(config["model"], config["classes"], config["image_size"])
    arch["layers"] = [node for node in arch["layers"] if node["op"] != "dropout"]
    return arch


def checks(framework, **over):
    sizes = dict(SIZES)
    sizes.update(over)
    config, adapter = configurer(framework, **sizes)

    def check_combo(mode, precision, dropout, epochs=None):
        started = time.time()
        try:
            a, info = adapter(mode=mode, precision=precision, epochs=epochs or sizes["epochs"])
            if dropout:
                a.build_model()
            else:
                a.build(no_dropout_arch(a.config))
        except base.Unsupported as exc:
            return {"unsupported": str(exc)}
        train_size, _ = a.load_data()
        a.reset()  # as the runner does before each repeat
        first, epochs = [], []
        for epoch in range(1, a.config["epochs"] + 1):
            steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
            clock = time.time()
            for i in range(steps):
                a.train_step(i)
                if epoch == 1 and i < FIRST_STEPS and not dropout:
                    a.synchronize()
                    first.append(a.epoch_loss())  # this step's loss alone
            a.synchronize()
            seconds = time.time() - clock
            loss = a.epoch_loss()
            epochs.append([loss] + list(a.evaluate()) + [seconds])
        a.config["task"] = "inference"
        steps = a.prepare_epoch(runner.epoch_order(0, 99, train_size))
        clock = time.time()
        for i in range(steps):
            a.infer_step(i)
        a.synchronize()
        return {
            "first_losses": first,
            "epochs": epochs,
            "execution": a.execution_info(),
            "settings_execution": info["settings"].get("execution"),
            "infer_steps": steps,
            "infer_seconds": time.time() - clock,
            "ahead_of_time_seconds": getattr(a, "ahead_of_time_seconds", None),
            "infer_shape": list(a._output.shape),
            "seconds": time.time() - started,
            "inductor_cache_files": _files(os.environ.get("TORCHINDUCTOR_CACHE_DIR")),
        }

    def check_refusal(model, mode, precision):
        """setup and build only: the Unsupported message, or None where it builds."""
        try:
            a, _ = adapter(
                model=model,
                mode=mode,
                precision=precision,
                classes=2 if model in models.RECURRENT else sizes["classes"],
            )
            a.build_model()
        except base.Unsupported as exc:
            return str(exc)
        return None

    def check_default():
        a, info = adapter()
        a.build_model()
        return {"execution": a.execution_info(), "settings_execution": info["settings"].get("execution")}

    return {"check_combo": check_combo, "check_refusal": check_refusal, "check_default": check_default}

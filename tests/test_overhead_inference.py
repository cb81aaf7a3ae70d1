"""The overhead benchmark's inference mode (benchmarks/harness/overhead.py --task inference [--features]).

The fast tests check what the orchestrator's side builds and prints, with no framework. The slow
ones run the bare inference loops in real framework environments at a tiny size: they run, their
numbers are sane, and the bare step on the adapter's own model computes exactly what the adapter's
infer_step computes (the same weights, in evaluation mode). Timings are printed by the benchmark,
never judged here: on a shared machine they are not results.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness import overhead, overhead_paired
from tests.drivers import framework_python, run_driver, run_module

REPO = Path(__file__).resolve().parent.parent


TINY = ["--model", "resnet50", "--image-size", "32", "--batch-size", "2", "--threads", "1"]
BARE_TINY = [*TINY, "--steps", "3", "--warmup", "1", "--task", "inference", "--features"]
# Frameworks whose bare inference loops are run here: one synchronous, one asynchronous engine.
CHECKED = ("pytorch", "mxnet")


def test_inference_configuration_is_a_features_run_of_the_same_size():
    config = overhead.make_config(
        overhead.parse_args([*TINY, "--steps", "3", "--task", "inference", "--features"])
    )
    assert (config.task, config.features) == ("inference", True)
    assert config.label() == "pytorch/resnet50/cpu/bs2/features/t1"
    assert config.train_size // config.batch_size == 3
    training = overhead.make_config(overhead.parse_args([*TINY, "--steps", "3"]))
    assert (training.task, training.features) == (None, None)  # training configurations unchanged


def test_features_need_task_inference(capsys):
    with pytest.raises(SystemExit) as exc:
        overhead.parse_args(["--features"])
    assert exc.value.code == 2
    assert "--features applies to --task inference" in capsys.readouterr().err


def test_bare_loop_is_asked_for_the_inference_step(monkeypatch):
    commands: list[list[str]] = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout='{"steps": 3}\n', stderr="")

    monkeypatch.setattr(overhead.subprocess, "run", fake_run)
    for extra in (["--task", "inference", "--features"], ["--task", "inference"], []):
        config = overhead.make_config(overhead.parse_args([*TINY, *extra]))
        overhead.bare_loop(config, Path("python"), "--paired", "1")
    inference, full, training = commands
    assert inference[-5:] == ["--task", "inference", "--features", "--paired", "1"]
    assert full[-4:] == ["--task", "inference", "--paired", "1"] and "--features" not in full
    assert "--task" not in training and training[-2:] == ["--paired", "1"]


def paired_output(step: str | None) -> dict:
    out = {
        "steps": 2,
        "chunk": 1,
        "paired": {side: [[0.010, 0.011]] for side in overhead_paired.SIDES},
        "other_load": [0.0],
    }
    return out if step is None else {**out, "step": step}


def test_paired_report_names_the_step_it_measured(capsys):
    overhead_paired.report(paired_output("infer_step"), 0.1)
    text = capsys.readouterr().out
    assert "(adapter.infer_step + step event), infer_step alone" in text
    assert "| infer_step ms/step |" in text and "infer_step - bare" in text
    assert "train_step" not in text
    overhead_paired.report(paired_output(None), 0.1)  # an output saved before the step was named
    assert "(adapter.train_step + step event), train_step alone" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.framework
@pytest.mark.parametrize("framework", CHECKED)
def test_bare_inference_loop_runs_alone_and_paired(framework):
    python, module = framework_python(framework), f"benchmarks.inside.bare_{framework}_loop"
    solo = json.loads(run_module(python, module, *BARE_TINY, timeout=600).stdout.splitlines()[-1])
    assert solo["task"] == "inference" and solo["steps"] == 3
    assert 0 < solo["step_seconds"] and solo["seconds"] == pytest.approx(3 * solo["step_seconds"])
    # The pooled features of ReLU outputs: finite and non-negative, and not all zero.
    assert math.isfinite(solo["last_output_mean"]) and solo["last_output_mean"] > 0
    paired = run_module(python, module, *BARE_TINY, "--paired", "1", "--chunk", "1", timeout=600)
    out = json.loads(paired.stdout.splitlines()[-1])
    assert out["step"] == "infer_step" and out["steps"] == 3 and out["chunk"] == 1
    for side in overhead_paired.SIDES:  # every step by every side, one chunk each
        assert len(out["paired"][side]) == 1 and len(out["paired"][side][0]) == 3
        assert all(t > 0 for t in out["paired"][side][0])


# In the framework's environment: the adapter's infer_step and the bare step (on the adapter's
# model) on the adapter's first batch of the timed epoch, each twice.
SAME_OUTPUT = """
import importlib, json, sys
import numpy as np
from benchmarks.inside import bare_common
from workers import data, runner

framework = sys.argv[1]
module = importlib.import_module("benchmarks.inside.bare_{}_loop".format(framework))
args = bare_common.parse_args("same output", sys.argv[2:])
fw, _ = module.setup(args)
adapter, train_size = bare_common.make_adapter(framework, args)
bare_common.epoch_steps(adapter, train_size, args, 1)
order = runner.epoch_order(args.seed, 1, train_size)[:args.batch_size]
arrays = data.synthetic(bare_common.data_config(args))
batch = [(arrays["x_train"][order], arrays["y_train"][order])]
step, made = module.infer_on_adapter(fw, adapter, args, batch)
numpy = (lambda out: out.asnumpy()) if framework == "mxnet" else (lambda out: out.numpy())
outputs = {"harness": [], "bare": []}
for _ in range(2):
    adapter.infer_step(0)
    adapter.synchronize()
    outputs["harness"].append(numpy(adapter._output).tolist())
    outputs["bare"].append(numpy(step(*made[0])).tolist())
    adapter.synchronize()
print(json.dumps(outputs))
"""


@pytest.mark.slow
@pytest.mark.framework
@pytest.mark.parametrize("framework", CHECKED)
def test_bare_step_computes_what_infer_step_computes(framework, tmp_path):
    driver = tmp_path / "same_output.py"
    driver.write_text(SAME_OUTPUT)
    args = [*BARE_TINY, "--steps", "2", "--warmup", "0"]
    done = run_driver(framework_python(framework), driver, framework, *args, timeout=600)
    outputs = json.loads(done.stdout.splitlines()[-1])
    harness = outputs["harness"][0]
    assert len(harness) == 2 and len(harness[0]) == 2048  # batch 2, ResNet50's pooled features
    # Evaluation mode: batch norm on its running statistics, so a repeat gives the same output.
    assert outputs["harness"] == [harness, harness] and outputs["bare"] == [harness, harness]


@pytest.mark.slow
@pytest.mark.framework
def test_overhead_benchmark_measures_the_inference_step(tmp_path):
    framework_python("pytorch")
    saved = tmp_path / "overhead.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.harness.overhead", *TINY, "--steps", "3", "--warmup", "1"]
        + ["--rounds", "1", "--paired-passes", "1", "--idle-wait", "0", "--task", "inference", "--features"]
        + ["--save", str(saved)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "configuration: pytorch/resnet50/cpu/bs2/features/t1 image 32 steps 3" in done.stdout
    assert "(adapter.infer_step + step event), infer_step alone" in done.stdout
    result = json.loads(saved.read_text())
    assert (result["config"]["task"], result["config"]["features"]) == ("inference", True)
    (row,) = result["rounds"]
    assert row["harness"]["steps"] == row["bare"]["steps"] == 3
    assert result["paired"]["step"] == "infer_step"

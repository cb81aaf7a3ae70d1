"""The adapters' cuda branch of setup() inside the real PyTorch, TensorFlow and Paddle, with only the
framework's device calls stood in: stand-ins, not a GPU.

Each framework's CPU wheel runs here, and each driver replaces the handful of calls that would ask
a GPU (is there one, what is it, cap its memory, wait for it) with recorders (`StandIn...`), so
the adapter's own cuda code runs in the framework it is written for: device placement, the
`gpu_memory_budget` call with the object the real framework builds (TensorFlow's
LogicalDeviceConfiguration, PyTorch's own set_per_process_memory_fraction checks, Paddle's flag
as Paddle itself reads it at import), the TF32 switches, synchronisation, the setup record; and
MXNet's, Singa's and JAX's refusal of a budget they cannot apply.
What needs a device to run is not driven: building the model on it, pinned batches, the
steps, NCCL, a real cap refusing an allocation. docs/gpu.md's table says what ran where.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.drivers import checked, drive, framework_python

pytestmark = [pytest.mark.slow, pytest.mark.framework]

GIB = 1 << 30
H100 = 85_045_231_616

TORCH_DRIVER = textwrap.dedent(
    """
    import types
    import torch
    from tests.driver_checks import configurer, run_checks

    GIB = 1 << 30
    config, adapter = configurer("pytorch", device="cuda")


    class StandInDevice(object):
        \"\"\"Stand-in, not a GPU: torch.cuda's device queries, and the two C entry points behind
        set_per_process_memory_fraction and synchronize (their Python, with its checks, runs).\"\"\"

        def __init__(self, *totals):
            self.totals, self.fractions, self.syncs = totals, [], 0
            torch.version.cuda = "13.0"
            torch.cuda.is_available = lambda: True
            torch.cuda._lazy_init = torch.cuda.memory._lazy_init = lambda: None
            torch.cuda.get_device_properties = self.properties
            torch._C._cuda_setMemoryFraction = lambda f, index: self.fractions.append([f, index])
            torch._C._cuda_synchronize = self.synchronize
            torch._C._cuda_getDevice = lambda: 0  # the current device, where synchronize() waits
            torch.cuda._exchange_device = torch.cuda._maybe_exchange_device = lambda index: 0
            torch.cuda.max_memory_reserved = lambda device=None: 3 * GIB
            torch.cuda.max_memory_allocated = lambda device=None: 2 * GIB
            torch.cuda.memory_reserved = lambda device=None: GIB

        def properties(self, device=None):
            index = 0 if device is None else int(device)
            name = "stand-in GPU {}".format(index)
            return types.SimpleNamespace(name=name, total_memory=self.totals[index])

        def synchronize(self):
            self.syncs += 1


    DEVICE = StandInDevice(TOTAL, TOTAL // 2)


    def described(a, info):
        return {"device": str(a.device), "cuda": a.cuda, "info_budget": info.get("gpu_memory_budget"),
                "device_name": info["device_name"], "cudnn_benchmark": torch.backends.cudnn.benchmark,
                "memory_format": info["settings"]["memory_format"], "execution": a.execution,
                "fractions": list(DEVICE.fractions)}


    def check_budget():
        return described(*adapter(gpu_memory_budget=GIB))


    def check_whole_card():
        del DEVICE.fractions[:]
        return described(*adapter(gpu_memory_budget=2 * TOTAL))


    def check_replica():
        del DEVICE.fractions[:]
        return described(*adapter(gpu_memory_budget=GIB, replica={"rank": 1, "count": 2}))


    def check_no_budget_tf32():
        del DEVICE.fractions[:]
        return described(*adapter(precision="tf32"))


    def check_sync():
        a, _ = adapter()
        before = DEVICE.syncs
        a.synchronize()
        cuda_syncs = DEVICE.syncs - before
        c, _ = configurer("pytorch")[1]()
        c.synchronize()
        return {"cuda": cuda_syncs, "cpu": DEVICE.syncs - before - cuda_syncs, "memory": a.device_memory(),
                "cpu_memory": c.device_memory()}


    run_checks(globals())
    """
)

TF_DRIVER = textwrap.dedent(
    """
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tests.driver_checks import configurer, run_checks

    GIB = 1 << 30
    config, adapter = configurer("tensorflow", device="cuda")
    GPU = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    RECORDED = {"logical": [], "syncs": 0}
    real_list, real_build = tf.config.list_physical_devices, tf.sysconfig.get_build_info


    def set_logical(device, logical_devices):  # stand-in, not a GPU: TF refuses a GPU it has not
        RECORDED["logical"].append({"device": device.name, "configs": [  # (ValueError: Unrecognized device)
            {"type": type(c).__module__ + "." + type(c).__name__, "memory_limit": c.memory_limit}
            for c in logical_devices]})


    def synchronize():
        RECORDED["syncs"] += 1


    tf.test.is_built_with_cuda = lambda: True
    tf.config.list_physical_devices = lambda kind=None: [GPU] if kind == "GPU" else real_list(kind)
    tf.config.set_logical_device_configuration = set_logical
    tf.config.experimental.get_device_details = lambda device: {"device_name": "stand-in GPU"}
    tf.sysconfig.get_build_info = lambda: dict(real_build(), cuda_version="12.5.1", cudnn_version="9")
    tf.test.experimental.sync_devices = synchronize


    def check_setup():
        a, info = adapter(gpu_memory_budget=3 * GIB // 2)
        without, plain = adapter()
        before = RECORDED["syncs"]
        a.synchronize()
        return {"device": a.device, "gpu": a.gpu, "info_budget": info["gpu_memory_budget"],
                "logical": RECORDED["logical"], "device_name": info["device_name"],
                "cuda_version": info["cuda_version"], "mode": a.mode(), "settings": info["settings"],
                "execution": a.execution, "no_budget": "gpu_memory_budget" in plain,
                "syncs": RECORDED["syncs"] - before}


    run_checks(globals())
    """
)

PADDLE_DRIVER = textwrap.dedent(
    """
    import os
    import types
    from tests.driver_checks import configurer, run_checks
    from workers.adapters import base

    GIB = 1 << 30
    config, adapter = configurer("paddle", device="cuda")


    def check_flag():  # first: Paddle reads the flag when it is imported, once a process
        try:
            adapter(gpu_memory_budget=3 * GIB // 2)
            error = None
        except base.Unavailable as exc:  # this CPU wheel, after the import
            error = str(exc)
        import paddle
        flag = "FLAGS_gpu_memory_limit_mb"
        return {"error": error, "env": os.environ.get(flag), "paddle": paddle.get_flags([flag])[flag]}


    def check_setup():
        import paddle

        class StandInPlace(object):  # stand-in, not a GPU: paddle.CUDAPlace
            def __init__(self, index):
                self.index = index

        class StandInGenerator(object):  # stand-in, not a GPU: a CUDA generator paddle.seed seeds
            def __init__(self, index):
                self.index = index

            def manual_seed(self, seed):
                recorded["seeded"].append([self.index, seed])

        recorded = {"set_device": [], "syncs": 0, "seeded": []}
        core = paddle.framework.random.core
        core.get_cuda_device_count = lambda: 1
        core.default_cuda_generator = StandInGenerator
        paddle.is_compiled_with_cuda = lambda: True
        paddle.version.cuda = lambda: "12.6"
        paddle.device.cuda.device_count = lambda: 1
        paddle.device.cuda.get_device_name = lambda device=None: "stand-in GPU"
        paddle.get_cudnn_version = lambda: 90100
        paddle.CUDAPlace = StandInPlace
        paddle.set_device = lambda device: recorded["set_device"].append(device)
        paddle.device.synchronize = lambda device=None: recorded.__setitem__("syncs", recorded["syncs"] + 1)
        a, info = adapter(gpu_memory_budget=GIB)
        a.synchronize()
        return {"cuda": a.cuda, "place": [type(a.place).__name__, a.place.index], "recorded": recorded,
                "info_budget": info["gpu_memory_budget"], "device_name": info["device_name"],
                "cuda_version": info["cuda_version"], "execution": a.execution}


    run_checks(globals())
    """
)


@pytest.fixture(scope="module")
def torch_side(tmp_path_factory) -> dict:
    checks = [["budget", []], ["whole_card", []], ["replica", []], ["no_budget_tf32", []], ["sync", []]]
    script = TORCH_DRIVER.replace("TOTAL", str(H100))
    return checked(
        drive(framework_python("pytorch"), tmp_path_factory.mktemp("torch-cuda"), script, checks)[0]
    )


def test_pytorch_setup_on_cuda_places_the_run_caps_its_card_and_turns_tf32_off(torch_side):
    got = torch_side("budget")
    assert (got["device"], got["cuda"], got["device_name"]) == ("cuda", True, "stand-in GPU 0")
    assert got["info_budget"] == {"bytes": GIB, "fraction": pytest.approx(GIB / H100), "device": 0}
    assert got["fractions"] == [[pytest.approx(GIB / H100), 0]]
    assert got["cudnn_benchmark"] is True and got["memory_format"] == "contiguous_format"
    assert (
        got["execution"]["cuda_matmul_allow_tf32"] is False and got["execution"]["cudnn_allow_tf32"] is False
    )


def test_pytorch_budget_above_the_card_is_the_whole_card(torch_side):
    got = torch_side("whole_card")
    assert got["fractions"] == [[1.0, 0]] and got["info_budget"]["fraction"] == 1.0


def test_pytorch_replica_caps_and_names_its_own_card(torch_side):
    got = torch_side("replica")
    assert got["fractions"] == [[pytest.approx(GIB / (H100 // 2)), 1]]
    assert got["device_name"] == "stand-in GPU 1"


def test_pytorch_without_budget_asks_for_no_fraction_and_tf32_turns_both_switches_on(torch_side):
    got = torch_side("no_budget_tf32")
    assert got["fractions"] == [] and got["info_budget"] is None
    assert got["execution"]["cuda_matmul_allow_tf32"] is True and got["execution"]["cudnn_allow_tf32"] is True


def test_pytorch_synchronises_the_device_on_cuda_only_and_reads_its_allocator(torch_side):
    got = torch_side("sync")
    assert (got["cuda"], got["cpu"]) == (1, 0)
    assert got["memory"] == {
        "source": "torch.cuda",
        "max_memory_reserved": 3 * GIB,
        "max_memory_allocated": 2 * GIB,
        "memory_reserved": GIB,
        "total_memory": H100,
    }
    assert got["cpu_memory"] is None


def test_tensorflow_setup_on_cuda_builds_one_logical_device_of_the_budget(tmp_path):
    results = drive(framework_python("tensorflow"), tmp_path, TF_DRIVER, [["setup", []]])[0]
    got = checked(results)("setup")
    assert (got["device"], got["gpu"], got["device_name"], got["cuda_version"]) == (
        "/GPU:0",
        True,
        "stand-in GPU",
        "12.5.1",
    )
    # TensorFlow's own LogicalDeviceConfiguration, memory_limit in MiB, on the first GPU, once
    assert got["logical"] == [
        {
            "device": "/physical_device:GPU:0",
            "configs": [
                {"type": "tensorflow.python.eager.context.LogicalDeviceConfiguration", "memory_limit": 1536}
            ],
        }
    ]
    assert got["info_budget"] == {"bytes": 3 * GIB // 2, "logical_device_mb": 1536}
    assert got["no_budget"] is False
    assert got["mode"] == "compiled" and got["settings"]["xla_jit"] is True  # XLA: TensorFlow's GPU default
    assert got["execution"]["tf32_enabled"] is False  # fp32 on cuda: TF32 off
    assert got["syncs"] == 1


def test_paddle_reads_the_budget_flag_the_adapter_sets_before_importing_it(tmp_path):
    """The real Paddle (its CPU wheel reads the flag too) holds the MiB the adapter set: the name,
    the unit and the moment (before the import) are right. Then the cuda branch, with Paddle's
    device calls stood in: the place, the device set, the budget in the setup record."""
    results = checked(
        drive(framework_python("paddle"), tmp_path, PADDLE_DRIVER, [["flag", []], ["setup", []]])[0]
    )
    flag = results("flag")
    assert flag["env"] == "1536" and flag["paddle"] == 1536
    assert "CPU-only build" in flag["error"]
    got = results("setup")
    assert got["cuda"] is True and got["place"] == ["StandInPlace", 0]
    assert got["recorded"] == {"set_device": ["gpu:0"], "syncs": 1, "seeded": [[0, 0]]}  # the run's seed
    assert got["info_budget"] == {"bytes": GIB, "flag_mb": 1024}
    assert (got["device_name"], got["cuda_version"]) == ("stand-in GPU", "12.6")
    assert got["execution"]["tf32_cublas"] is False  # fp32 on cuda: Paddle's cuBLAS TF32 switch off


# MXNet, Singa and JAX have no cap bench applies: a cuda run with a budget is `unsupported`. JAX
# and Singa refuse before they look for a device, so their CPU wheels reach the refusal; MXNet
# looks first, so its CUDA check is stood in (a CUDA build that sees one GPU).
REFUSAL_DRIVER = textwrap.dedent(
    """
    from tests.driver_checks import configurer, run_checks
    from workers.adapters import base


    def check_refused(framework):
        if framework == "mxnet":
            import mxnet as mx

            class StandInFeatures(object):  # stand-in, not a GPU: a CUDA build of MXNet
                def is_enabled(self, name):
                    return name == "CUDA"

            mx.runtime.Features = StandInFeatures
            mx.context.num_gpus = lambda: 1
        try:
            configurer(framework, device="cuda", gpu_memory_budget=1 << 30)[1]()
        except base.Unsupported as exc:
            return str(exc)
        return None


    run_checks(globals())
    """
)
REFUSALS = {
    "mxnet": "gpu_memory_budget: MXNet has no per-process cap on device memory (its pool settings only "
    "shape what it keeps)",
    "singa": "gpu_memory_budget: Singa has no per-process cap on device memory",
    "jax": "gpu_memory_budget: JAX caps its memory with XLA_PYTHON_CLIENT_MEM_FRACTION, a fraction it reads "
    "before it knows the device's size; bench does not set it yet",
}


@pytest.mark.parametrize("framework", sorted(REFUSALS))
def test_a_framework_without_a_cap_refuses_the_budget_on_cuda(framework, tmp_path):
    results = drive(framework_python(framework), tmp_path, REFUSAL_DRIVER, [["refused", [framework]]])[0]
    assert checked(results)("refused") == REFUSALS[framework]

"""What bench knows of each framework, in one place: read by the worker and the orchestrator alike.

Standard library only and Python 3.6 code (every framework's interpreter imports the worker
package, and the orchestrator reads this module as it reads workers/execution.py). Each field:

    name            the value of a matrix's `framework:`, the adapter's folder, the environment's
    distribution    the package whose installed version identifies the framework (read without
                    importing it); None for the fault worker, which has no environment
    python_series   the Python its only wheels need, where that is not the orchestrator's
    default_mode    what a run that leaves `mode` unset resolves to (docs/fairness.md says why)
    cuda_mode       the default on a GPU, where it differs (TensorFlow ran XLA there, as Keras's
                    jit_compile="auto" does, except for a recurrent model: workers/execution.py)
    compile_mode    whether the framework takes the `compile_mode` setting (torch.compile's mode)
    colour          its colour in every figure (colour-blind-safe, from Okabe and Ito)
    pools           the compute pools it reports in its run's threads_applied (Pool), which the
                    report's fairness notes compare with the cores or the threads asked for
    gaps            the gaps to the other frameworks measured and explained in docs/fairness.md
                    (Gap), which the report names under a cell that far from the fastest
"""

import collections

Framework = collections.namedtuple(
    "Framework",
    "name distribution python_series default_mode cuda_mode compile_mode colour pools gaps",
)
# A compute pool: its key in threads_applied, what its threads are called in a note, and what it
# runs where that is not the whole model (" (its dense layers)").
Pool = collections.namedtuple("Pool", "key what where")
# A gap measured and explained in docs/fairness.md: the framework, on the CPU, training these models
# at image sizes from min_image_size to max_image_size, was slow for this cause; section is the
# heading there that gives the traces and figures. The figure a note prints is the cell's own,
# computed by the report: no figure is kept here.
Gap = collections.namedtuple("Gap", "key models min_image_size max_image_size cause section")
ANY_SIZE = 1 << 30

# The causes were found in operator traces (`trace: kernels`) on a 2-vCPU machine at threads 2
# (docs/fairness.md, "Gaps between frameworks"); a gap applies only where it was measured.
GAPS = {
    "paddle": (
        Gap(
            "paddle-cpu-convolution",
            ("resnet50", "vgg16"),
            224,
            ANY_SIZE,
            "Paddle's own CPU convolution kernels (most of its operator time; its own zoo model is as slow)",
            "Paddle",
        ),
        Gap(
            "paddle-cpu-convolution",
            ("resnet50",),
            1,
            63,
            "Paddle's own CPU convolution kernels (its own zoo ResNet50 is as slow)",
            "The quick matrix's spread",
        ),
    ),
    "singa": (
        Gap(
            "singa-cpu-operators",
            ("resnet50", "vgg16"),
            224,
            ANY_SIZE,
            "Singa's own CPU kernels for ReLU, addition and batch norm, and slower convolutions",
            "Singa",
        ),
        Gap(
            "singa-cpu-alexnet",
            ("alexnet",),
            224,
            ANY_SIZE,
            "Singa's own convolutions, its dense layers' GEMM on one OpenBLAS thread, and its SGD "
            "update in separate elementwise passes over every parameter",
            "Singa's AlexNet",
        ),
        Gap(
            "singa-cpu-operators",
            ("resnet50",),
            1,
            63,
            "the elementwise multiplications of Singa's SGD update, and slower convolutions",
            "The quick matrix's spread",
        ),
    ),
    "jax": (
        Gap(
            "jax-xla-cpu-convolution",
            ("resnet50", "vgg16"),
            224,
            ANY_SIZE,
            "XLA's CPU convolutions, and layout transposes around them",
            "JAX",
        ),
        Gap(
            "jax-xla-cpu-convolution", ("alexnet",), 224, ANY_SIZE, "XLA's CPU convolutions", "JAX's AlexNet"
        ),
    ),
    # Issue 22: the seeds' other two models at 224 px (traced on a loaded machine: shares only).
    "mxnet": (
        Gap(
            "mxnet-cpu-relu6-batchnorm",
            ("mobilenet_v2",),
            224,
            ANY_SIZE,
            "MXNet's own elementwise clip (its ReLU6, as in Gluon's own model) and batch-norm kernels; "
            "its convolutions are faster than PyTorch's",
            "MXNet's MobileNetV2",
        ),
    ),
}
POOLS = {
    "pytorch": (Pool("intra_op", "intra-op thread", ""),),
    "tensorflow": (Pool("intra_op_effective", "intra-op thread", ""),),
    "mxnet": (Pool("intra_op", "OpenMP thread", ""),),
    "paddle": (Pool("intra_op", "thread", ""),),
    "singa": (
        Pool("openmp", "OpenMP thread", ""),
        Pool("openblas", "OpenBLAS thread", " (its dense layers)"),
    ),
}


def _framework(name, distribution, python_series, default_mode, cuda_mode, compile_mode, colour):
    return Framework(
        name,
        distribution,
        python_series,
        default_mode,
        cuda_mode,
        compile_mode,
        colour,
        POOLS.get(name, ()),
        GAPS.get(name, ()),
    )


FRAMEWORKS = (
    _framework("pytorch", "torch", None, "eager", None, True, "#D55E00"),
    _framework("tensorflow", "tensorflow-cpu", None, "graph", "compiled", False, "#E69F00"),
    _framework("mxnet", "mxnet", None, "graph", None, False, "#0072B2"),
    _framework("paddle", "paddlepaddle", None, "eager", None, False, "#009E73"),
    _framework("singa", "singa", "3.6", "graph", None, False, "#CC79A7"),
    _framework("jax", "jax", None, "compiled", None, False, "#56B4E9"),
    _framework("fault", None, None, "eager", None, False, "#555555"),
)

BY_NAME = dict((f.name, f) for f in FRAMEWORKS)
NAMES = tuple(f.name for f in FRAMEWORKS)
# The real frameworks: each has an environment of its own (the fault worker runs anywhere).
REAL = tuple(f.name for f in FRAMEWORKS if f.distribution is not None)

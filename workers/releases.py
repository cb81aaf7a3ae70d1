"""The framework releases each adapter serves, and the checks of a run's `version` against them.

Standard library only and Python 3.6 code: the worker checks the release installed in its
environment before it imports anything heavy, and the orchestrator reads the same declarations
before any environment exists (a run asking for a release outside them is `unsupported` without
one, and the orchestrator never imports an adapter: tests/test_layering.py). So each adapter's
declaration sits here, one entry per framework, beside workers/frameworks.py's facts:

    oldest   the oldest release the adapter serves (inclusive)
    below    the first release it does not serve, or None (no upper bound: newer releases are
             tried as they come, as the pinned ones are)
    eras     (release, what the adapter does from that release on): the differences between
             releases inside the range that it handles, where it handles them
    older    why an older release is not served, and what serving it would take

docs/frameworks.md, "Framework versions", says which releases were tried here.
"""

import collections
import re

Support = collections.namedtuple("Support", "oldest below eras older")

# A release as a matrix may name it: PEP 440's public shape (digits and dots, then a pre-release,
# post-release or development part) and a local part (+cpu). It becomes a folder name
# (<framework>@<version>) and a file name (envs/<framework>@<version>.txt): nothing else passes.
SHAPE = re.compile(
    r"[0-9]{1,6}(\.[0-9]{1,6}){0,5}((a|b|rc)[0-9]{1,6})?(\.post[0-9]{1,6})?(\.dev[0-9]{1,6})?"
    r"(\+[a-z0-9]{1,20}(\.[a-z0-9]{1,20}){0,4})?"
)
MAX_LENGTH = 64

SUPPORT = {
    "pytorch": Support(
        "2.4", None,
        (("2.6", "Dynamo fails on its recompile limit (fail_on_recompile_limit_hit); before 2.6 its "
                 "fall-back to eager stays, and the run's execution record says so"),),
        "the adapter's precisions call torch.amp.is_autocast_available and torch.amp.GradScaler(device), "
        "which 2.4 brought; serving 2.0 to 2.3 would take torch.cuda.amp and torch.cpu.amp branches in "
        "workers/adapters/pytorch/modes.py, and 1.x also has no torch.compile (mode compiled)"),
    "tensorflow": Support(
        "2.16", None,
        (("2.16", "Keras 3 is tf.keras: the model is built with keras 3's layers and optimizers"),),
        "TensorFlow before 2.16 ships Keras 2, and TensorFlow 1.x has no eager execution (graphs run "
        "in tf.Session); serving Keras 2 would take a second layers.py on tf.keras 2's layers and "
        "optimizers (and its mixed-precision LossScaleOptimizer), and 1.x a separate adapter over "
        "tf.compat.v1 sessions"),
    "mxnet": Support(
        "1.6", "2",
        (),
        "1.6.0, 1.7.0 and 1.8.0 ran bench's small_cnn here as 1.9.1 does; 1.5.1 installs but has no "
        "mx.runtime.Features, which the adapter reads (MKLDNN in the execution record, OpenMP in "
        "env.py): serving 1.5 and older would take reading those builds' features another way "
        "(mx.libinfo) and trying their Gluon; MXNet 2 (never released beyond betas) replaced "
        "Gluon's NDArray with mx.np"),
    "paddle": Support(
        "2.6", None,
        (("3.2", "paddle.nn.GELU takes approximate as 'none' or 'tanh'; before 3.2 it takes a bool "
                 "(True: tanh), which the adapter passes there (workers/adapters/paddle/attention.py)"),),
        "modes graph and compiled call paddle.jit.to_static(full_graph=True), which 2.6 brought; Paddle "
        "1.x is the fluid API (static programs run by an Executor): serving it would take a separate "
        "adapter building fluid programs, since this one is written on paddle.nn's dynamic graph"),
    "singa": Support(
        "3.0.0.dev1", None,
        (),
        "Singa's only release on the registry is 3.0.0.dev1 (a Python 3.6 wheel); the adapter mends "
        "that binding (workers/adapters/singa/binding.py), and older releases have no wheel to try"),
    "jax": Support(
        "0.4.26", None,
        (("0.4.31", "jax.nn.dot_product_attention exists (BENCH_JAX_ATTENTION=jax.nn); before it "
                    "that switch is unsupported, and Flax's own attention, the default, runs on both"),),
        "0.4.13 (the oldest jaxlib with a Python 3.11 wheel) trained small_cnn and the GRU here, with "
        "flax 0.7.4 and numpy 1.26, scipy 1.12, ml_dtypes 0.2, tensorstore 0.1.45, but flax 0.7.4's "
        "MultiHeadDotProductAttention needs inputs_kv, so the attention models fail; serving it would "
        "take passing inputs_kv in workers/adapters/jax/attention.py and a pin set of those numpy 1 "
        "releases"),
}


def shape_problem(version):
    """Why a value is not a release bench accepts, or None."""
    if not isinstance(version, str) or len(version) > MAX_LENGTH or not SHAPE.fullmatch(version):
        return ("expected a release such as \"0.4.30\", \"2.0.0rc1\" or \"2.4.1+cpu\" (digits and dots, "
                "then rc1, .post1, .dev1 or a +local part)")
    return None


def key(version):
    """An order on releases of SHAPE: the release numbers (trailing zeros dropped), then a
    development release before a pre-release before the release, then post-releases. The local
    part (+cpu) is the same release, built differently: it does not order."""
    public = version.split("+", 1)[0]
    match = re.match(r"([0-9.]+?)(?:(a|b|rc)([0-9]+))?(?:\.post([0-9]+))?(?:\.dev([0-9]+))?$", public)
    if match is None:
        raise ValueError("not a release: {!r}".format(version))
    numbers = [int(n) for n in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    pre = {"a": 1, "b": 2, "rc": 3}.get(match.group(2), 4)
    pre_number = int(match.group(3) or 0)
    post = int(match.group(4)) if match.group(4) else -1
    dev = int(match.group(5)) if match.group(5) else None
    if dev is not None and match.group(2) is None and post < 0:
        pre = 0  # 3.0.0.dev1 comes before 3.0.0a1
    return (tuple(numbers), pre, pre_number, post, -1 if dev is None else 0, dev or 0)


def _below(a, b):
    return key(a) < key(b)


def unsupported(framework, version):
    """Why the framework's adapter does not serve this release, or None (also for a framework
    with no declaration: the fault worker)."""
    support = SUPPORT.get(framework)
    if support is None or version is None:
        return None
    if _below(version, support.oldest):
        return "{} {} is older than the releases bench's {} adapter serves ({} and later): {}".format(
            framework, version, framework, support.oldest, support.older)
    if support.below is not None and not _below(version, support.below):
        return "{} {} is newer than the releases bench's {} adapter serves (before {}): {}".format(
            framework, version, framework, support.below, support.older)
    return None


def same_release(asked, installed):
    """Whether the installed release is the one asked for: equal, or the installed one's local
    build (2.13.0+cpu) of an asked public release (2.13.0)."""
    if installed == asked:
        return True
    return "+" not in asked and installed.split("+", 1)[0] == asked


def installed(distribution):
    """The installed release of a distribution, read from its metadata without importing it; None
    where it is not installed."""
    try:
        from importlib import metadata  # Python 3.8 and later
    except ImportError:
        metadata = None
    try:
        if metadata is not None:
            return metadata.version(distribution)
        import pkg_resources  # Python 3.6 (Singa's interpreter)
        return pkg_resources.get_distribution(distribution).version
    except Exception:  # not installed, or metadata this Python cannot read
        return None


def refusal(framework, distribution, asked):
    """The worker's check before it imports the framework: (outcome, reason, installed release),
    or (None, None, installed release) where the run may go on."""
    found = installed(distribution) if distribution else None
    if found is None:
        return None, None, None  # the adapter's own import says what is missing
    if asked is not None and not same_release(asked, found):
        return "unavailable", (
            "asked for {} {}, but this environment has {} {} installed; make the asked one with "
            "`bench env setup {} --version {}`".format(framework, asked, framework, found, framework, asked)
        ), found
    try:
        why = unsupported(framework, found)
    except ValueError:  # an installed release of a shape bench does not name (a nightly's)
        why = None
    return ("unsupported", why, found) if why else (None, None, found)

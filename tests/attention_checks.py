"""The framework-side checks of the attention models (issue 25), shared by every framework's
attention test: imported by driver scripts in the framework's own environment (numpy and the
standard library only, Python 3.6 syntax: Singa's interpreter runs it).

A framework supplies two functions of its adapter module: ``load_canonical(adapter, arch, params)``
sets the built model's parameters from the canonical layout of workers.models.pure, and
``forward(adapter, x)`` runs the model in evaluation mode on a numpy batch and returns numpy.
"""

import numpy as np

from workers import data, models, runner
from workers.models import pure

# The tiny models' sizes in these checks: ViT on 16 px images (4 x 4 patches of 4), GPT on 8 tokens.
SIZES = {"vit_tiny": {"image_size": 16}, "gpt_tiny": {"sequence_length": 8}}


def random_params(arch, seed):
    """Canonical parameters for every node of ``arch`` (numpy float64 arrays), drawn at a scale
    where every term matters: nonzero biases, layer norm scales away from 1."""
    rng = np.random.RandomState(seed)
    params = {}
    shapes = _input_shapes(arch["layers"], tuple(arch["input"]))
    for path, node in pure.parameter_paths(arch["layers"]):
        shape, op = shapes[path], node["op"]
        d = shape[-1] if op not in ("embedding", "patch_embed") else None
        if op == "dense":
            params[path] = {
                "weight": rng.uniform(-0.3, 0.3, (node["out"], shape[-1])),
                "bias": rng.uniform(-0.1, 0.1, node["out"]),
            }
        elif op == "layernorm":
            params[path] = {"weight": rng.uniform(0.7, 1.3, d), "bias": rng.uniform(-0.2, 0.2, d)}
        elif op == "attention":
            p = {}
            for name in ("q", "k", "v", "out"):
                p[name + "_weight"] = rng.uniform(-0.4, 0.4, (d, d))
                p[name + "_bias"] = rng.uniform(-0.1, 0.1, d)
            params[path] = p
        elif op == "patch_embed":
            k = node["patch"]
            params[path] = {
                "weight": rng.uniform(-0.3, 0.3, (node["dim"], shape[0], k, k)),
                "bias": rng.uniform(-0.1, 0.1, node["dim"]),
            }
        elif op == "class_token":
            params[path] = {"weight": rng.uniform(-0.5, 0.5, d)}
        elif op == "position_embedding":
            params[path] = {"weight": rng.uniform(-0.5, 0.5, (node["length"], d))}
        elif op == "embedding":
            params[path] = {"weight": rng.uniform(-1.0, 1.0, (node["vocab"], node["dim"]))}
    return params


def _input_shapes(layers, shape, path=""):
    """{path: the input shape of the node at that path}."""
    out = {}
    for i, node in enumerate(layers):
        key = f"{path}{i}"
        out[key] = shape
        if node["op"] == "residual":
            out.update(_input_shapes(node["body"], shape, key + ".body."))
            out.update(_input_shapes(node["shortcut"], shape, key + ".shortcut."))
        shape = models.out_shape(node, shape)
    return out


def inputs(arch, seed, n=2):
    rng = np.random.RandomState(seed)
    if arch["tokens"]:
        return rng.randint(0, arch["classes"], (n,) + tuple(arch["input"])).astype(np.int64)
    return rng.uniform(-1.0, 1.0, (n,) + tuple(arch["input"])).astype(np.float32)


def _lists(params):
    return {path: {k: v.tolist() for k, v in p.items()} for path, p in params.items()}


def against_reference(adapter_factory, load_canonical, forward, name, seed=0):
    """The framework's forward pass against the pure reference, with random canonical parameters:
    the largest absolute difference, and the output shapes. For a language model also the causal
    check: changing the last token changes no earlier position's logits."""
    sizes = SIZES[name]
    a, _ = adapter_factory(model=name, classes=5, **sizes)
    arch = models.build_arch(
        name, 5, sizes.get("image_size", 32), sequence_length=sizes.get("sequence_length")
    )
    count = a.build(arch)
    params = random_params(arch, seed)
    load_canonical(a, arch, params)
    x = inputs(arch, seed + 1)
    got = np.asarray(forward(a, x), dtype=np.float64)
    plain = _lists(params)
    want = np.array([pure.forward(arch["layers"], plain, xi.tolist()) for xi in x])
    out = {
        "parameters": int(count),
        "infer": models.infer(arch)["parameters"],
        "shape": list(got.shape),
        "want_shape": list(want.shape),
        "max_abs_diff": float(np.abs(got - want).max()),
        "scale": float(np.abs(want).max()),
    }
    if arch.get("language"):
        changed = x.copy()
        changed[:, -1] = (changed[:, -1] + 1) % arch["classes"]
        after = np.asarray(forward(a, changed), dtype=np.float64)
        out["earlier_positions_moved"] = float(np.abs(after[:, :-1] - got[:, :-1]).max())
        out["last_position_moved"] = float(np.abs(after[:, -1] - got[:, -1]).max())
    return out


def learns(adapter_factory, name, epochs, **over):
    """Train the tiny model on its synthetic data through the adapter as the runner drives it; the
    validation loss and accuracy after each epoch, and chance."""
    sizes = dict(SIZES[name], **over)
    a, _ = adapter_factory(model=name, **sizes)
    a.build_model()
    train_size, _ = a.load_data()
    history = []
    for epoch in range(epochs):
        steps = a.prepare_epoch(runner.epoch_order(0, epoch, train_size))
        for i in range(steps):
            a.train_step(i)
        a.synchronize()
        history.append(list(a.evaluate()))
    classes = models.GPT[name][0] if name in models.LANGUAGE else sizes.get("classes", 4)
    ceiling = data.FOLLOW if name in models.LANGUAGE else 1.0
    return {"history": history, "chance": 1.0 / classes, "ceiling": ceiling}

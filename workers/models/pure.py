"""The attention models' nodes computed in pure Python: the reference each framework's translation
is held to (tests/test_attention_nodes.py, and each adapter's tests). Standard library only,
Python 3.6 syntax; lists of floats, one sample (no batch axis), evaluation mode (dropout is the
identity). Slow by design and meant for tiny sizes.

Parameters are in the canonical layout, PyTorch's: a dense or projection weight is (out, in) and
y = x W^T + b; the patch embedding's weight is (D, C, p, p); an embedding or position table is
(rows, D); a layer norm's weight (gamma) and bias (beta) are (D,). An attention node's parameters
are q_weight, q_bias, k_weight, k_bias, v_weight, v_bias, out_weight, out_bias.

``forward(layers, params, x)`` runs a layer list of these nodes (with dense, embedding, residual,
dropout and relu); ``params`` maps each node's path to its parameters: the node's index in its
list, joined by "." to its parent's path and the list's name inside a residual ("3.body.1").
"""

import math


def _row(weight, bias, x):
    return [sum(w * v for w, v in zip(row, x)) + (bias[i] if bias is not None else 0.0)
            for i, row in enumerate(weight)]


def dense(x, weight, bias):
    """y = x W^T + b on a vector (D,), or on each position of a sequence (L, D)."""
    if x and isinstance(x[0], list):
        return [_row(weight, bias, v) for v in x]
    return _row(weight, bias, x)


def layernorm(x, weight, bias, eps):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (biased variance)."""
    if x and isinstance(x[0], list):
        return [layernorm(v, weight, bias, eps) for v in x]
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    scale = 1.0 / math.sqrt(var + eps)
    return [(v - mean) * scale * g + b for v, g, b in zip(x, weight, bias)]


def _gelu(v, approximate):
    if approximate == "tanh":
        return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def gelu(x, approximate="none"):
    if x and isinstance(x[0], list):
        return [gelu(v, approximate) for v in x]
    return [_gelu(v, approximate) for v in x]


def relu(x):
    if x and isinstance(x[0], list):
        return [relu(v) for v in x]
    return [max(v, 0.0) for v in x]


def softmax(scores):
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def attention(x, p, heads, causal):
    """Multi-head self-attention of an (L, D) sequence (see workers.models.attention)."""
    length, dim = len(x), len(x[0])
    width = dim // heads
    q = dense(x, p["q_weight"], p["q_bias"])
    k = dense(x, p["k_weight"], p["k_bias"])
    v = dense(x, p["v_weight"], p["v_bias"])
    scale = 1.0 / math.sqrt(width)
    joined = [[0.0] * dim for _ in range(length)]
    for h in range(heads):
        cols = range(h * width, (h + 1) * width)
        for i in range(length):
            seen = range(i + 1) if causal else range(length)
            weights = softmax([sum(q[i][c] * k[j][c] for c in cols) * scale for j in seen])
            for c in cols:
                joined[i][c] = sum(w * v[j][c] for w, j in zip(weights, seen))
    return dense(joined, p["out_weight"], p["out_bias"])


def patch_embed(image, weight, bias, patch):
    """(C, H, W) to (H' W', D): each patch (row by row) times the (D, C, p, p) kernel, plus bias."""
    channels, height, width = len(image), len(image[0]), len(image[0][0])
    out = []
    for top in range(0, height - patch + 1, patch):
        for left in range(0, width - patch + 1, patch):
            values = [image[c][top + i][left + j]
                      for c in range(channels) for i in range(patch) for j in range(patch)]
            flat = [[kernel[c][i][j] for c in range(channels) for i in range(patch)
                     for j in range(patch)] for kernel in weight]
            out.append(_row(flat, bias, values))
    return out


def class_token(x, token):
    return [list(token)] + [list(v) for v in x]


def position_embedding(x, table):
    return [[a + b for a, b in zip(v, table[i])] for i, v in enumerate(x)]


def first_token(x):
    return list(x[0])


def embedding(ids, table):
    return [list(table[int(i)]) for i in ids]


def tied_output(x, table):
    """Logits x E^T: each position's scores against every row of the embedding table."""
    return [[sum(a * b for a, b in zip(v, row)) for row in table] for v in x]


def forward(layers, params, x, path=""):
    """Run a layer list in evaluation mode; ``params`` as the module docstring says."""
    table = None
    for i, node in enumerate(layers):
        key = "{}{}".format(path, i)
        op, p = node["op"], params.get(key, {})
        if op == "dense":
            x = dense(x, p["weight"], p.get("bias"))
        elif op == "layernorm":
            x = layernorm(x, p["weight"], p["bias"], node["eps"])
        elif op == "gelu":
            x = gelu(x, node["approximate"])
        elif op == "relu":
            x = relu(x)
        elif op == "dropout":
            pass
        elif op == "attention":
            x = attention(x, p, node["heads"], node["causal"])
        elif op == "patch_embed":
            x = patch_embed(x, p["weight"], p["bias"], node["patch"])
        elif op == "class_token":
            x = class_token(x, p["weight"])
        elif op == "position_embedding":
            x = position_embedding(x, p["weight"])
        elif op == "first_token":
            x = first_token(x)
        elif op == "embedding":
            table = p["weight"]
            x = embedding(x, table)
        elif op == "tied_output":
            x = tied_output(x, table)
        elif op == "residual":
            body = forward(node["body"], params, x, key + ".body.")
            short = forward(node["shortcut"], params, x, key + ".shortcut.") if node["shortcut"] else x
            x = _add(body, short)
            if node["post"] == "relu":
                x = relu(x)
        else:
            raise ValueError("the pure reference has no op {!r}".format(op))
    return x


def _add(a, b):
    if a and isinstance(a[0], list):
        return [_add(u, v) for u, v in zip(a, b)]
    return [u + v for u, v in zip(a, b)]


def parameter_paths(layers, path=""):
    """[(path, node)] of every node that holds parameters in canonical layout, in order."""
    out = []
    for i, node in enumerate(layers):
        key = "{}{}".format(path, i)
        if node["op"] == "residual":
            out += parameter_paths(node["body"], key + ".body.")
            out += parameter_paths(node["shortcut"], key + ".shortcut.")
        elif node["op"] in ("dense", "layernorm", "attention", "patch_embed", "class_token",
                            "position_embedding", "embedding"):
            out.append((key, node))
    return out

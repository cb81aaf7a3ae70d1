"""The layer constructors: the vocabulary the architectures (zoo) are written in, one dict per
node. What each op means for a translator is in the package's docstring and docs/models.md.
"""

from workers.models.reference import BN_EPS, BN_MOMENTUM

def conv(out, kernel, stride=1, padding=0, groups=1, bias=True):
    return {"op": "conv", "out": out, "kernel": kernel, "stride": stride,
            "padding": padding, "groups": groups, "bias": bias}


def bn():
    return {"op": "bn", "eps": BN_EPS, "momentum": BN_MOMENTUM}


def maxpool(kernel, stride, padding=0):
    return {"op": "maxpool", "kernel": kernel, "stride": stride, "padding": padding}


def dense(out):
    return {"op": "dense", "out": out, "bias": True}


def simple(op):
    """relu, relu6, flatten, global_avgpool: nodes without attributes."""
    return {"op": op}


def dropout(p):
    return {"op": "dropout", "p": p}


def adaptive_avgpool(size):
    return {"op": "adaptive_avgpool", "size": size}


def residual(body, shortcut, post):
    return {"op": "residual", "body": body, "shortcut": shortcut, "post": post}


def concat(branches):
    return {"op": "concat", "branches": branches}


def embedding(vocab, dim):
    return {"op": "embedding", "vocab": vocab, "dim": dim}


def gru(hidden):
    """One GRU layer over the whole sequence, from a zero state; its output is the last state."""
    return {"op": "gru", "hidden": hidden}

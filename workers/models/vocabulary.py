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


def embedding(vocab, dim, std=None):
    """Token ids (L,) to their rows of a learned (vocab, dim) table: (L, dim). Initialised N(0, 1)
    (INIT), or N(0, ``std``) where given (GPT's 0.02: its table is tied to the output)."""
    node = {"op": "embedding", "vocab": vocab, "dim": dim}
    if std is not None:
        node["std"] = std
    return node


def gru(hidden):
    """One GRU layer over the whole sequence, from a zero state; its output is the last state."""
    return {"op": "gru", "hidden": hidden}


# -- attention models (ViT, GPT) ----------------------------------------------------------------
# A token sequence is (L, D): L positions of D features. dense applies to the last axis, so it
# serves both a flat vector (D,) and a sequence (L, D) (each position alike).


def layernorm(eps):
    """Layer normalisation over the last axis (the D features of each position), with a learned
    scale (gamma, 1) and shift (beta, 0): PyTorch's nn.LayerNorm(D, eps)."""
    return {"op": "layernorm", "eps": eps}


def gelu(approximate="none"):
    """GELU: x * Phi(x) with the exact normal CDF ("none", ViT's), or its tanh approximation
    ("tanh", GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return {"op": "gelu", "approximate": approximate}


def attention(heads, causal):
    """Multi-head self-attention over an (L, D) sequence: query, key and value projections (D to D,
    each with a bias), ``heads`` heads of D / heads features, softmax(q k^T / sqrt(D / heads)) v per
    head, a causal mask where ``causal`` (position i sees positions 0..i), the heads concatenated
    and an output projection (D to D, with a bias). No dropout on the attention weights."""
    return {"op": "attention", "heads": heads, "causal": bool(causal)}


def patch_embed(dim, patch):
    """ViT's patch embedding: a ``patch`` x ``patch`` convolution of stride ``patch`` (with a bias)
    to ``dim`` channels, its grid read row by row as a sequence: (C, H, W) to (H/p * W/p, dim)."""
    return {"op": "patch_embed", "dim": dim, "patch": patch}


def class_token():
    """A learned (D,) vector put before the sequence: (L, D) to (L + 1, D)."""
    return {"op": "class_token"}


def position_embedding(length):
    """Learned position embeddings, a (length, D) table: position i adds row i. A sequence may be
    shorter than ``length`` (GPT's context); the whole table is trained parameters."""
    return {"op": "position_embedding", "length": length}


def first_token():
    """The first position of a sequence (ViT's class token): (L, D) to (D,)."""
    return {"op": "first_token"}


def tied_output(vocab):
    """The language model's output projection, tied to the model's one ``embedding`` node: logits
    = x E^T with E that embedding's (vocab, D) table, no bias, no parameters of its own:
    (L, D) to (L, vocab)."""
    return {"op": "tied_output", "vocab": vocab}

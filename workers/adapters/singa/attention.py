"""The attention models' nodes (issue 25) in singa 3.0.0.dev1's autograd, for the Singa adapter.
Python 3.6.

Singa has no attention layer, no layer normalisation, no GELU, no embedding lookup from a tensor
of ids and no working concatenation or slicing (autograd.cat, Slice and Gather pass their parts as
a singa_wrap.VecTensor, which this wheel's binding lacks). Every node is written with the
operators it does have: 2-D and batched matrix products (singa.Mult), transposes, reshapes,
softmax over rows (its backward on the last axis of a 4-D tensor is wrong), elementwise tanh, exp, abs, sign, sqrt and reciprocal. What the stock
operators cannot express safely is a few small autograd Operators below (``operators``):

- ``BatchMatMul``: autograd.Matmul's backward transposes with DefaultTranspose, which reverses
  every axis of a 3-D or 4-D operand; this one swaps the last two;
- ``OneHot``: the embedding's comparison of ids with 0..V-1, with half autograd.equal's temporaries;
- ``Scale``, ``Shift``, ``AddConstant``: multiply or add a number, add a constant tensor (the
  causal mask) by broadcasting. Stock autograd has no scalar operators, and its broadcasting
  backward (back_broadcast) sums with a temporary tensor that a buffered graph reads after it is
  freed (the same failure as the bias-free convolution's zero bias in layers.py), so every
  broadcast with a gradient is written as a product with a constant matrix instead.

Constant tensors (averaging vectors, selection and shift matrices, the mask, the vocabulary's ids)
are made once at build time for the fixed batch size and held by their step.
"""

import math

from workers import models
from workers.adapters.singa.binding import HostIO

OPS = ("layernorm", "gelu", "attention", "patch_embed", "class_token", "position_embedding",
       "first_token", "tied_output", "embedding")

# How each node is written (recorded in the run's execution["layers"], as PyTorch's HOW).
HOW = {
    "attention": "explicit matrix products (singa has no attention layer): q, k, v and output "
                 "layer.Linear, scores q k^T / sqrt(d) as a batched singa.Mult, the causal mask "
                 "added as a constant -inf triangle, autograd.softmax on rows, a batched product "
                 "with v",
    "layernorm": "composed (singa has no layer norm): row mean and variance as products with a "
                 "1/D vector, sqrt, reciprocal, scale and shift expanded by products with ones",
    "gelu": "composed (singa has tanh but no erf): tanh GELU from autograd.tanh; exact GELU with "
            "erf written as Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7) from abs, exp, sign",
    "embedding": "a one-hot product (singa has no lookup from a tensor of ids: autograd.Gather "
                 "takes a Python list): ids compared with 0..V-1 on the device, then a matrix "
                 "product with the table",
    "patch_embed": "layer.Conv2d of stride patch, reshaped and transposed to (N, L, D)",
    "class_token": "a product with a constant shift matrix plus the token placed by a product "
                   "(singa's concatenation needs the missing VecTensor)",
}

# Abramowitz and Stegun 7.1.26: erf(z) = 1 - (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z).
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def operators(autograd, wrap):
    """The Operators singa's autograd lacks (see the module docstring), made once it is imported."""

    class BatchMatMul(autograd.Operator):
        """a @ b on 3-D or 4-D tensors (batch axes equal), with the last two axes swapped in
        backward."""

        def forward(self, a, b):
            if autograd.training:
                self.inputs = (a, b)
            return wrap.Mult(a, b)

        def backward(self, dy):
            a, b = self.inputs
            perm = list(range(len(a.shape())))
            perm[-2], perm[-1] = perm[-1], perm[-2]
            return (wrap.Mult(dy, wrap.Transpose(b, perm)), wrap.Mult(wrap.Transpose(a, perm), dy))

    class Scale(autograd.Operator):
        def __init__(self, alpha):
            super(Scale, self).__init__()
            self.alpha = float(alpha)

        def forward(self, x):
            return wrap.MultFloat(x, self.alpha)

        def backward(self, dy):
            return wrap.MultFloat(dy, self.alpha)

    class Shift(autograd.Operator):
        def __init__(self, value):
            super(Shift, self).__init__()
            self.value = float(value)

        def forward(self, x):
            return wrap.AddFloat(x, self.value)

        def backward(self, dy):
            return dy

    class AddConstant(autograd.Operator):
        """x + c, c a constant broadcast over x's leading axes (no gradient for c)."""

        def __init__(self, constant):
            super(AddConstant, self).__init__()
            self.constant = constant

        def forward(self, x):
            return wrap.__add__(x, self.constant.data)

        def backward(self, dy):
            return dy

    class OneHot(autograd.Operator):
        """(M, 1) ids against a (1, V) row of 0..V-1: 1.0 where equal. autograd.equal computes the
        same with four (M, V) temporaries alive at once (a difference, two comparisons, their
        product); this holds two. No backward: ids carry no gradient."""

        def __init__(self, ids):
            super(OneHot, self).__init__()
            self.ids = ids

        def forward(self, x):
            return wrap.LTFloat(wrap.Abs(wrap.__sub__(x, self.ids.data)), 0.5)

        def backward(self, dy):
            raise RuntimeError("token ids have no gradient")

    return {"BatchMatMul": BatchMatMul, "Scale": Scale, "Shift": Shift, "AddConstant": AddConstant,
            "OneHot": OneHot}


class Parts(object):
    """A node's own parameter tensors by INIT rule name ({"weight": [...], "bias": [...]});
    ``linears`` are layer.Linear objects whose W and b appear once singa's compile made them."""

    def __init__(self, weights=(), biases=(), linears=()):
        self.weights, self.biases, self.linears = list(weights), list(biases), list(linears)

    def tensors(self):
        weights = self.weights + [lin.W for lin in self.linears]
        biases = self.biases + [lin.b for lin in self.linears]
        return {"weight": weights, "bias": biases}


class Nodes(object):
    """Builds the steps of the attention nodes for a layers.Translator (its sg, dev, batch_size)."""

    def __init__(self, translator):
        self.t = translator
        self.sg, self.ag, self.n = translator.sg, translator.sg["autograd"], translator.batch_size
        self.table = None  # the embedding's table, for tied_output

    def step(self, node, shape):
        return getattr(self, node["op"])(node, shape)

    # -- constants and parameters ------------------------------------------------------------

    def const(self, array):
        import numpy as np

        array = np.ascontiguousarray(array, dtype=np.float32)
        tensor = self.sg["tensor"].Tensor(array.shape, self.t.dev, requires_grad=False,
                                          stores_grad=False)
        HostIO.put(tensor, array)
        return tensor

    def param(self, shape):
        return self.sg["tensor"].Tensor(tuple(shape), self.t.dev, requires_grad=True, stores_grad=True)

    def matmul(self, a, b):
        return self.ag.matmul(a, b)

    def bmm(self, a, b):
        return self.sg["BatchMatMul"]()(a, b)[0]

    def scale(self, x, alpha):
        return self.sg["Scale"](alpha)(x)[0]

    def shift(self, x, value):
        return self.sg["Shift"](value)(x)[0]

    # -- the nodes -----------------------------------------------------------------------------

    def layernorm(self, node, shape):
        import numpy as np

        ag, d = self.ag, shape[-1]
        rows = self.n * int(np.prod(shape[:-1]))
        gamma, beta = self.param((1, d)), self.param((1, d))
        self.t.keep(node, shape, Parts([gamma], [beta]))
        average, spread = self.const(np.full((d, 1), 1.0 / d)), self.const(np.ones((1, d)))
        ones = self.const(np.ones((rows, 1)))
        eps, out_shape = node["eps"], (self.n,) + tuple(shape)

        def run(x):
            x = ag.reshape(x, (rows, d))
            centred = ag.sub(x, self.matmul(self.matmul(x, average), spread))
            var = self.matmul(ag.mul(centred, centred), average)
            inv = ag.reciprocal(ag.sqrt(self.shift(var, eps)))  # (rows, 1)
            y = ag.mul(centred, self.matmul(inv, spread))
            y = ag.add(ag.mul(y, self.matmul(ones, gamma)), self.matmul(ones, beta))
            return ag.reshape(y, out_shape)

        return run

    def gelu(self, node, shape):
        ag = self.ag
        if node["approximate"] == "tanh":
            def run(x):
                cube = ag.mul(ag.mul(x, x), x)
                inner = self.scale(ag.add(x, self.scale(cube, 0.044715)), math.sqrt(2.0 / math.pi))
                return ag.mul(self.scale(x, 0.5), self.shift(ag.tanh(inner), 1.0))
            return run

        def run_exact(x):
            return ag.mul(self.scale(x, 0.5), self.shift(self.erf(self.scale(x, 1.0 / math.sqrt(2.0))), 1.0))

        return run_exact

    def erf(self, z):
        ag = self.ag
        t = ag.reciprocal(self.shift(self.scale(ag.abs(z), _AS_P), 1.0))
        poly = self.scale(t, _AS_A[-1])
        for a in reversed(_AS_A[:-1]):
            poly = ag.mul(self.shift(poly, a), t)
        decay = ag.exp(self.scale(ag.mul(z, z), -1.0))
        return ag.mul(ag.sign(z), self.shift(self.scale(ag.mul(poly, decay), -1.0), 1.0))

    def attention(self, node, shape):
        import numpy as np

        ag, layer = self.ag, self.sg["layer"]
        length, d = shape
        heads, rows = node["heads"], self.n * length
        head = d // heads
        q, k, v, out = [layer.Linear(d, bias=True) for _ in range(4)]
        self.t.keep(node, shape, Parts(linears=[q, k, v, out]))
        self.t.fits((self.n, heads, length, length), "the attention scores")
        mask = None
        if node["causal"]:
            mask = self.const(np.triu(np.full((length, length), -np.inf), 1))
        split = (self.n, length, heads, head)

        def heads_first(x):  # (rows, D) -> (N, heads, L, head)
            return ag.reshape(ag.transpose(ag.reshape(x, split), (0, 2, 1, 3)), (self.n, heads, length, head))

        def run(x):
            x = ag.reshape(x, (rows, d))
            qh, kh, vh = heads_first(q(x)), heads_first(k(x)), heads_first(v(x))
            kt = ag.reshape(ag.transpose(kh, (0, 1, 3, 2)), (self.n, heads, head, length))
            scores = self.scale(self.bmm(qh, kt), 1.0 / math.sqrt(head))
            if mask is not None:
                scores = self.sg["AddConstant"](mask)(scores)[0]
            # softmax on 2-D rows: singa's SoftMaxBackward is wrong on the last axis of a 4-D
            # tensor (its forward is right), and right on rows
            weights = ag.reshape(ag.softmax(ag.reshape(scores, (rows * heads, length)), 1),
                                 (self.n, heads, length, length))
            y = self.bmm(weights, vh)
            y = ag.reshape(ag.transpose(y, (0, 2, 1, 3)), (rows, d))
            return ag.reshape(out(y), (self.n, length, d))

        return run

    def patch_embed(self, node, shape):
        ag, p, dim = self.ag, node["patch"], node["dim"]
        conv = self.sg["Conv"](dim, p, stride=p, padding=0, bias=True)
        self.t.keep(node, shape, conv)
        length = (shape[1] // p) * (shape[2] // p)

        def run(x):
            y = ag.reshape(conv(x), (self.n, dim, length))
            return ag.reshape(ag.transpose(y, (0, 2, 1)), (self.n, length, dim))

        return run

    def class_token(self, node, shape):
        """[token; x]: x moved down one position by a (L, L+1) shift matrix, the token placed in
        position 0 by an (L+1, 1) unit column, summed."""
        import numpy as np

        ag, (length, d) = self.ag, shape
        token = self.param((1, d))
        self.t.keep(node, shape, Parts([token]))
        shift = self.const(np.eye(length, length + 1, 1))
        first = np.zeros((self.n * (length + 1), 1))
        first[::length + 1] = 1.0
        place = self.const(first)

        def run(x):
            moved = self.matmul(ag.reshape(ag.transpose(x, (0, 2, 1)), (self.n * d, length)), shift)
            moved = ag.reshape(ag.transpose(ag.reshape(moved, (self.n, d, length + 1)), (0, 2, 1)),
                               (self.n * (length + 1), d))
            out = ag.add(moved, self.matmul(place, token))
            return ag.reshape(out, (self.n, length + 1, d))

        return run

    def position_embedding(self, node, shape):
        """x + the first L rows of the (length, D) table, the rows picked by a product with a
        constant selection matrix and repeated over the batch by another."""
        import numpy as np

        ag, (length, d) = self.ag, shape
        table = self.param((node["length"], d))
        self.t.keep(node, shape, Parts([table]))
        pick = self.const(np.tile(np.eye(length, node["length"]), (self.n, 1)))  # (N*L, length)

        def run(x):
            x = ag.reshape(x, (self.n * length, d))
            return ag.reshape(ag.add(x, self.matmul(pick, table)), (self.n, length, d))

        return run

    def first_token(self, node, shape):
        import numpy as np

        ag, (length, d) = self.ag, shape
        unit = self.const(np.eye(length, 1))

        def run(x):
            y = self.matmul(ag.reshape(ag.transpose(x, (0, 2, 1)), (self.n * d, length)), unit)
            return ag.reshape(y, (self.n, d))

        return run

    def embedding(self, node, shape):
        import numpy as np

        ag, length = self.ag, shape[0]
        vocab, dim = node["vocab"], node["dim"]
        table = self.param((vocab, dim))
        self.t.keep(node, shape, Parts([table]))
        self.table = table
        ids = self.const(np.arange(vocab).reshape(1, vocab))
        self.t.fits((self.n * length, vocab), "the embedding's one-hot input")

        def run(x):  # x: (N, L) float32 token ids, exact below 2**24
            hot = self.sg["OneHot"](ids)(ag.reshape(x, (self.n * length, 1)))[0]  # (N*L, V)
            return ag.reshape(self.matmul(hot, table), (self.n, length, dim))

        return run

    def tied_output(self, node, shape):
        ag, (length, d), table = self.ag, shape, self.table
        if table is None:
            raise ValueError("tied_output needs the model's embedding before it")

        def run(x):
            y = self.matmul(ag.reshape(x, (self.n * length, d)), ag.transpose(table, (1, 0)))
            return ag.reshape(y, (self.n, length, node["vocab"]))

        return run


def load_canonical(adapter, arch, params):
    """Set a built model's parameters from workers.models.pure's canonical layout
    ({path: {name: array}}, PyTorch's layout): the cross-checks' way in
    (tests/attention_checks.py). Singa's Linear holds (in, out), PyTorch's (out, in)."""
    import numpy as np

    made = adapter.translator.by_path

    def put(tensor, value):
        HostIO.put(tensor, np.ascontiguousarray(value, dtype=np.float32).reshape(tuple(tensor.shape)))

    for path, values in params.items():
        node, obj = made[path]
        op = node["op"]
        if op == "attention":
            for name, linear in zip("qkvo", obj.linears):
                key = "out" if name == "o" else name
                put(linear.W, np.asarray(values[key + "_weight"]).T)
                put(linear.b, values[key + "_bias"])
        elif op == "dense":
            put(obj.W, np.asarray(values["weight"]).T)
            if "bias" in values:
                put(obj.b, values["bias"])
        elif op == "patch_embed":
            put(obj.W, values["weight"])
            put(obj.b, values["bias"])
        else:  # layernorm, class_token, position_embedding, embedding: Parts
            put(obj.weights[0], values["weight"])
            if "bias" in values:
                put(obj.biases[0], values["bias"])

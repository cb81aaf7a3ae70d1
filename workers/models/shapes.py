"""Shape and parameter inference on the layer lists, in pure Python: every translator checks its
output shape against it, and the tests hold each framework's parameter count to ``infer``.
"""


def _window(size, kernel, stride, padding, what):
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ValueError("{} (kernel {}, stride {}, padding {}) gets a spatial size of {} and "
                         "would give {}".format(what, kernel, stride, padding, size, out))
    return out


def _spatial_input(shape, what):
    if len(shape) != 3:
        raise ValueError("{} needs a (C, H, W) input, got {}".format(what, list(shape)))
    return shape


def _spatial(node, shape, what):
    c, h, w = _spatial_input(shape, what)
    args = (node["kernel"], node["stride"], node["padding"], what)
    return c, _window(h, *args), _window(w, *args)


def out_shape(node, shape):
    """Output shape (a tuple) of ``node`` for an input ``shape``; ValueError if it cannot apply."""
    op = node["op"]
    if op == "conv":
        c, h, w = _spatial(node, shape, "conv")
        if c % node["groups"] or node["out"] % node["groups"]:
            raise ValueError("conv groups {} do not divide {} -> {} channels".format(
                node["groups"], c, node["out"]))
        return node["out"], h, w
    if op == "maxpool":
        return _spatial(node, shape, "maxpool")
    if op in ("bn", "relu", "relu6", "dropout", "gelu"):
        return tuple(shape)
    if op in ("layernorm", "attention", "class_token", "position_embedding", "first_token",
              "tied_output"):
        return _sequence_op(node, shape)
    if op == "patch_embed":
        c, h, w = _spatial_input(shape, op)
        args = (node["patch"], node["patch"], 0, "patch_embed")
        return _window(h, *args) * _window(w, *args), node["dim"]
    if op == "adaptive_avgpool":
        return _spatial_input(shape, op)[0], node["size"], node["size"]
    if op == "global_avgpool":
        return (_spatial_input(shape, op)[0],)
    if op == "flatten":
        size = 1
        for dim in shape:
            size *= dim
        return (size,)
    if op == "dense":  # on the last axis: a flat (D,) input, or each position of an (L, D) one
        if len(shape) not in (1, 2):
            raise ValueError("dense needs a flat (D,) or an (L, D) input, got {}".format(list(shape)))
        return tuple(shape[:-1]) + (node["out"],)
    if op == "embedding":
        if len(shape) != 1:
            raise ValueError("embedding needs a (L,) sequence of token ids, got {}".format(list(shape)))
        return shape[0], node["dim"]
    if op == "gru":
        if len(shape) != 2:
            raise ValueError("gru needs a (L, features) sequence, got {}".format(list(shape)))
        return (node["hidden"],)
    if op == "concat":
        outs = [walk(branch, shape)[0] for branch in node["branches"]]
        if any(len(o) != 3 or o[1:] != outs[0][1:] for o in outs):
            raise ValueError("concat branches give {}: their spatial sizes differ".format(
                [list(o) for o in outs]))
        return (sum(o[0] for o in outs),) + tuple(outs[0][1:])
    if op == "residual":
        body = walk(node["body"], shape)[0]
        short = walk(node["shortcut"], shape)[0]
        if body != short:
            raise ValueError("residual body gives {} but shortcut gives {}".format(
                list(body), list(short)))
        return body
    raise ValueError("unknown op {!r}".format(op))


def _sequence_op(node, shape):
    op = node["op"]
    if op == "layernorm" and len(shape) in (1, 2):
        return tuple(shape)
    if len(shape) != 2:
        raise ValueError("{} needs an (L, D) sequence, got {}".format(op, list(shape)))
    length, dim = shape
    if op == "attention":
        if dim % node["heads"]:
            raise ValueError("attention: {} heads do not divide the width {}".format(node["heads"], dim))
        return tuple(shape)
    if op == "class_token":
        return length + 1, dim
    if op == "position_embedding":
        if length > node["length"]:
            raise ValueError("position_embedding: a sequence of {} positions is longer than its {} "
                             "positions".format(length, node["length"]))
        return tuple(shape)
    if op == "first_token":
        return (dim,)
    return length, node["vocab"]  # tied_output; its width is checked against the embedding's in walk


def node_parameters(node, shape):
    """Trainable parameters of ``node`` for an input ``shape`` (BN running stats excluded)."""
    op = node["op"]
    if op == "conv":
        per_out = shape[0] // node["groups"] * node["kernel"] * node["kernel"]
        return node["out"] * (per_out + (1 if node["bias"] else 0))
    if op == "bn":
        return 2 * shape[0]
    if op == "embedding":
        return node["vocab"] * node["dim"]
    if op == "gru":  # three gates, input and recurrent weights, two biases each
        hidden = node["hidden"]
        return 3 * hidden * (shape[-1] + hidden) + 2 * 3 * hidden
    if op == "dense":
        return node["out"] * (shape[-1] + (1 if node["bias"] else 0))
    if op == "layernorm":
        return 2 * shape[-1]
    if op == "attention":  # query, key, value and output projections, each D x D with a bias
        return 4 * shape[-1] * (shape[-1] + 1)
    if op == "patch_embed":
        return node["dim"] * (shape[0] * node["patch"] * node["patch"] + 1)
    if op == "class_token":
        return shape[-1]
    if op == "position_embedding":
        return node["length"] * shape[-1]
    if op == "residual":
        return walk(node["body"], shape)[1] + walk(node["shortcut"], shape)[1]
    if op == "concat":
        return sum(walk(branch, shape)[1] for branch in node["branches"])
    return 0


def walk(layers, shape):
    """(output shape, parameters) of a layer list."""
    shape = tuple(shape)
    total = 0
    tables = []  # the embeddings' (vocab, dim) so far: what a tied_output ties to
    for node in layers:
        if node["op"] == "embedding":
            tables.append((node["vocab"], node["dim"]))
        if node["op"] == "tied_output":
            _check_tie(node, shape, tables)
        new_shape = out_shape(node, shape)
        total += node_parameters(node, shape)
        shape = new_shape
    return shape, total


def _check_tie(node, shape, tables):
    if len(tables) != 1:
        raise ValueError("tied_output ties to the model's one embedding before it; found {}".format(
            len(tables)))
    vocab, dim = tables[0]
    if (node["vocab"], shape[-1]) != (vocab, dim):
        raise ValueError("tied_output of {} x {} does not match its embedding's table of {} x {}".format(
            node["vocab"], shape[-1], vocab, dim))


def infer(arch):
    """{"output_shape": [...], "parameters": n} by shape inference; ValueError if it cannot run."""
    shape, total = walk(arch["layers"], arch["input"])
    if list(shape) != arch["output"]:
        raise ValueError("{} ends in shape {}, expected {}".format(
            arch["name"], list(shape), arch["output"]))
    return {"output_shape": list(shape), "parameters": total}

"""A bare, hand-written JAX training or inference loop: the baseline for the harness's step.

Run it with the JAX environment's interpreter (benchmarks/harness/overhead.py does); it prints one JSON
object. The Flax module comes from the project's one translation of workers.models (the very
network, initialised the same) and the images from workers.data; the rest is JAX's idiomatic path
written by hand: one ``jax.jit`` step (value_and_grad of the forward and softmax cross-entropy,
an Optax update, the state donated) compiled by its first call in the warm-up, over batches made
into NHWC device arrays beforehand, the XLA CPU pool sized by PJRT_NPROC, and
``block_until_ready`` before the clock is read (JAX dispatches asynchronously).

With --paired N, the in-process comparison of benchmarks/inside/bare_common.py, the same step runs on the
adapter's own model, optimizer and training state.

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the step is one ``jax.jit`` of the module's apply in evaluation mode (train=False: batch norm on
its running statistics, nothing mutable, no gradients) over the parameters and the batch-norm
statistics, compiled by its first call in the warm-up. Every output is kept and waited for
(``block_until_ready``) before the clock is read: XLA may run independent calls out of order, so
waiting for the last one alone would not mean the work is done (the adapter keeps them the same
way; with --paired the bare step keeps its outputs in the adapter's list, which its synchronize()
waits for).
"""

import os
import sys

from benchmarks.inside import bare_common


def setup(args):
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as the adapter: keeps stderr readable
    env = bare_common.set_thread_variables(bare_common.THREAD_VARIABLES + ("PJRT_NPROC",), args.threads)
    import jax

    jax.devices()  # start the backend: its thread pool exists from here on
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    threads = {"xla_intra_op": names.count("tf_XLAEigen"), "env": env}
    return jax, {"version": jax.__version__, "threads": threads}


def make_step(jax, net, tx, seed):
    """The hand-written step over a state dict; returns the new state and the loss."""
    import optax

    dropout_key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)

    def step(state, x, y):
        def loss_of(params):
            variables = {"params": params, "batch_stats": state["batch_stats"]}
            rngs = {"dropout": jax.random.fold_in(dropout_key, state["step"])}
            logits, updated = net.apply(variables, x, train=True, rngs=rngs, mutable=["batch_stats"])
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updated

        (loss, updated), grads = jax.value_and_grad(loss_of, has_aux=True)(state["params"])
        updates, opt = tx.update(grads, state["opt"], state["params"])
        new = dict(
            state, params=optax.apply_updates(state["params"], updates), opt=opt, step=state["step"] + 1
        )
        new["batch_stats"] = updated.get("batch_stats", {})
        return new, loss

    return jax.jit(step, donate_argnums=0)


def make_infer(jax, net):
    """The hand-written forward pass: a jitted apply of the variables in evaluation mode."""
    return jax.jit(lambda variables, x: net.apply(variables, x, train=False))


def device_batches(jax, batches):
    import numpy as np

    # NHWC and int32 labels, once and untimed, as the adapter does.
    return [
        jax.device_put((np.ascontiguousarray(x.transpose(0, 2, 3, 1)), y.astype(np.int32)))
        for x, y in batches
    ]


def make_solo(jax, args, batches):
    import jax.numpy as jnp
    import optax

    from workers import models
    from workers.adapters.jax import layers as jax_layers

    arch = models.build_arch(args.model, args.classes, args.image_size)
    net = jax_layers.network(arch)
    c, h, w = arch["input"]
    variables = net.init(jax.random.PRNGKey(args.seed), jnp.zeros((1, h, w, c)), train=False)
    tx = optax.sgd(args.lr, momentum=args.momentum)
    holder = {
        "state": {
            "params": variables["params"],
            "batch_stats": variables.get("batch_stats", {}),
            "opt": tx.init(variables["params"]),
            "step": jnp.zeros((), jnp.int32),
        }
    }
    jitted = make_step(jax, net, tx, args.seed)

    def step(x, y):
        holder["state"], loss = jitted(holder["state"], x, y)
        return loss

    def sync():
        jax.block_until_ready(holder["state"])

    return step, device_batches(jax, batches), float, sync


def on_adapter(jax, adapter, args, batches):
    jitted = make_step(jax, adapter.net, adapter.tx, args.seed)

    def step(x, y):
        # The adapter's own state: its synchronize() waits for this step too.
        state, loss = jitted(adapter.state(), x, y)
        adapter.replace_state(state)
        return loss

    return step, device_batches(jax, batches)


def infer_solo(jax, args, batches):
    import jax.numpy as jnp

    from workers import models
    from workers.adapters.jax import layers as jax_layers

    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    net = jax_layers.network(arch)
    c, h, w = arch["input"]
    variables = net.init(jax.random.PRNGKey(args.seed), jnp.zeros((1, h, w, c)), train=False)
    variables = {"params": variables["params"], "batch_stats": variables.get("batch_stats", {})}
    outputs = []
    infer = make_infer(jax, net)

    def step(x):
        out = infer(variables, x)
        outputs.append(out)
        return out

    def sync():
        jax.block_until_ready(outputs)
        del outputs[:]

    images = [(x,) for x, _ in device_batches(jax, batches)]
    return step, images, lambda out: float(jnp.mean(out)), sync


def infer_on_adapter(jax, adapter, args, batches):
    infer = make_infer(jax, adapter.net)

    def step(x):
        # The adapter's own weights and statistics, read as its infer_step reads them; the output
        # joins the adapter's, which its synchronize() waits for (and replaces the list of).
        state = adapter.state()
        out = infer({"params": state["params"], "batch_stats": state["batch_stats"]}, x)
        adapter.keep_output(out)
        return out

    return step, [(x,) for x, _ in device_batches(jax, batches)]


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "jax", setup, make_solo, on_adapter, infer_solo=infer_solo, infer_on_adapter=infer_on_adapter
        )
    )

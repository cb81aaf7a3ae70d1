"""A bare, hand-written PyTorch training or inference loop: the baseline for the harness's step.

Run it with the PyTorch environment's interpreter (benchmarks/harness/overhead.py does, in a fresh process
per measurement); it prints one JSON object. The model comes from the project's one translation of
workers.models (so it is the very network the harness trains) and the images from workers.data (so
it is the very data); everything else is plain PyTorch: pre-made batch tensors, zero_grad / forward
/ cross_entropy / backward / step, and time.perf_counter around the timed steps. No events, no
runner, no adapter.

With --device cuda the batches wait in pinned host memory and each step copies its own to the GPU
(non_blocking), as the harness's adapter does; the clock stops after torch.cuda.synchronize().
TF32 is off for matrix products and cuDNN's convolutions, as the adapter's fp32 has it.

With --paired N it instead measures, in this one process, N passes over the steps, taken in chunks
of --chunk steps three times in turn, each chunk clocked on its own: by the harness's code (the
PyTorch adapter's train_step and the runner's per-step event, as workers/runner.py runs them), by
train_step alone, and by the bare step, all on the adapter's own model and optimizer
(benchmarks/inside/bare_common.py).

With --task inference (the harness's infer_step; --features: the model up to its pooled features)
the step is a forward pass written as PyTorch's users write one for speed: the model in eval()
mode, under torch.inference_mode() (the adapter uses torch.no_grad(): inference mode also skips
the tensors' version counting), its output kept (on the device) until the next step replaces it.
"""

import sys

from benchmarks.inside import bare_common


def setup(args):
    env = bare_common.set_thread_variables(bare_common.THREAD_VARIABLES, args.threads)
    import torch

    if args.threads > 0:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    threads = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads(), "env": env}
    return torch, {"version": torch.__version__, "threads": threads}


def make_step(torch, model, optimizer, device="cpu"):
    """The hand-written training step (on cuda it copies its batch to the device first)."""
    cross_entropy = torch.nn.functional.cross_entropy
    cuda = device == "cuda"

    def step(x, y):
        if cuda:
            x = x.to("cuda", non_blocking=True)
            y = y.to("cuda", non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def make_infer_step(torch, model, device="cpu"):
    """The hand-written forward pass (on cuda it copies its batch to the device first)."""
    model.eval()
    inference_mode = torch.inference_mode
    cuda = device == "cuda"

    def step(x):
        if cuda:
            x = x.to("cuda", non_blocking=True)
        with inference_mode():
            return model(x)

    return step


def tensors(torch, batches, device="cpu"):
    pairs = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    if device == "cuda":
        # Pinned (page-locked), as the adapter's epoch buffers are: the copy can run asynchronously.
        pairs = [(x.pin_memory(), y.pin_memory()) for x, y in pairs]
    return pairs


def sync_for(torch, device):
    return torch.cuda.synchronize if device == "cuda" else bare_common.no_sync


def solo_model(torch, args):
    """The model from the project's one translation, initialised as the adapter does."""
    from workers import models
    from workers.adapters.pytorch.layers import sequential

    torch.manual_seed(args.seed)
    arch = models.build_arch(args.model, args.classes, args.image_size, args.features)
    with torch.no_grad():
        model = sequential(torch.nn, arch["layers"], tuple(arch["input"]))[0].train()
    if args.device == "cuda":
        torch.backends.cudnn.benchmark = True  # as the adapter sets it
        # fp32 as the adapter runs it: no TF32 in cuDNN's convolutions either. PyTorch's default lets
        # them use TF32, and on the first GPU check (H200) that alone made this loop 2.1x faster than
        # the harness's fp32 run (32.7 against 68.9 ms a ResNet50 step at batch 64): a precision
        # difference, not harness overhead.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        model = model.to("cuda")
    return model


def make_solo(torch, args, batches):
    model = solo_model(torch, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    step = make_step(torch, model, optimizer, args.device)
    batches = tensors(torch, batches, args.device)
    return step, batches, lambda loss: loss.item(), sync_for(torch, args.device)


def on_adapter(torch, adapter, args, batches):
    step = make_step(torch, adapter.model, adapter.optimizer, args.device)
    return step, tensors(torch, batches, args.device)


def infer_solo(torch, args, batches):
    step = make_infer_step(torch, solo_model(torch, args), args.device)
    images = [(x,) for x, _ in tensors(torch, batches, args.device)]
    return step, images, lambda out: out.float().mean().item(), sync_for(torch, args.device)


def infer_on_adapter(torch, adapter, args, batches):
    step = make_infer_step(torch, adapter.model, args.device)
    return step, [(x,) for x, _ in tensors(torch, batches, args.device)]


if __name__ == "__main__":
    sys.exit(
        bare_common.main(
            "pytorch", setup, make_solo, on_adapter, infer_solo=infer_solo, infer_on_adapter=infer_on_adapter
        )
    )

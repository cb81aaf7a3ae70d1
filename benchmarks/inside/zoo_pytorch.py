"""Bench's PyTorch port against Hugging Face Transformers' models, in one process
(benchmarks/frameworks/zoo_parity.py): the attention models' reference implementations PyTorch's users
reach for.

Run with the PyTorch environment's interpreter (transformers is pinned there for this benchmark;
no run imports it). The zoo side is built from a configuration, untrained (nothing is
downloaded): `ViTForImageClassification` for vit_b16 and vit_tiny, `GPT2LMHeadModel` for
gpt2_small and gpt_tiny, each with its `sdpa` attention (PyTorch's scaled_dot_product_attention,
as bench's port), trained by the bare loop's hand-written step with SGD and momentum on the
adapter's own batches. The configurations carry bench's sizes and choices where the libraries'
defaults differ (benchmarks/frameworks/zoo_models.py lists what still differs): layer norm epsilon 1e-6 for
the ViT (transformers' default is 1e-12), no dropout in the ViT, and no dropout on GPT-2's
attention weights (bench has none there; its residual and embedding dropout, 0.1, are GPT-2's).
torchvision, whose vit_b_16 the issue names, cannot be installed beside this CPU build of torch
(zoo_models.UNAVAILABLE_NOTES).
"""

import sys

from benchmarks.inside import bare_pytorch_loop, zoo_common

ZOO = ("vit_b16", "vit_tiny", "gpt2_small", "gpt_tiny")


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise SystemExit(
            f"transformers is not installed in this PyTorch environment ({exc}): envs/pytorch.txt pins it; "
            "run `bench env setup pytorch`"
        ) from exc
    return transformers


def _config(transformers, args):
    from workers import models

    if args.model in models.VIT:
        patch, width, depth, heads, mlp = models.VIT[args.model]
        return "ViTForImageClassification", transformers.ViTConfig(
            image_size=args.image_size,
            patch_size=patch,
            num_channels=3,
            hidden_size=width,
            num_hidden_layers=depth,
            num_attention_heads=heads,
            intermediate_size=mlp,
            hidden_act="gelu",
            layer_norm_eps=models.VIT_LN_EPS,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            num_labels=args.classes,
            attn_implementation="sdpa",
        )
    vocab, context, width, depth, heads, mlp = models.GPT[args.model]
    return "GPT2LMHeadModel", transformers.GPT2Config(
        vocab_size=vocab,
        n_positions=context,
        n_embd=width,
        n_layer=depth,
        n_head=heads,
        n_inner=mlp,
        activation_function="gelu_new",
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.0,
        layer_norm_epsilon=models.GPT_LN_EPS,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
    )


def zoo_model(torch, args):
    if args.model not in ZOO:
        raise SystemExit(f"transformers has no counterpart here for {args.model} (only {', '.join(ZOO)})")
    transformers = _transformers()
    name, config = _config(transformers, args)
    torch.manual_seed(args.seed)
    inner = getattr(transformers, name)(config)

    class Logits(torch.nn.Module):
        """The model's logits alone, as the bare step's cross-entropy takes them."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x).logits

    model = Logits(inner).train()
    count = zoo_common.trainable(p.shape for p in model.parameters() if p.requires_grad)
    return model, count, f"transformers.{name}"  # the version: zoo_parity prints the environment's


def zoo_step(torch, model, args):
    """The bare loop's step; a language model's logits are taken position by position."""
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    class Flat(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, x):
            logits = self.model(x)
            return logits.flatten(0, 1) if logits.dim() == 3 else logits

    step = bare_pytorch_loop.make_step(torch, Flat(model), optimizer)
    return lambda x, y: step(x, y.flatten() if y.dim() == 2 else y)


if __name__ == "__main__":
    sys.exit(zoo_common.main("pytorch", bare_pytorch_loop.setup, zoo_model, zoo_step))

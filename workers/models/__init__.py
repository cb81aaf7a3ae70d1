"""The benchmark's architectures, written once as data (the model definition).

Every framework adapter translates the same layer list into its own layers, so the models are
identical by construction; ``infer`` counts parameters in pure Python and the tests hold each
framework's count to it. Standard library only, Python 3.6 syntax (Singa's interpreter).

Conventions every translator must follow (see docs/models.md):

- shapes are channels-first, (C, H, W); ``flatten`` flattens in C, H, W order;
- convolution and max-pool padding is explicit and symmetric, output sizes round down;
- ``bn`` momentum is the weight of the new batch statistic (PyTorch's convention; Keras's
  ``momentum`` is ``1 - momentum``); ``global_avgpool`` yields a (C,) vector;
- ``residual`` adds ``body(x)`` and ``shortcut(x)`` (an empty shortcut is the identity), then
  applies ``post`` ("relu" or None);
- ``concat`` runs each of its ``branches`` (layer lists) on the same input and concatenates their
  outputs along the channels, in branch order (Inception's module);
- a token model's input is a sequence of token ids, shape (L,); ``embedding`` maps it to
  (L, dim); ``gru`` runs over the L steps from a zero state and yields its last state (hidden,):
  PyTorch's GRU (cuDNN's), with gates in the order reset, update, new, and two biases per gate
  (input and recurrent), the recurrent one inside the reset product of the new gate:
  n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h. Keras's GRU with
  ``reset_after=True`` is the same function with the gates in the order update, reset, new;
- the attention models work on sequences (L, D): ``dense`` and ``layernorm`` act on the last axis
  of each position; ``attention`` is multi-head self-attention with separate query, key, value and
  output projections (each D x D with a bias; a framework that stacks q, k and v in one (3D, D)
  matrix holds the same numbers), scores scaled by 1/sqrt(D / heads), a causal mask where asked,
  no dropout on the weights; ``patch_embed`` reads its convolution's grid row by row (position
  i * W' + j); ``class_token`` goes first; ``tied_output`` multiplies by the transposed table of
  the model's one ``embedding`` (one parameter, not two); a language model's loss and accuracy
  are over every position (the next token). ``workers.models.pure`` computes each of these nodes
  in pure Python, the reference the translators are held to.

The package: ``reference`` holds the numbers every framework is set to (initialisation, batch
norm, optimizers, the adaptive pool's matrix); ``vocabulary`` the layer constructors; ``shapes``
the shape and parameter inference; ``zoo`` the models themselves. Every public name is importable
from ``workers.models`` as before the split (the orchestrator and the tests do).
"""

from workers.models.reference import (  # noqa: F401
    ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ALL_MODELS, ATTENTION, BN_EPS, BN_MOMENTUM, CHANNELS_LAST_MIN_SIZE,
    EMBEDDING, GPT, GPT_INIT_STD, GPT_LN_EPS, GRU_UNITS, INIT, LANGUAGE, MODELS, OOV, PAD, RECURRENT,
    RMSPROP_ALPHA, RMSPROP_EPS, SEQ_LEN, START, TOKEN_MODELS, VIT, VIT_LN_EPS, VOCAB, fans, init_scale,
    node_init, pool_bins, pool_matrix,
)
from workers.models.shapes import infer, node_parameters, out_shape  # noqa: F401
from workers.models.vocabulary import (  # noqa: F401
    adaptive_avgpool, attention, bn, class_token, concat, conv, dense, dropout, embedding,
    first_token, gelu, gru, layernorm, maxpool, patch_embed, position_embedding, residual, simple,
    tied_output,
)
from workers.models.zoo import (  # noqa: F401
    POOLS, build_arch, check_image_size, default_sequence_length, features_layers, input_shape,
    min_image_size, tokens_per_sample,
)

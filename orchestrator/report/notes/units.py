"""What one "image" is for the token models: the note under a table that counts them in images."""

from __future__ import annotations

from typing import Any

from orchestrator.config.run_config import RECURRENT_MODELS, TOKEN_MODELS
from workers import models


def token_unit_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What one "image" is for each token model among the rows: a sequence of so many tokens, and
    the language models' tokens/s (a sequence_length axis gives several lengths)."""
    notes = []
    for model in sorted({r["model"] for r in rows if r["model"] in TOKEN_MODELS}):
        lengths = sorted(
            {models.tokens_per_sample(model, r.get("sequence_length")) for r in rows if r["model"] == model}
        )
        tokens = " or ".join(str(n) for n in lengths)
        if model in RECURRENT_MODELS:
            notes.append(
                f'{model}: one "image" is one sequence of {tokens} tokens (images/s are '
                "sequences/s, ms/image ms per sequence)"
            )
        else:
            notes.append(
                f'{model}: one "image" is one sequence of {tokens} tokens, each position predicting the '
                "next (images/s are sequences/s, ms/image ms per sequence; tokens/s = sequences/s x "
                "tokens: the tokens/s column, bench inspect)"
            )
    return notes

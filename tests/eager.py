"""The tested reference for attention capture: one forward pass with transformers'
own eager attention, every layer's weights returned. lcr's production paths
(``forward_mean_attention``, ``generate_with_attention``) are compared against it."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from lcr.models.transformers_llm import AttentionPass, TransformersLLM


def forward_with_attention(
    llm: TransformersLLM,
    input_ids: Sequence[int] | torch.Tensor,
    cache: Any = None,
    *,
    logits_to_keep: int = 1,
) -> AttentionPass:
    """Every layer's attention weights, ``(batch, heads, new, past + new)`` each (memory
    is layers x heads x new x (past + new) floats). The given cache is deep-copied
    first, so the caller's stays as it was; ``logits_to_keep``: logits of the last N
    positions (0 = all)."""
    ids = llm.as_batch(input_ids)
    with torch.no_grad(), llm.eager_attention():
        out = llm.model(
            input_ids=ids,
            cache=copy.deepcopy(cache),
            use_cache=True,
            output_attentions=True,
            logits_to_keep=logits_to_keep,
        )
    return AttentionPass(out.logits, out.attentions, out.cache)

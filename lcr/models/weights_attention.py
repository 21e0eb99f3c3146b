"""An attention implementation that returns its weights at SDPA speed.

transformers gives attention weights only from its eager implementation, which
copies every key and value once per query head (``repeat_kv``) before two plain
matmuls: with grouped-query attention (the 1.5B model: 12 query heads over 2
key/value heads) and a long cache, that copy dominates a decoding step, and
PECAN's build decodes every Information Point token this way.

This implementation computes the output with PyTorch's fused SDPA, exactly as
the ``sdpa`` implementation does, and the weights separately from the grouped
queries against the shared keys, without copying them: the same softmax, to
float rounding. It is registered with transformers under :data:`NAME` and
switched on only for the passes that capture attention.
"""

from __future__ import annotations

from typing import Any

NAME = "lcr_sdpa_weights"
_registered = False


def sdpa_with_weights(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """``(output, weights)`` with weights ``(batch, heads, new, keys)`` in float32."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    out, _ = sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
    )
    batch, heads, new, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else dim**-0.5
    # (b, kv, g*new, d) @ (b, kv, d, keys): each key/value head serves its group as is
    grouped = query.reshape(batch, kv_heads, groups * new, dim)
    scores = torch.matmul(grouped, key.transpose(2, 3)).float() * scale
    scores = scores.view(batch, kv_heads, groups, new, keys)
    if attention_mask is not None:
        mask = attention_mask[:, :, -new:, -keys:].unsqueeze(2)  # (b, 1, 1, new, keys)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    elif new > 1:  # SDPA's causal fast path passes no mask: the new tokens are the last
        causal = torch.ones(new, keys, dtype=torch.bool, device=scores.device)
        scores = scores.masked_fill(~causal.tril(diagonal=keys - new), float("-inf"))
    weights = torch.softmax(scores, dim=-1).view(batch, heads, new, keys)
    return out, weights


def register() -> str:
    """Make :data:`NAME` a valid ``attn_implementation`` (masks built as for SDPA)."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, sdpa_with_weights)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True
    return NAME

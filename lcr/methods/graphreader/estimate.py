"""GraphReader's build, estimated (``lcr index --estimate``): one extraction per chunk.

The chunks are the build's own (``method.chunk_nodes``), so the calls and their
prompt tokens are exact; the replies' length, and with it the facts and key
elements the embedder then encodes, depend on the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from lcr.estimate.calls import encoded_tokens, replies, shared_prefix
from lcr.estimate.figures import BuildEstimate, LLMWork, Range
from lcr.methods.graphreader import prompts
from lcr.models.base import Tokenizer

REPLY_SHARE = 0.5  # reply tokens per prompt token: smollm2 on the examples (bench_estimate)
KEYS_PER_REPLY_TOKEN = 0.05  # key elements the embedder encodes, per reply token
CHARS_PER_TOKEN = 4.0


def estimate_extraction(
    chunks: Sequence[str],
    tokenizer: Tokenizer,
    max_new_tokens: int,
    share: tuple[float, str],
    keys_share: tuple[float, str],
) -> BuildEstimate:
    """Calls and tokens of extracting every chunk (``share``: reply tokens per prompt
    token, and where that figure comes from)."""
    convs = [prompts.extraction_messages(text, max_new_tokens) for text in chunks]
    sizes = [len(tokenizer.render(c)) for c in convs]
    calls = len(chunks)
    prompt = float(sum(sizes))
    window = tokenizer.context_window
    completion, context = replies(sizes, max_new_tokens, window, share[0])
    prefix = shared_prefix(tokenizer, convs[:2]) if calls > 1 else 0
    encoded = encoded_tokens(prompt, calls, prefix)
    keys = completion.scaled(keys_share[0])
    return BuildEstimate(
        llm=LLMWork(
            role="llm",
            model=tokenizer.model_id,
            calls=Range.exact(calls),
            prompt_tokens=Range.exact(prompt),
            completion_tokens=completion,
            encoded_tokens=Range(encoded, prompt),
            decode_context=context,
        ),
        embedder_texts=keys,
        nodes=Range(calls, calls) + keys.scaled(2),
        stored_text_chars=Range.exact(sum(len(c) for c in chunks))
        + completion.scaled(CHARS_PER_TOKEN),
        vectors=keys,
        basis={
            "calls": f"exact: one extraction per chunk ({calls} chunks of the build's chunker)",
            "prompt_tokens": "exact: each chunk's prompt with the model's tokenizer and template",
            "completion_tokens": (
                f"range: reply tokens per prompt token {share[1]}; at most "
                f"{max_new_tokens} a reply (graphreader.extraction_max_new_tokens)"
            ),
            "embedder_texts": f"key elements per reply token {keys_share[1]}",
        },
    )

"""A scripted LLM for control-flow tests. Real-model tests cover the same paths."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lcr.evidence import Usage
from lcr.models.base import ALL_CAPABILITIES, Capability, ContinuationScore, Generation, Message


class ScriptedLLM:
    """Deterministic stand-in for the LLM protocol.

    ``generate`` answers with the first ``words`` words (at most ``max_new_tokens``)
    of the last message, from the first ``after`` on when it is given (RAPTOR's
    prompt ends its instruction with "possible: "), so summaries are real text made
    from their input; ``choice_probability`` follows a callable or a constant.
    """

    model_id = "scripted-test-llm"
    backend = "scripted"
    capabilities: frozenset[Capability] = ALL_CAPABILITIES

    def __init__(self, yes_probability: float = 0.5, words: int = 20, after: str = "") -> None:
        self.usage = Usage()
        self.yes_probability = yes_probability
        self.words = words
        self.after = after
        self.prompts: list[list[Message]] = []

    @property
    def context_window(self) -> int:
        return 4096

    def count_tokens(self, text: str) -> int:
        return len(re.findall(r"\w+|[^\w\s]", text))

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> Generation:
        self.prompts.append(list(messages))
        content = messages[-1]["content"]
        if self.after and self.after in content:
            content = content.split(self.after, 1)[1]
        words = content.split()[: min(self.words, max_new_tokens)]
        text = " ".join(words)
        prompt_tokens = sum(self.count_tokens(m["content"]) for m in messages)
        completion = self.count_tokens(text)
        self.usage.add(prompt_tokens, completion)
        return Generation(text, prompt_tokens, completion)

    def generate_batch(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_result: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        out = []
        for i, c in enumerate(conversations):
            gen = self.generate(c, max_new_tokens=max_new_tokens, stop=stop)
            out.append(gen)
            if on_result is not None:
                on_result(i, gen)
        return out

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        self.prompts.append(list(messages))
        self.usage.add(sum(self.count_tokens(m["content"]) for m in messages), 0)
        return self.yes_probability

    def continuation_logprob(self, context: str, continuation: str) -> float:
        self.usage.add(self.count_tokens(context + continuation), 0)
        shared = len(set(context.lower().split()) & set(continuation.lower().split()))
        return -float(self.count_tokens(continuation)) + 0.5 * shared

    def continuation_logprobs(
        self, context: str, continuations: Sequence[str], *, max_tokens: int | None = None
    ) -> list[ContinuationScore]:
        return [
            ContinuationScore(self.continuation_logprob(context, c), self.count_tokens(c))
            for c in continuations
        ]


class ForbiddenLLM(ScriptedLLM):
    """Fails the test if anything touches it: proves a path needs no LLM."""

    def generate(self, *args: object, **kwargs: object) -> Generation:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def choice_probability(self, *args: object, **kwargs: object) -> float:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def continuation_logprob(self, *args: object, **kwargs: object) -> float:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def continuation_logprobs(self, *args: object, **kwargs: object) -> list[ContinuationScore]:  # type: ignore[override]
        raise AssertionError("the LLM was used")

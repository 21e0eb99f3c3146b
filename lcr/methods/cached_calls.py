"""A build's generation calls through the index's cache, so each is paid for once.

RAPTOR's summaries and GraphReader's chunk extractions are independent calls
whose replies a build cannot do without. Each goes through here (PECAN's
build and LightPAL's scoring read and write ``ctx.cache`` themselves: their
calls are not plain generations): a reply already
in the index's cache (``cache/<method>.jsonl``) costs nothing; a new one is
stored the moment the backend reports it (``generate_batch(on_result=)``), so a
build killed at any point pays for no call twice. The counters feed the
method's stats.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from lcr.errors import LcrError, LLMCallError
from lcr.methods.base import BuildContext
from lcr.models.base import LLM, Generation, Message
from lcr.progress import Task
from lcr.store import cache_key


class CachedCalls:
    """Conversations in, reply texts out, each reply cached as it arrives.

    ``batch_size`` 0 hands the backend every pending call at once (it batches on
    a GPU, decodes together with llama.cpp, sends ``--concurrency`` at a time to
    a server); N > 0 sends N at a time. ``require_text`` refuses an empty reply
    (and an empty cached one) with :class:`LLMCallError`.
    """

    def __init__(
        self,
        ctx: BuildContext,
        *,
        prompt_version: str,
        max_new_tokens: int,
        batch_size: int,
        what: str,
        require_text: bool = False,
    ) -> None:
        self.ctx = ctx
        self.prompt_version = prompt_version
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.what = what  # e.g. "summarising RAPTOR layer 2", for error messages
        self.require_text = require_text
        self.calls = 0
        self.batches = 0
        self.cached = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.seconds = 0.0
        self._llm: LLM | None = None

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            self._llm = self.ctx.models.llm
        return self._llm

    def key(self, messages: list[Message]) -> str:
        identity = self.ctx.cache.llm_identity(self.llm)
        return cache_key(self.prompt_version, identity, messages, self.max_new_tokens)

    def stats(self) -> dict[str, Any]:
        return {
            "llm_calls": self.calls,
            "llm_batches": self.batches,
            "llm_batch_size": self.batch_size if self.batches else 0,
            "llm_cached": self.cached,
            "llm_prompt_tokens": self.prompt_tokens,
            "llm_completion_tokens": self.completion_tokens,
            "llm_seconds": round(self.seconds, 3),
        }

    def run(self, conversations: list[list[Message]], task: Task, what: str = "") -> list[str]:
        """The reply to every conversation, in order; ``what`` names this step in errors."""
        what = what or self.what
        out: list[str | None] = [None] * len(conversations)
        keys = [self.key(m) for m in conversations] if conversations else []
        todo: list[int] = []
        for i, key in enumerate(keys):
            hit = self.ctx.cache.get(key)
            text = hit.get("text") if isinstance(hit, dict) else None
            if isinstance(text, str) and (text.strip() or not self.require_text):
                out[i] = text
                self.cached += 1
                task.advance()
            else:
                todo.append(i)
        size = self.batch_size or len(todo) or 1
        for b in range(0, len(todo), size):
            batch = todo[b : b + size]

            def store(j: int, gen: Generation, batch: list[int] = batch) -> None:
                i = batch[j]
                text = gen.text.strip() if self.require_text else gen.text
                if self.require_text and not text:
                    raise LLMCallError(
                        f"the LLM returned an empty reply while {what}; try another --llm "
                        "or a larger token budget"
                    )
                self.ctx.cache.put(
                    keys[i],
                    {
                        "text": text,
                        "prompt_tokens": gen.prompt_tokens,
                        "completion_tokens": gen.completion_tokens,
                    },
                )
                self.prompt_tokens += gen.prompt_tokens
                self.completion_tokens += gen.completion_tokens
                self.calls += 1
                out[i] = text
                task.advance()

            self._send([conversations[i] for i in batch], what, store)
        return [t if t is not None else "" for t in out]

    def _send(
        self,
        convs: list[list[Message]],
        what: str,
        store: Callable[[int, Generation], None],
    ) -> None:
        started = time.perf_counter()
        try:
            if len(convs) == 1:
                store(0, self.llm.generate(convs[0], max_new_tokens=self.max_new_tokens))
            else:
                stored: set[int] = set()

                def once(j: int, gen: Generation) -> None:
                    stored.add(j)
                    store(j, gen)

                gens = self.llm.generate_batch(
                    convs, max_new_tokens=self.max_new_tokens, on_result=once
                )
                if len(gens) != len(convs):
                    raise LLMCallError(
                        f"the LLM returned {len(gens)} replies for {len(convs)} prompts"
                    )
                for j, gen in enumerate(gens):  # an LLM that does not report as it goes
                    if j not in stored:
                        store(j, gen)
        except LcrError:
            raise
        except Exception as exc:
            raise LLMCallError(
                f"LLM call failed while {what} ({exc.__class__.__name__}: {exc}); replies "
                "already paid for are kept, run the same command again to resume"
            ) from exc
        finally:
            self.seconds += time.perf_counter() - started
        self.batches += 1

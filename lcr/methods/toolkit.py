"""The build toolkit: what every method's build does alike, done one way, in one place.

A method reaches it through its :class:`~lcr.methods.base.BuildContext`
(``ctx.chunk_nodes``, ``ctx.embed``, ``ctx.llm_calls``, ``ctx.generations``,
``ctx.build_stage``) or imports it from here; it lives outside every method's
package, so methods share it without importing each other.

- **Chunking** (:func:`chunk_nodes`): a chunker's pieces of every document as
  level-0 nodes whose spans are exactly the pieces.
- **Long texts** (:func:`embedding_pieces`, :func:`embed_pooled`): an embedder
  reads at most ``max_tokens`` of its own tokens and silently drops the rest,
  so a text longer than that is embedded in pieces that fit, and its one row
  is the mean of its pieces' rows.
- **LLM calls** (:class:`LLMCalls`): cache, then call, then a failure as
  :class:`~lcr.errors.LLMCallError`, then store the moment the reply exists,
  so a build killed at any point pays for no call twice; :class:`Generations`
  is the batched form for plain generations.
- **Timed stages** (:class:`BuildStages`): the seconds of each named stage of a
  build, for its stats. Build time only; a query is accounted elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from lcr.errors import LcrError, LLMCallError
from lcr.models.base import LLM, Embedder, Generation, Message, llm_configuration
from lcr.progress import NULL_PROGRESS, OneTask, Progress, Task
from lcr.store import LLMCache, Node, cache_key

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.text.chunking import Chunk

# ----------------------------------------------------------------------- chunking


def chunk_nodes(
    documents: Iterable[tuple[int, int, str]],
    cut: Callable[[str, int], Iterable[Chunk]],
    *,
    prefix: str = "c",
    tokens: Callable[[str], int] | None = None,
    each_document: Callable[[], object] = lambda: None,
) -> list[Node]:
    """Level-0 nodes ``<prefix><n>`` of ``(doc index, start offset, text)`` documents,
    numbered across documents: ``cut(text, offset)`` gives each document's chunks (a
    chunker of :mod:`lcr.text.chunking` with its size bound), each node's span is its
    chunk's, and ``tokens`` (when given) counts each chunk into ``meta["tokens"]``."""
    nodes: list[Node] = []
    for doc, start, text in documents:
        for c in cut(text, start):
            meta = {"tokens": tokens(c.text)} if tokens is not None else {}
            nodes.append(
                Node(f"{prefix}{len(nodes)}", 0, c.text, [(c.start, c.end)], doc, meta=meta)
            )
        each_document()
    return nodes


# --------------------------------------------------------------------- long texts


def embedding_pieces(embedder: Embedder, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The texts to embed, and the text each piece belongs to.

    A text within the embedder's window is one piece, itself. A longer one (counted
    in the embedder's own tokens: random strings, code and numbers run far longer
    than lcr's approximate count) is cut at sentences, lines, then words into pieces
    that fit, so no word of it goes unseen.
    """
    from lcr.text.chunking import token_windows

    # an embedder without a window (or one that does not say) reads every text whole
    limit = int(getattr(embedder, "max_tokens", 0) or 0)
    counts = embedder.token_counts(list(texts)) if limit and texts else [0] * len(texts)
    pieces: list[str] = []
    owner: list[int] = []
    for i, (text, n) in enumerate(zip(texts, counts, strict=True)):
        parts = [text]
        if limit and n > limit:
            parts = [c.text for c in token_windows(text, limit, count=embedder.count_tokens)]
        pieces.extend(parts)
        owner.extend([i] * len(parts))
    return pieces, np.asarray(owner, dtype=np.int64)


def embed_pooled(
    embedder: Embedder,
    texts: Sequence[str],
    progress: Progress = NULL_PROGRESS,
    description: str = "embedding",
    *,
    renormalise_whole: bool = False,
) -> np.ndarray:
    """One L2-normalised float32 row per text, whatever its length: a text longer than
    the embedder's window is the normalised mean of its pieces' rows
    (:func:`embedding_pieces`), so its tail counts as much as its start.

    A text read whole keeps the embedder's own row; ``renormalise_whole`` normalises
    those rows again in float64 too, as LightPAL's builds always have (its indexes
    stay byte-identical; the two differ in the last bit of some values)."""
    pieces, owner = embedding_pieces(embedder, texts)
    if not pieces:
        return np.zeros((0, int(embedder.dim)), dtype=np.float32)
    task = progress.task(description, total=len(pieces))
    rows = np.asarray(embedder.encode(pieces, progress=OneTask(task)), dtype=np.float32)
    if len(pieces) == len(texts) and not renormalise_whole:
        return rows  # every text read whole
    sums = np.zeros((len(texts), rows.shape[1]))
    np.add.at(sums, owner, rows.astype(np.float64))
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    pooled = (sums / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    if not renormalise_whole:
        whole = np.bincount(owner, minlength=len(texts)) == 1
        pooled[whole] = rows[np.searchsorted(owner, np.flatnonzero(whole))]
    return pooled


# ---------------------------------------------------------------------- LLM calls


class LLMCalls:
    """Cache, call, wrap a failure, store: the one way a build pays for an LLM call.

    A reply already in the index's cache (``cache/<method>.jsonl``, keyed by
    content: the prompt, the model's identity, the budget, the method's prompt
    version) costs nothing; a new one is stored the moment it exists, so a killed
    build resumes without paying for it again, and ``--force`` keeps it. ``kept``
    names what is kept in the message of a failure ("replies", "scores").
    The counters feed the method's stats.
    """

    def __init__(self, cache: LLMCache, *, kept: str = "replies") -> None:
        self.cache = cache
        self.kept = kept
        self.calls = 0  # replies paid for by this build (stored)
        self.cached = 0  # replies read back from the cache
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.seconds = 0.0

    def key(self, prompt_version: str, llm: LLM, *parts: Any) -> str:
        """The content key of a call to ``llm``: its prompt version, the model's
        identity and configuration, then whatever else decides the reply."""
        identity = self.cache.llm_identity(llm.model_id, llm_configuration(llm))
        return cache_key(prompt_version, identity, *parts)

    def lookup(self, key: str, valid: Callable[[Any], bool] = lambda hit: hit is not None) -> Any:
        """The stored value of ``key`` when ``valid`` accepts it (counted), else None."""
        hit = self.cache.get(key)
        if hit is None or not valid(hit):
            return None
        self.cached += 1
        return hit

    @contextmanager
    def paying(self, what: str) -> Iterator[None]:
        """Around the call itself: its time counted, any failure but lcr's own turned
        into one :class:`LLMCallError` line that says what was being done."""
        started = time.perf_counter()
        try:
            yield
        except LcrError:
            raise
        except Exception as exc:
            raise LLMCallError(
                f"LLM call failed while {what} ({exc.__class__.__name__}: {exc}); "
                f"{self.kept} already paid for are kept, run the same command again to resume"
            ) from exc
        finally:
            self.seconds += time.perf_counter() - started

    def store(self, key: str, value: Any) -> None:
        """Keep a reply paid for; its ``prompt_tokens`` and ``completion_tokens`` (when
        ``value`` is a dict holding them) are counted."""
        self.cache.put(key, value)
        self.calls += 1
        if isinstance(value, dict):
            self.prompt_tokens += int(value.get("prompt_tokens", 0) or 0)
            self.completion_tokens += int(value.get("completion_tokens", 0) or 0)

    def once(
        self, key: str, call: Callable[[], Any], *, what: str, valid: Callable[[Any], bool]
    ) -> Any:
        """The value of ``key``: from the cache when ``valid``, else ``call()``'s (the
        value to store: a JSON-able dict), stored before it is returned."""
        hit = self.lookup(key, valid)
        if hit is not None:
            return hit
        with self.paying(what):
            value = call()
        self.store(key, value)
        return value


class Generations:
    """Conversations in, reply texts out, each through :class:`LLMCalls`.

    ``batch_size`` 0 hands the backend every pending call at once (it batches on
    a GPU, decodes together with llama.cpp, sends ``--concurrency`` at a time to
    a server); N > 0 sends N at a time. Each reply is stored as the backend
    reports it (``generate_batch(on_result=)``). ``require_text`` refuses an
    empty reply (and an empty cached one) with :class:`LLMCallError`.
    """

    def __init__(
        self,
        models: Models,
        cache: LLMCache,
        *,
        prompt_version: str,
        max_new_tokens: int,
        batch_size: int,
        what: str,
        require_text: bool = False,
    ) -> None:
        self.models = models
        self.calls = LLMCalls(cache)
        self.prompt_version = prompt_version
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.what = what  # e.g. "summarising RAPTOR layer 2", for error messages
        self.require_text = require_text
        self.batches = 0
        self._llm: LLM | None = None

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            self._llm = self.models.llm
        return self._llm

    def key(self, messages: list[Message]) -> str:
        return self.calls.key(self.prompt_version, self.llm, messages, self.max_new_tokens)

    def stats(self) -> dict[str, Any]:
        return {
            "llm_calls": self.calls.calls,
            "llm_batches": self.batches,
            "llm_batch_size": self.batch_size if self.batches else 0,
            "llm_cached": self.calls.cached,
            "llm_prompt_tokens": self.calls.prompt_tokens,
            "llm_completion_tokens": self.calls.completion_tokens,
            "llm_seconds": round(self.calls.seconds, 3),
        }

    def _usable(self, hit: Any) -> bool:
        text = hit.get("text") if isinstance(hit, dict) else None
        return isinstance(text, str) and bool(text.strip() or not self.require_text)

    def run(self, conversations: list[list[Message]], task: Task, what: str = "") -> list[str]:
        """The reply to every conversation, in order; ``what`` names this step in errors."""
        what = what or self.what
        out: list[str | None] = [None] * len(conversations)
        keys = [self.key(m) for m in conversations] if conversations else []
        todo: list[int] = []
        for i, key in enumerate(keys):
            hit = self.calls.lookup(key, self._usable)
            if hit is not None:
                out[i] = hit["text"]
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
                value = {
                    "text": text,
                    "prompt_tokens": gen.prompt_tokens,
                    "completion_tokens": gen.completion_tokens,
                }
                self.calls.store(keys[i], value)
                out[i] = text
                task.advance()

            with self.calls.paying(what):
                self._send([conversations[i] for i in batch], store)
            self.batches += 1
        return [t if t is not None else "" for t in out]

    def _send(self, convs: list[list[Message]], store: Callable[[int, Generation], None]) -> None:
        if len(convs) == 1:
            store(0, self.llm.generate(convs[0], max_new_tokens=self.max_new_tokens))
            return
        stored: set[int] = set()

        def once(j: int, gen: Generation) -> None:
            stored.add(j)
            store(j, gen)

        gens = self.llm.generate_batch(convs, max_new_tokens=self.max_new_tokens, on_result=once)
        if len(gens) != len(convs):
            raise LLMCallError(f"the LLM returned {len(gens)} replies for {len(convs)} prompts")
        for j, gen in enumerate(gens):  # an LLM that does not report as it goes
            if j not in stored:
                store(j, gen)


# ------------------------------------------------------------------- timed stages


class BuildStages:
    """Seconds spent in each named stage of one build (``with ctx.build_stage("x"):``);
    a stage entered twice adds up. Build time only: a query is accounted elsewhere."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def to_json(self, always: Sequence[str] = ()) -> dict[str, float]:
        """Each stage's seconds, rounded to the millisecond; the stages of ``always``
        first, at 0 when they never ran (so a build's stats keep one shape)."""
        names = [*always, *(n for n in self.seconds if n not in always)]
        return {n: round(self.seconds.get(n, 0.0), 3) for n in names}

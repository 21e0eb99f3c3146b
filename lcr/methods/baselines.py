"""Plain retrieval baselines to compare the published methods against.

All share the same leaves (paragraphs, each within a page and section) so that their
differences come from scoring alone: ``bm25`` (bm25s), ``tfidf`` (cosine, after the
MixPR paper's RAG-Sparse), ``dense`` (the embedder), ``hybrid`` (0.15 sparse +
0.85 dense, the MixPR paper's RAG-Hybrid weights) and ``full`` (the whole text, cut to the
model's window by the answer step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lcr.config import Fixed, NoSettings, Settings, SettingValue, retired, setting
from lcr.errors import IndexDamagedError
from lcr.evidence import Evidence
from lcr.methods.base import (
    TOP_K,
    BuildContext,
    KOption,
    Method,
    Needs,
    QueryContext,
    item_from_node,
    top_indices,
)
from lcr.methods.embedding_cache import encode_kept
from lcr.methods.toolkit import embedding_pieces
from lcr.scoring.bm25 import BM25Index, bm25_token_ids, bm25_tokenize
from lcr.store import MethodReader, Node

if TYPE_CHECKING:
    from lcr.text.chunking import Chunk

# bm25s's stop-word lists, and PyStemmer's Snowball languages
STOPWORD_CHOICES = (
    "none", "en", "english", "en_plus", "english_plus", "de", "german", "nl", "dutch", "fr",
    "french", "es", "spanish", "pt", "portuguese", "it", "italian", "ru", "russian", "sv",
    "swedish", "no", "norwegian", "zh", "chinese", "tr", "turkish", "ko", "korean", "da", "danish",
)  # fmt: skip
STEMMER_CHOICES = (
    "none", "arabic", "armenian", "basque", "catalan", "czech", "danish", "dutch",
    "dutch_porter", "english", "esperanto", "estonian", "finnish", "french", "german", "greek",
    "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
    "persian", "polish", "porter", "portuguese", "romanian", "russian", "serbian", "sesotho",
    "spanish", "swedish", "tamil", "turkish", "yiddish",
)  # fmt: skip


# where the baselines' defaults are measured (issue 56)
_DEFAULTS = "docs/methods/baselines.md#how-the-defaults-were-chosen"


@dataclass(frozen=True)
class ChunkSettings(Settings):
    """The leaves every baseline shares, so their differences come from scoring alone."""

    chunk_tokens: int = setting(
        128, "leaf size in tokens; sentences are never cut", measured=_DEFAULTS, low=1
    )
    # paragraphs beat 0.1's windows for every baseline, dev and held out, at every word
    # budget (+0.03 to +0.18 gold recall, every interval above 0): docs/methods/baselines.md#chunks
    fixed = retired(chunking=Fixed("paragraphs", "windows lost to paragraphs on every measure"))


@dataclass(frozen=True)
class BM25Settings(ChunkSettings):
    k1: float = setting(1.5, "BM25 term-frequency saturation", library="bm25s", low=0)
    b: float = setting(0.75, "BM25 length normalisation", library="bm25s", low=0, high=1)
    stopwords: str = setting(
        "en",
        "stop-word list for bm25s ('none' keeps all)",
        library="bm25s",  # bm25s.tokenize's stopwords="english", the same list
        choices=STOPWORD_CHOICES,
    )
    stemmer: str = setting(
        "english",
        "Snowball stemmer language (PyStemmer); 'none' for none",
        measured=_DEFAULTS,
        choices=STEMMER_CHOICES,
    )


@dataclass(frozen=True)
class TopK(Settings):
    top_k: int = setting(
        10,
        "chunks handed to the answer step (-k overrides)",
        measured="docs/methods/baselines.md#top_k-how-many-chunks",
        low=1,
    )


@dataclass(frozen=True)
class HybridQuery(TopK):
    sparse_weight: float = setting(
        0.15, "weight of the sparse score (paper: 0.15)", paper=True, low=0, high=1
    )


def chunk_nodes(ctx: BuildContext[Any]) -> list[Node]:
    """Every document cut at its paragraphs, each within one page and section of its
    layout, as nodes (docs/methods/baselines.md#chunks)."""
    from lcr.text.chunking import section_chunks

    max_tokens = ctx.settings.chunk_tokens
    starts = {d.start: i for i, d in enumerate(ctx.documents) if d.end > d.start}
    layouts = ctx.layouts

    def cut(text: str, start: int) -> list[Chunk]:
        doc = starts.get(start)
        layout = layouts[doc] if doc is not None and doc < len(layouts) else None
        if layout is None:
            return section_chunks(text, max_tokens, offset=start)
        heads = [h.start for h in layout.headings]
        breaks = [p.start for p in layout.pages] + heads
        return section_chunks(text, max_tokens, breaks=breaks, headings=heads, offset=start)

    return ctx.chunk_nodes(cut)


def ranked_evidence(
    method: str,
    nodes: list[Node],
    scores: np.ndarray,
    k: int,
    *,
    matched_only: bool = False,
    **info: Any,
) -> Evidence:
    """The ``k`` best nodes, best first. ``matched_only``: a score of 0 means the node
    shares no term with the question (BM25, TF-IDF), so it is not evidence at all; such
    nodes are left out, and a question that matches nothing gets none (the answer step
    then abstains without an LLM call)."""
    if len(scores) != len(nodes):
        raise IndexDamagedError(f"{method} index is damaged: scores and nodes disagree")
    chosen = top_indices(scores, k)
    if matched_only:
        chosen = chosen[scores[chosen] > 0]
        if not len(chosen):  # said in words, so an empty list is not taken for a fault
            info = {**info, "note": "no chunk shares a word with the question"}
    items = [item_from_node(nodes[i], float(scores[i]), rank=r + 1) for r, i in enumerate(chosen)]
    return Evidence(method=method, items=items, info=dict(info))


EMBEDDER = Needs(embedder=True)


def _tfidf_scores(ctx: QueryContext[Any, Any], question: str) -> np.ndarray:
    model, matrix = _stored_tfidf(ctx.stored)
    q = model.transform([question])
    return np.asarray((matrix @ q.T).toarray()).ravel()


def _stored_tfidf(stored: MethodReader) -> tuple[Any, Any]:
    """The vectoriser and the chunks' rows, checked against each other and the chunks."""
    from lcr.scoring.tfidf import TfidfModel

    model = TfidfModel.load(stored)
    matrix = stored.csr("tfidf")
    n = len(stored.nodes())
    if matrix.shape != (n, model.vocabulary_size):
        raise stored.damage(
            f"tfidf.zarr is {matrix.shape[0]} x {matrix.shape[1]}, not {n} chunks x "
            f"{model.vocabulary_size} terms"
        )
    return model, matrix


def _stored_embeddings(stored: MethodReader) -> tuple[np.ndarray, np.ndarray | None]:
    """The chunks' embeddings, and which chunk each row embeds when some chunks were
    embedded in pieces (None: one row a chunk), checked against the chunks."""
    emb = stored.array("embeddings")
    n = len(stored.nodes())
    if emb.ndim != 2:
        raise stored.damage(f"embeddings hold {emb.shape}, not one row a chunk")
    if not stored.stats.get("split_chunks"):
        if emb.shape[0] != n:
            raise stored.damage(f"embeddings hold {emb.shape[0]} rows for {n} chunks")
        return emb, None
    owner = stored.array("piece_owner")
    if (
        owner.shape != (emb.shape[0],) or owner.dtype.kind not in "iu"
        or (n and (int(owner[0]) != 0 or int(owner[-1]) != n - 1))
        or bool((np.diff(owner) < 0).any()) or bool((np.diff(owner) > 1).any())
    ):  # fmt: skip
        raise stored.damage("piece_owner does not map the embeddings to the chunks")
    return emb, owner


def _dense_scores(ctx: QueryContext[Any, Any], question: str) -> np.ndarray:
    emb, owner = _stored_embeddings(ctx.stored)
    q = ctx.models.embedder.encode([question])
    if emb.shape[1] != q.shape[1]:
        raise ctx.stored.damage(
            f"embeddings have {emb.shape[1]} dimensions, the embedder {q.shape[1]}"
        )
    scores = emb @ q[0]
    if owner is None:
        return scores
    # some chunks were embedded in pieces: a chunk scores as its best piece
    best = np.full(int(owner[-1]) + 1, -np.inf, dtype=scores.dtype)
    np.maximum.at(best, owner, scores)
    return best


def _build_tfidf(ctx: BuildContext[Any], nodes: list[Node]) -> None:
    from lcr.scoring.tfidf import TfidfModel

    model, matrix = TfidfModel.fit([n.text for n in nodes])
    model.save(ctx.out)
    ctx.out.write_csr("tfidf", matrix)
    ctx.out.stats["vocabulary"] = model.vocabulary_size


def _build_dense(ctx: BuildContext[Any], nodes: list[Node]) -> None:
    pieces, owner = embedding_pieces(ctx.models.embedder, [n.text for n in nodes])
    # each batch kept in the method's cache as it is made: an interrupted build resumes
    emb = encode_kept(ctx.models.embedder, pieces, ctx.cache, progress=ctx.progress)
    ctx.out.write_array("embeddings", emb.astype(np.float32))
    split = int(np.count_nonzero(np.bincount(owner, minlength=len(nodes)) > 1)) if nodes else 0
    if split:
        ctx.out.write_array("piece_owner", owner)
        ctx.out.stats["split_chunks"] = split
        ctx.out.stats["embedded_pieces"] = len(pieces)


def _bm25_tokenize(texts: list[str], settings: BM25Settings) -> list[list[str]]:
    """The same tokenisation for chunks (build) and questions (query)."""
    return bm25_tokenize(texts, settings.stopwords, settings.stemmer)


class BM25(Method[BM25Settings, TopK]):
    name = "bm25"
    manual = "docs/methods/baselines.md"
    k_option = TOP_K
    summary = "Okapi BM25 over sentence-respecting chunks (bm25s)"
    paper = ""
    built_by_default = True
    build_settings = BM25Settings
    query_settings = TopK
    # the best 450 tokens of sentences from 20 chunks: on the 150 HotpotQA dev questions
    # +0.062 F1 over reading 10 chunks, at 46% of the prompt (docs/answer-step.md)
    answer_measured: ClassVar[Mapping[str, SettingValue]] = {
        "select": "bm25",
        "budget": 450,
        "pool": 20,
    }

    def build(self, ctx: BuildContext[BM25Settings]) -> None:
        nodes = chunk_nodes(ctx)
        s = ctx.settings
        ids, vocab = bm25_token_ids([n.text for n in nodes], s.stopwords, s.stemmer)
        index = BM25Index.fit_ids(ids, vocab, k1=s.k1, b=s.b)
        index.save(ctx.out)
        ctx.out.write_nodes(nodes)
        ctx.out.stats["vocabulary"] = index.vocabulary_size

    def retrieve(self, ctx: QueryContext[BM25Settings, TopK], question: str) -> Evidence:
        nodes = ctx.stored.nodes()
        index = BM25Index.load(ctx.stored, documents=len(nodes))
        scores = index.scores(_bm25_tokenize([question], ctx.built)[0], len(nodes))
        k_eff = ctx.settings.top_k
        return ranked_evidence(self.name, nodes, scores, k_eff, matched_only=True)

    def check_stored(self, stored: MethodReader, built: BM25Settings) -> None:
        BM25Index.load(stored, documents=len(stored.nodes()))


class TfIdf(Method[ChunkSettings, TopK]):
    name = "tfidf"
    manual = "docs/methods/baselines.md"
    k_option = TOP_K
    summary = "TF-IDF cosine similarity over chunks (after the MixPR paper's RAG-Sparse)"
    paper = ""
    build_settings = ChunkSettings
    query_settings = TopK

    def build(self, ctx: BuildContext[ChunkSettings]) -> None:
        nodes = chunk_nodes(ctx)
        _build_tfidf(ctx, nodes)
        ctx.out.write_nodes(nodes)

    def retrieve(self, ctx: QueryContext[ChunkSettings, TopK], question: str) -> Evidence:
        scores = _tfidf_scores(ctx, question)
        k_eff = ctx.settings.top_k
        return ranked_evidence(self.name, ctx.stored.nodes(), scores, k_eff, matched_only=True)

    def check_stored(self, stored: MethodReader, built: ChunkSettings) -> None:
        _stored_tfidf(stored)


class Dense(Method[ChunkSettings, TopK]):
    name = "dense"
    manual = "docs/methods/baselines.md"
    k_option = TOP_K
    summary = "cosine similarity of sentence-transformer embeddings over chunks"
    paper = ""
    build_settings = ChunkSettings
    query_settings = TopK
    needs_to_build = needs_to_retrieve = EMBEDDER

    def build(self, ctx: BuildContext[ChunkSettings]) -> None:
        nodes = chunk_nodes(ctx)
        _build_dense(ctx, nodes)
        ctx.out.write_nodes(nodes)

    def retrieve(self, ctx: QueryContext[ChunkSettings, TopK], question: str) -> Evidence:
        scores = _dense_scores(ctx, question)
        return ranked_evidence(self.name, ctx.stored.nodes(), scores, ctx.settings.top_k)

    def check_stored(self, stored: MethodReader, built: ChunkSettings) -> None:
        _stored_embeddings(stored)


class Hybrid(Method[ChunkSettings, HybridQuery]):
    name = "hybrid"
    manual = "docs/methods/baselines.md"
    k_option = TOP_K
    summary = "0.15 x TF-IDF cosine + 0.85 x dense cosine (after the MixPR paper's RAG-Hybrid)"
    paper = "Alonso & Millidge 2024 (MixPR), RAG baselines"
    build_settings = ChunkSettings
    query_settings = HybridQuery
    needs_to_build = needs_to_retrieve = EMBEDDER

    def build(self, ctx: BuildContext[ChunkSettings]) -> None:
        nodes = chunk_nodes(ctx)
        _build_tfidf(ctx, nodes)
        _build_dense(ctx, nodes)
        ctx.out.write_nodes(nodes)

    def retrieve(self, ctx: QueryContext[ChunkSettings, HybridQuery], question: str) -> Evidence:
        w = ctx.settings.sparse_weight
        scores = w * _tfidf_scores(ctx, question) + (1.0 - w) * _dense_scores(ctx, question)
        return ranked_evidence(self.name, ctx.stored.nodes(), scores, ctx.settings.top_k)

    def check_stored(self, stored: MethodReader, built: ChunkSettings) -> None:
        _stored_tfidf(stored)
        _stored_embeddings(stored)


class FullText(Method[NoSettings, NoSettings]):
    name = "full"
    manual = "docs/methods/baselines.md"
    k_option = KOption(counts="nothing: the whole text is the evidence", applies=False)
    summary = "the whole text, cut to the LLM's context window by the answer step"
    paper = ""

    def build(self, ctx: BuildContext[NoSettings]) -> None:
        nodes = [
            Node(f"d{doc}", 0, text, [(start, start + len(text))], doc)
            for doc, start, text in ctx.doc_texts()
        ]
        ctx.out.write_nodes(nodes)

    def retrieve(self, ctx: QueryContext[NoSettings, NoSettings], question: str) -> Evidence:
        items = [item_from_node(n, 1.0) for n in ctx.stored.nodes()]
        return Evidence(method=self.name, items=items)

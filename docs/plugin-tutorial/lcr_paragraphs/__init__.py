"""An lcr method in a package of its own: windows of whole paragraphs, ranked by how close
their embedding is to the question's. docs/plugin-tutorial/README.md walks through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lcr.config import Settings, setting
from lcr.evidence import Evidence
from lcr.methods.base import (
    TOP_K,
    BuildContext,
    Method,
    Needs,
    QueryContext,
    item_from_node,
    top_indices,
)
from lcr.store import MethodReader
from lcr.text.chunking import Chunk, paragraph_windows


@dataclass(frozen=True)
class ParagraphsBuild(Settings):
    max_tokens: int = setting(
        200, "embedder tokens per window of whole paragraphs", low=16, high=4096
    )


@dataclass(frozen=True)
class ParagraphsQuery(Settings):
    top_k: int = setting(4, "windows returned (-k sets it)", low=1)


EMBEDDER = Needs(embedder=True)  # the embedder role, and no LLM, to build and to retrieve


class Paragraphs(Method[ParagraphsBuild, ParagraphsQuery]):
    name = "paragraphs"
    summary = "windows of whole paragraphs ranked by embedding similarity to the question"
    paper = ""  # a baseline: no paper to cite
    manual = "README.md"  # where its defaults come from, from the folder holding this package
    build_settings = ParagraphsBuild
    query_settings = ParagraphsQuery
    k_option = TOP_K  # -k 3 is --set paragraphs.top_k=3
    needs_to_build = needs_to_retrieve = EMBEDDER
    quick_build_settings: ClassVar[dict[str, int]] = {"max_tokens": 64}

    def build(self, ctx: BuildContext[ParagraphsBuild]) -> None:
        count = ctx.models.embedder.count_tokens
        size = ctx.settings.max_tokens

        def cut(text: str, offset: int) -> list[Chunk]:  # the toolkit calls cut(text, offset)
            return paragraph_windows(text, size, count, offset)

        nodes = ctx.chunk_nodes(cut, prefix="p", tokens=count)
        ctx.out.write_nodes(nodes)
        embeddings = ctx.embed([node.text for node in nodes], "embedding paragraphs")
        ctx.out.write_array("embeddings", embeddings.astype(np.float32))

    def retrieve(
        self, ctx: QueryContext[ParagraphsBuild, ParagraphsQuery], question: str
    ) -> Evidence:
        nodes = ctx.stored.nodes()
        asked = ctx.models.embedder.encode([question])[0]
        scores = ctx.stored.array("embeddings") @ asked  # rows are L2-normalised: cosines
        best = top_indices(scores, ctx.settings.top_k)  # -k has already set top_k
        return Evidence(self.name, [item_from_node(nodes[i], scores[i]) for i in best])

    def check_stored(self, stored: MethodReader, built: ParagraphsBuild) -> None:
        rows, nodes = stored.array("embeddings").shape[0], stored.node_count()
        if rows != nodes:
            raise stored.damage(f"{rows} embeddings for {nodes} paragraphs")

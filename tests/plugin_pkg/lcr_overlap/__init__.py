"""A method from outside lcr: sentences ranked by the question's words they contain.

This package is what a third-party author writes: the method's class, using only
lcr's public contract (lcr.methods.base, lcr.config, lcr.store, lcr.evidence), and
one entry point in the group ``lcr.methods``. tests/test_plugins.py installs it
by putting a dist-info folder beside it on ``sys.path``, in a separate process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lcr.config import Settings, setting
from lcr.evidence import Evidence
from lcr.methods.base import BuildContext, Method, QueryContext, item_from_node, top_indices
from lcr.store import MethodReader, Node

_WORD = re.compile(r"[a-z]{4,}")


@dataclass(frozen=True)
class OverlapBuild(Settings):
    min_words: int = setting(3, "sentences shorter than this many words are left out", low=1)


@dataclass(frozen=True)
class OverlapQuery(Settings):
    top_k: int = setting(5, "sentences returned (-k overrides)", low=1)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class Overlap(Method[OverlapBuild, OverlapQuery]):
    name = "overlap"
    summary = "sentences ranked by how many of the question's words they contain"
    paper = ""
    manual = "README.md"  # where its defaults come from, beside this package
    build_settings = OverlapBuild
    query_settings = OverlapQuery
    quick_build_settings: ClassVar[dict[str, int]] = {"min_words": 2}

    def build(self, ctx: BuildContext[OverlapBuild]) -> None:
        nodes = []
        for doc, start, text in ctx.doc_texts():
            for match in re.finditer(r"[^\s.!?][^.!?]*[.!?]?", text):
                if len(match.group().split()) < ctx.settings.min_words:
                    continue
                span = (start + match.start(), start + match.end())
                nodes.append(Node(f"s{len(nodes)}", 0, match.group(), [span], doc))
        ctx.out.write_nodes(nodes)
        ctx.out.stats["sentences"] = len(nodes)

    def retrieve(self, ctx: QueryContext[OverlapBuild, OverlapQuery], question: str) -> Evidence:
        nodes = ctx.stored.nodes()
        asked = _words(question)
        scores = np.array([len(asked & _words(n.text)) for n in nodes], dtype=np.float64)
        best = top_indices(scores, ctx.settings.top_k)
        return Evidence(self.name, [item_from_node(nodes[i], scores[i]) for i in best])

    def check_stored(self, stored: MethodReader, built: OverlapBuild) -> None:
        stored.nodes()

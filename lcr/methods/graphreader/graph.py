"""The graph of key elements (section 3.2): nodes, their atomic facts, and links.

Pure data structures and algorithms, no I/O: ``build_graph`` turns per-chunk
facts into nodes and a symmetric sparse adjacency; :class:`Graph` is the
read-only view the agent explores (``method`` stores and loads it).

A node is a merged, normalised key element with every atomic fact that names
it. Two nodes are linked when one's key element occurs in the other's facts
(as a listed key element or as words of the fact text), and vice versa.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from lcr.methods.graphreader.extraction import MAX_KEY_WORDS, ExtractedFact
from lcr.methods.graphreader.keys import normalise_key


@dataclass(frozen=True)
class Fact:
    """An atomic fact, the chunk it came from, and the nodes it names."""

    text: str
    chunk: int
    nodes: tuple[int, ...]


@dataclass
class Graph:
    """What the agent may read: chunks, facts, nodes and links. Never modified."""

    chunk_texts: list[str]
    chunk_docs: list[int]
    facts: list[Fact]
    keys: list[str]  # each node's key element (its most frequent surface form)
    node_facts: list[list[int]]  # fact indices per node, in document order
    adjacency: sp.csr_array  # symmetric, nodes x nodes
    forms: list[list[str]] = field(default_factory=list)  # surface forms merged per node
    _by_normal: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for i, key in enumerate(self.keys):
            self._by_normal.setdefault(normalise_key(key), i)
        for i, forms in enumerate(self.forms):
            for form in forms:
                self._by_normal.setdefault(normalise_key(form), i)

    @property
    def n_nodes(self) -> int:
        return len(self.keys)

    @staticmethod
    def chunk_label(chunk: int) -> str:
        return f"c{chunk}"

    def facts_by_chunk(self, node: int) -> list[tuple[int, list[str]]]:
        """The node's facts grouped by chunk, chunks in document order (Figure 9's input)."""
        groups: dict[int, list[str]] = {}
        for f in self.node_facts[node]:
            fact = self.facts[f]
            groups.setdefault(fact.chunk, []).append(fact.text)
        return sorted(groups.items())

    def neighbors(self, node: int) -> list[int]:
        row = self.adjacency.indptr
        return sorted(int(j) for j in self.adjacency.indices[row[node] : row[node + 1]])

    def adjacent_chunk(self, chunk: int, step: int) -> int | None:
        """The chunk before (-1) or after (+1) in the same document, if any."""
        other = chunk + step
        if 0 <= other < len(self.chunk_texts) and self.chunk_docs[other] == self.chunk_docs[chunk]:
            return other
        return None

    def find(self, name: str, among: Sequence[int] | None = None) -> int | None:
        """The node named ``name`` (by normal form), optionally only among ``among``."""
        node = self._by_normal.get(normalise_key(name))
        if node is None or (among is not None and node not in among):
            return None
        return node


@dataclass
class KeyTable:
    """The distinct normal forms of a build's key elements, with counts and surface forms."""

    normals: list[str]
    counts: list[int]
    surfaces: list[list[str]]  # surface forms per normal form, most frequent first

    def display(self, i: int) -> str:
        return self.surfaces[i][0]


def key_table(chunk_facts: Sequence[Sequence[ExtractedFact]]) -> KeyTable:
    """Every normal form in order of first appearance, its frequency and its surface forms."""
    counts: Counter[str] = Counter()
    surfaces: dict[str, Counter[str]] = {}
    first: dict[str, int] = {}
    for facts in chunk_facts:
        for fact in facts:
            for key in fact.keys:
                normal = normalise_key(key)
                if not normal:
                    continue
                first.setdefault(normal, len(first))
                counts[normal] += 1
                surfaces.setdefault(normal, Counter())[key] += 1
    normals = sorted(first, key=first.__getitem__)
    return KeyTable(
        normals,
        [counts[n] for n in normals],
        [
            [s for s, _ in sorted(surfaces[n].items(), key=lambda kv: (-kv[1], kv[0]))]
            for n in normals
        ],
    )


def build_graph(
    chunk_texts: Sequence[str],
    chunk_docs: Sequence[int],
    chunk_facts: Sequence[Sequence[ExtractedFact]],
    table: KeyTable,
    leader: Sequence[int],
) -> Graph:
    """Nodes from the merged key table (``leader`` from :func:`merge_keys`), facts, links."""
    leaders = sorted({leader[i] for i in range(len(table.normals))})
    node_of_leader = {lead: n for n, lead in enumerate(leaders)}
    node_of_normal = {table.normals[i]: node_of_leader[leader[i]] for i in range(len(leader))}
    forms: list[list[str]] = [[] for _ in leaders]
    weight: list[int] = [0] * len(leaders)
    for i, normal in enumerate(table.normals):
        node = node_of_normal[normal]
        weight[node] += table.counts[i]
        for s in table.surfaces[i]:
            if s not in forms[node]:
                forms[node].append(s)
    keys = [table.display(lead) for lead in leaders]

    facts: list[Fact] = []
    node_facts: list[list[int]] = [[] for _ in leaders]
    for chunk, chunk_list in enumerate(chunk_facts):
        for ef in chunk_list:
            named = sorted({node_of_normal[n] for n in (normalise_key(k) for k in ef.keys) if n})
            if not named:
                continue
            for node in named:
                node_facts[node].append(len(facts))
            facts.append(Fact(ef.text, chunk, tuple(named)))

    # links: node i -- node j when i's key occurs in one of j's facts (listed or in the text)
    rows: list[int] = []
    cols: list[int] = []
    for fact in facts:
        mentioned = set(fact.nodes) | _mentioned_nodes(fact.text, node_of_normal)
        for j in fact.nodes:
            for i in mentioned:
                if i != j:
                    rows += [i, j]
                    cols += [j, i]
    n = len(leaders)
    adj = sp.csr_array(
        (
            np.ones(len(rows), dtype=np.float32),
            (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)),
        ),
        shape=(n, n),
    )
    adj.sum_duplicates()
    adj.data[:] = 1.0
    adj.sort_indices()
    return Graph(list(chunk_texts), list(chunk_docs), facts, keys, node_facts, adj, forms)


def _mentioned_nodes(text: str, node_of_normal: dict[str, int]) -> set[int]:
    """Nodes whose normal form is a run of up to ``MAX_KEY_WORDS`` words of ``text``."""
    words = normalise_key(text).split()
    found: set[int] = set()
    for a in range(len(words)):
        for b in range(a + 1, min(a + MAX_KEY_WORDS, len(words)) + 1):
            node = node_of_normal.get(normalise_key(" ".join(words[a:b])))
            if node is not None:
                found.add(node)
    return found

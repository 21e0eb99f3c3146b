"""GraphReader's unmeasured defaults (issue 56): how often each cap binds, and what the
merge threshold merges, from a real graph built by the default LLM.

    nice .venv/bin/python bench/archive/graphreader_defaults.py record --questions 6 --asks 2 \
        --out /tmp/gr56
    .venv/bin/python bench/archive/graphreader_defaults.py graph /tmp/gr56 [--also OTHER.idx]

``record`` (the LLM, minutes): the supporting paragraphs of the first ``--questions``
HotpotQA dev questions, each followed by the paragraph after it in the corpus (a
distractor), become one text; ``lcr.index`` builds GraphReader over it with the
default model on llama.cpp and every setting at its default, then ``lcr.ask`` asks the
first ``--asks`` of those questions. Every LLM call is written to ``calls.jsonl`` with
its phase, cap (``max_new_tokens``) and the model's own completion-token count, so the
extraction replies and each agent reply's length can be read back; each query's trace
goes to ``asks.jsonl``.

``graph`` (no LLM, seconds) reads that record and the index:

- ``fallback``: chunks whose extraction gave no grounded fact (what ``none``, the
  paper's, would leave unreachable);
- ``merge_threshold``: the build's key table re-made from the recorded replies, merged
  at 0.85 / 0.9 / 0.95 (``merge_keys``, the build's own function), with every merged
  pair listed for reading by hand;
- ``max_neighbors``: the stored graph's degree distribution, and nodes over the cap;
- ``candidates``: nodes in the graph against the cap, and for every question of the
  text the rank, by the build's own embedding score, of the first node named in a
  supporting sentence (the question alone; the agent adds its plan);
- ``agent_max_new_tokens``: each agent reply's tokens against its cap.

``--also`` adds the degree and node-count figures of other GraphReader indexes (for
example a larger build by another model).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr

import lcr
from lcr.methods.graphreader.extraction import sentence_facts
from lcr.methods.graphreader.graph import Graph, build_graph, key_table
from lcr.methods.graphreader.keys import folded_words, merge_keys, occurs_in
from lcr.methods.graphreader.method import (
    GraphReaderBuild,
    GraphReaderQuery,
    chunk_facts,
    chunk_nodes,
)
from lcr.models.container import Models
from lcr.models.spec import ModelSpec

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data
THRESHOLDS = (0.85, 0.9, 0.95)


def hotpot_text(data: Path, questions: int) -> tuple[str, list[dict[str, Any]]]:
    """The gold paragraphs of the first ``questions`` dev questions, each followed by the
    corpus's next paragraph, in order, each once; and those questions."""
    rows = [json.loads(line) for line in (data / "hotpotqa" / "dev.jsonl").open()]
    corpus = str(rows[0]["documents"][0]["text"])
    paragraphs = corpus.split("\n\n")
    keep: list[int] = []
    for row in rows[:questions]:
        for ev in row["evidence"]:
            for i, p in enumerate(paragraphs):
                if ev["text"] in p:
                    for j in (i, i + 1):
                        if j < len(paragraphs) and j not in keep:
                            keep.append(j)
                    break
    return "\n\n".join(paragraphs[i] for i in keep) + "\n", rows[:questions]


def recording(llm: Any, out: Path) -> list[str]:
    """Writes every call of ``llm`` to ``out`` (phase set through the returned list)."""
    phase = ["build"]
    fh = out.open("a", encoding="utf-8")

    def write(cap: int, gen: Any) -> None:
        row = {
            "phase": phase[0],
            "max_new_tokens": cap,
            "prompt_tokens": gen.prompt_tokens,
            "completion_tokens": gen.completion_tokens,
            "text": gen.text,
        }
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()

    one, many = llm.generate, llm.generate_batch

    def generate(messages: Any, **kw: Any) -> Any:
        gen = one(messages, **kw)
        write(int(kw.get("max_new_tokens", 256)), gen)
        return gen

    def generate_batch(conversations: Any, **kw: Any) -> Any:
        gens = many(conversations, **kw)
        for gen in gens:
            write(int(kw.get("max_new_tokens", 256)), gen)
        return gens

    llm.generate, llm.generate_batch = generate, generate_batch
    return phase


def record(args: argparse.Namespace) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    text, rows = hotpot_text(args.data, args.questions)
    (out / "text.txt").write_text(text, encoding="utf-8")
    (out / "questions.json").write_text(json.dumps(rows[: args.questions]), encoding="utf-8")
    models = Models(spec=ModelSpec(backend="llamacpp", device="cpu"))
    phase = recording(models.llm, out / "calls.jsonl")
    started = time.perf_counter()
    idx = lcr.index(out / "text.txt", out / "text.idx", methods=["graphreader"], models=models)
    print(f"build: {time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}")
    for row in rows[: args.asks]:
        phase[0] = "ask"
        started = time.perf_counter()
        result = lcr.ask(idx, row["question"], method="graphreader", models=models)
        took = time.perf_counter() - started
        assert not isinstance(result, list)
        info = result.info if hasattr(result, "info") else {}
        with (out / "asks.jsonl").open("a", encoding="utf-8") as fh:
            got = {"id": row["id"], "question": row["question"], "answer": result.answer}
            got.update(seconds=round(took, 1), load=round(os.getloadavg()[0], 1), info=info)
            fh.write(json.dumps(got, ensure_ascii=False, default=str) + "\n")
        print(f"ask {row['id']}: {took:.0f} s, load {os.getloadavg()[0]:.1f}: {result.answer!r}")


def quartiles(values: list[int] | np.ndarray) -> str:
    if len(values) == 0:
        return "-"
    q = np.percentile(values, [0, 25, 50, 75, 100])
    return " / ".join(f"{v:.0f}" for v in q)


def stored_graph(path: Path) -> Any:
    """The stored graph of a GraphReader index and its key embeddings."""
    from lcr.methods.graphreader.method import _stored_graph

    reader = lcr.open_index(path).reader("graphreader")
    graph, emb, _ = _stored_graph(reader)
    return graph, emb


def report_degree_array(name: str, graph: Graph) -> None:
    cap = GraphReaderQuery().max_neighbors
    n, deg = graph.n_nodes, np.diff(graph.adjacency.indptr)
    over = int((deg > cap).sum())
    print(f"{name}: {n} nodes; neighbours min/q1/median/q3/max {quartiles(deg)}, mean "
          f"{deg.mean():.1f}; over {cap}: {over} ({over / max(n, 1):.1%})")  # fmt: skip


def report_degrees(name: str, path: Path) -> None:
    graph, _ = stored_graph(path)
    report_degree_array(name, graph)


def merges(table: Any, emb: np.ndarray, show: int) -> None:
    """Keys merged at each threshold; then, to read by hand, up to ``show`` pairs drawn
    (seed 0) from each band: merged at a threshold but below the next one up."""
    shown = [table.display(i) for i in range(len(table.normals))]
    numeric = [not any(ch.isalpha() for ch in k) for k in shown]
    print(f"\nkey forms {len(shown)} (distinct normal forms), {sum(numeric)} of them numbers")
    rng = np.random.default_rng(0)
    for n, t in enumerate(THRESHOLDS):
        merge = merge_keys(emb, table.counts, t)
        pairs = [(i, lead) for i, lead in enumerate(merge.leader) if lead != i]
        nums = sum(numeric[i] for i, _ in pairs)
        print(f"merge_threshold {t}: {merge.merged} merged into another key ({nums} numbers)")
        top = THRESHOLDS[n + 1] if n + 1 < len(THRESHOLDS) else 1.01
        band = [(i, lead) for i, lead in pairs if float(emb[i] @ emb[lead]) < top]
        picked = sorted(rng.permutation(len(band))[:show]) if band else []
        print(f"  {len(band)} of them below {top}; {len(picked)} drawn:")
        for j in picked:
            i, lead = band[j]
            print(f"    {shown[i]!r} -> {shown[lead]!r} ({float(emb[i] @ emb[lead]):.3f})")


def key_embeddings(table: Any, embedder: Any) -> np.ndarray:
    """Each key form embedded as the build embeds it (its most frequent surface form)."""
    shown = [table.display(i) for i in range(len(table.normals))]
    return np.asarray(embedder.encode(shown), dtype=np.float32)


def gold_nodes(graph: Graph, row: dict[str, Any]) -> list[list[int]]:
    """Per supporting sentence, the nodes whose key it names (whole words)."""
    out = []
    for ev in row["evidence"]:
        folded = folded_words(ev["text"])
        out.append([i for i, k in enumerate(graph.keys) if occurs_in(k, folded)])
    return out


def candidate_ranks(
    graph: Graph, emb: np.ndarray, rows: list[dict[str, Any]], embedder: Any
) -> None:
    """The rank, by the build's embedding score for the question alone, of the best node
    named in a supporting sentence; then :func:`neighbour_caps`."""
    q = GraphReaderQuery()
    print(f"\ncandidates: {graph.n_nodes} nodes against the cap of {q.candidates}")
    best: list[int] = []
    vecs = np.asarray(embedder.encode([r["question"] for r in rows]), dtype=np.float32)
    for row, vec in zip(rows, vecs, strict=True):
        per_sentence = gold_nodes(graph, row)
        named = sorted({i for nodes in per_sentence for i in nodes})
        if not named:
            continue
        rank = np.empty(graph.n_nodes, dtype=np.int64)
        rank[np.argsort(-(emb @ vec), kind="stable")] = np.arange(1, graph.n_nodes + 1)
        best.append(int(min(rank[named])))
    neighbour_caps(graph, rows, q.max_neighbors)
    b = np.array(best)
    print(f"questions with a named node: {len(b)} of {len(rows)}; best rank min/q1/median/q3/max "
          f"{quartiles(b)}")  # fmt: skip
    for k in (10, 20, 50, 100, 200):
        print(f"  best within {k}: {int((b <= k).sum())} ({(b <= k).mean():.0%})")


def neighbour_caps(graph: Graph, rows: list[dict[str, Any]], cap: int) -> None:
    """For each supporting-sentence node, its links to another supporting sentence's
    nodes: how many a step lists at each cap (neighbours are listed in node order), and
    the tokens a step's list of neighbour keys costs at each cap."""
    from lcr.text.tokens import count_tokens

    key_tokens = np.array([count_tokens(k) for k in graph.keys])
    links: list[int] = []  # position of the other node in the first node's neighbour list
    for row in rows:
        per_sentence = gold_nodes(graph, row)
        for s_a, nodes_a in enumerate(per_sentence):
            for a in nodes_a:
                listed = graph.neighbors(a)
                where = {b: i for i, b in enumerate(listed)}
                for s_b, nodes_b in enumerate(per_sentence):
                    if s_b != s_a:
                        links += [where[b] for b in set(nodes_b) - {a} if b in where]
    pos = np.array(links)
    deg = np.diff(graph.adjacency.indptr)
    print(f"\nmax_neighbors: {len(pos)} links from a supporting sentence's node to another's")
    for c in (25, cap, 100, 200, int(deg.max())):
        listed = np.minimum(deg, c)
        cost = [int(key_tokens[graph.neighbors(i)[:c]].sum()) for i in range(len(deg))]
        print(f"  cap {c}: listed {int((pos < c).sum())} ({(pos < c).mean():.0%}); a step's "
              f"list mean {listed.mean():.1f} keys, at most {int(listed.max())}; key tokens "
              f"mean {np.mean(cost):.0f}, most {max(cost)}")  # fmt: skip


def fallback(args: argparse.Namespace) -> None:
    """The graph a build makes when every chunk falls back to its sentences (no LLM)."""
    rows = [json.loads(line) for line in (args.data / "hotpotqa" / "dev.jsonl").open()]
    corpus = rows[0]["documents"][0]["id"] if args.corpus is None else args.corpus
    mine = [r for r in rows if r["documents"][0]["id"] == corpus]
    text = next(
        str(d["text"]) for r in rows for d in r["documents"] if d.get("text") and d["id"] == corpus
    )
    settings = GraphReaderBuild()
    chunks = chunk_nodes([(0, 0, text)], settings.chunk_tokens)
    facts = [sentence_facts(c.text) for c in chunks]
    table = key_table(facts)
    embedder = Models(spec=ModelSpec(device="cpu")).embedder
    emb = key_embeddings(table, embedder)
    merges(table, emb, args.show)
    merge = merge_keys(emb, table.counts, settings.merge_threshold)
    graph = build_graph([c.text for c in chunks], [0] * len(chunks), facts, table, merge.leader)
    node_emb = emb[sorted(set(merge.leader))]
    report_degree_array(f"{corpus} ({len(chunks)} chunks, every one by its sentences)", graph)
    candidate_ranks(graph, node_emb, mine, embedder)


def graph(args: argparse.Namespace) -> None:
    folder: Path = args.record
    calls = [json.loads(line) for line in (folder / "calls.jsonl").open()]
    build = [c for c in calls if c["phase"] == "build"]
    agent_cap = GraphReaderQuery().agent_max_new_tokens
    agent = [c for c in calls if c["phase"] == "ask" and c["max_new_tokens"] == agent_cap]
    other = [c for c in calls if c["phase"] == "ask" and c["max_new_tokens"] != agent_cap]
    ext_cap = GraphReaderBuild().extraction_max_new_tokens
    lengths = [c["completion_tokens"] for c in build]
    print(f"extraction replies: {len(build)}, tokens {lengths}, at the cap ({ext_cap}): "
          f"{sum(n >= ext_cap for n in lengths)}")  # fmt: skip
    a = [c["completion_tokens"] for c in agent]
    print(f"agent replies: {len(a)}; tokens min/q1/median/q3/max {quartiles(a)}, mean "
          f"{np.mean(a) if a else 0:.0f}; at the cap ({agent_cap}): "
          f"{sum(n >= agent_cap for n in a)}; over half of it: "
          f"{sum(n > agent_cap // 2 for n in a)}")  # fmt: skip
    print(f"other ask calls (the answer): {[c['completion_tokens'] for c in other]}")
    index = folder / "text.idx"
    text = lcr.open_index(index).source
    chunks = chunk_nodes([(0, 0, text)], GraphReaderBuild().chunk_tokens)
    if len(chunks) != len(build):
        raise SystemExit(f"{len(chunks)} chunks but {len(build)} extraction calls recorded")
    embedder = Models(spec=ModelSpec(device="cpu")).embedder
    facts = chunk_facts(chunks, [c["text"] for c in build], GraphReaderBuild().fallback)
    print(f"chunks with no grounded fact (fallen back to sentences): {facts.fallback_chunks} "
          f"of {len(chunks)}; facts {sum(map(len, facts.facts))}")  # fmt: skip
    table = key_table(facts.facts)
    merges(table, key_embeddings(table, embedder), args.show)
    print()
    report_degrees(f"{index} (default model)", index)
    for other_index in args.also:
        report_degrees(str(other_index), other_index)
    rows = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    graph_, emb = stored_graph(index)
    candidate_ranks(graph_, emb, rows, embedder)
    for line in (folder / "asks.jsonl").open() if (folder / "asks.jsonl").exists() else []:
        got = json.loads(line)
        print(f"ask {got['id']}: {got['seconds']} s at load {got['load']}: {got['answer']!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="build and ask with the default LLM, every call recorded")
    rec.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    rec.add_argument("--questions", type=int, default=6)
    rec.add_argument("--asks", type=int, default=2)
    rec.add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("graph", help="the figures, from a record (no LLM)")
    rep.add_argument("record", type=Path)
    rep.add_argument("--also", type=Path, nargs="*", default=[])
    rep.add_argument("--show", type=int, default=40, help="merged pairs listed per threshold")
    fb = sub.add_parser("fallback", help="a HotpotQA dev corpus's graph by sentences (no LLM)")
    fb.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    fb.add_argument("--corpus", default=None, help="corpus0 (the first) unless given")
    fb.add_argument("--show", type=int, default=40, help="merged pairs listed per threshold")
    args = ap.parse_args()
    {"record": record, "graph": graph, "fallback": fallback}[args.command](args)


if __name__ == "__main__":
    main()

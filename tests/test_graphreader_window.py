"""GraphReader's paper settings: the 4k-token window every agent call is budgeted to,
and sampling at temperature 0.2 with a seed per call (section 4.1). The control flow
with a scripted model; the backends' seeds and one end-to-end query with smollm2-135m."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lcr.methods.graphreader.agent import PROMPT_MARGIN_TOKENS, Agent
from lcr.methods.graphreader.extraction import ExtractedFact
from lcr.methods.graphreader.graph import Graph, build_graph, key_table
from lcr.methods.graphreader.method import GraphReaderQuery
from lcr.models.base import Generation, Message
from tests.conftest import FIXTURES
from tests.test_graphreader import StageLLM

REPLY = 128  # agent_max_new_tokens in these tests


class WideLLM(StageLLM):
    """A scripted model with a 32k window, recording each call's sampling arguments."""

    def __init__(self, replies: Any) -> None:
        super().__init__(replies)
        self.sampling: list[tuple[float, int | None]] = []

    @property
    def context_window(self) -> int:
        return 32768

    def generate(self, messages: Sequence[Message], **kw: Any) -> Generation:
        self.sampling.append((kw["temperature"], kw["seed"]))
        return super().generate(messages, **kw)


def _long_graph(chunk_words: int = 3000) -> Graph:
    """Ella's node: 300 facts over 300 chunks, chunk 0 a 3,000-word text, and 200
    neighbours, each of them far more than a 1k window holds."""
    words = " ".join(f"w{i}" for i in range(chunk_words))
    facts = [[ExtractedFact("Ella walked into the long hall.", ("Ella",))]]
    facts += [
        [
            ExtractedFact(
                f"Ella met p{i:03d} of the town gate.", ("Ella", f"p{i:03d} of the town gate")
            )
        ]
        for i in range(1, 300)
    ]
    table = key_table(facts)
    texts = [f"START {words} END"] + [f"chunk {i}" for i in range(1, 300)]
    return build_graph(texts, [0] * 300, facts, table, list(range(len(table.normals))))


def _run(llm: WideLLM, chunk_words: int = 3000, shown: int = 50, **settings: Any) -> Any:
    """The agent over a long graph; ``shown`` candidates and neighbours offered a step
    (lcr's constants are 50), so a long list meets the window."""
    from lcr.methods.graphreader import agent as module

    graph = _long_graph(chunk_words)
    agent = Agent(
        llm,
        graph,
        GraphReaderQuery(initial_nodes=1, agent_max_new_tokens=REPLY, **settings),
        lambda text: list(range(graph.n_nodes)),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "CANDIDATES", shown)
        patch.setattr(module, "MAX_NEIGHBORS", shown)
        return agent.run("Whom did Ella meet?")


def _script() -> WideLLM:
    return WideLLM(
        {
            "plan": ["Find Ella, then whom she met."],
            "selection": ["Node: Ella, Score: 100"],
            "atomic_facts": ["*Updated Notebook*: Ella.\n*Chosen Action*: read_chunk(c0)"],
            "chunk": ["*Updated Notebook*: a hall.\n*Chosen Action*: search_more()"],
            "neighbors": ["Chosen Action: termination()"],
        }
    )


def test_the_papers_window_and_temperature_are_the_marked_defaults() -> None:
    """The defaults, marked the paper's, and what they do: with the query's default
    settings every call fits 4k tokens on a 32k model (a 6,000-word chunk is cut to fill
    it) and every call samples at 0.2 with its own seed."""
    declared = GraphReaderQuery.by_name()
    assert declared["window"].paper and declared["temperature"].paper
    query = GraphReaderQuery()
    llm = _script()
    result = _run(
        llm,
        chunk_words=6000,
        window=query.window,
        temperature=query.temperature,
        seed=query.seed,
        shown=300,
    )
    budget = 4096 - REPLY - PROMPT_MARGIN_TOKENS
    sizes = [sum(llm.count_tokens(m["content"]) for m in prompt) for prompt in llm.prompts]
    assert max(sizes) <= budget
    chunk = sizes[llm.stages.index("chunk")]
    assert budget - 80 < chunk  # the chunk filled the 4k window, not the model's 32k
    assert result.counters["over_window"] == 0
    assert [t for t, _ in llm.sampling] == [0.2] * len(llm.sampling)
    seeds = [sd for _, sd in llm.sampling]
    assert len(set(seeds)) == len(seeds)  # a seed per call


def test_every_agent_call_fits_the_window_and_the_chunk_keeps_its_start() -> None:
    llm = _script()
    result = _run(llm, window=1024, shown=300)
    budget = 1024 - REPLY - PROMPT_MARGIN_TOKENS
    sizes = {
        stage: sum(llm.count_tokens(m["content"]) for m in prompt)
        for stage, prompt in zip(llm.stages, llm.prompts, strict=True)
    }
    assert set(sizes) == {"plan", "selection", "atomic_facts", "chunk", "neighbors"}
    assert max(sizes.values()) <= budget
    assert budget - 80 < sizes["chunk"]  # filled to the window, not cut far short
    chunk_prompt = llm.prompts[llm.stages.index("chunk")][-1]["content"]
    assert "START w0 w1" in chunk_prompt and "END" not in chunk_prompt
    step = next(s for s in result.trace if s.get("stage") == "chunk")
    assert step["chunk_chars_cut"] > 0
    assert step["chunk"] == "c0" and result.chunks_read == [0]
    facts = next(s for s in result.trace if s.get("stage") == "atomic_facts")
    assert facts["facts_cut"] > 0
    selection = llm.prompts[llm.stages.index("selection")][-1]["content"]
    assert "Ella" in selection and "p299" not in selection  # the candidates' list is cut
    neighbours = llm.prompts[llm.stages.index("neighbors")][-1]["content"]
    assert "p001 of" in neighbours and "p299 of" not in neighbours
    # four inputs cut: candidates, facts, the chunk, the neighbours
    assert result.counters["window_cuts"] == 4 and result.counters["over_window"] == 0


def test_window_0_is_the_models_whole_window() -> None:
    llm = _script()
    result = _run(llm, window=0, shown=300)
    chunk_prompt = llm.prompts[llm.stages.index("chunk")][-1]["content"]
    assert "START w0" in chunk_prompt and "w2999 END" in chunk_prompt
    assert result.counters["window_cuts"] == 0
    step = next(s for s in result.trace if s.get("stage") == "chunk")
    assert "chunk_chars_cut" not in step


def test_what_cannot_be_cut_goes_over_the_window_and_is_counted() -> None:
    llm = _script()
    result = _run(llm, window=REPLY + PROMPT_MARGIN_TOKENS + 50)  # below the instructions
    assert result.counters["over_window"] == result.counters["llm_calls"] > 0
    assert result.chunks_read == [0]  # one word of the chunk at least: the path goes on


def test_each_call_samples_at_the_temperature_with_its_own_seed() -> None:
    llm = _script()
    result = _run(llm)
    calls = result.counters["llm_calls"]
    assert calls >= 5 and llm.sampling == [(0.2, n) for n in range(calls)]
    seeded = _script()
    _run(seeded, seed=7, temperature=0.0)
    assert seeded.sampling == [(0.0, 7 + n) for n in range(calls)]


# ------------------------------------------------------------------ real models
def _sample(llm: Any, seed: int | None) -> str:
    ask = [{"role": "user", "content": "Write one sentence about a cat."}]
    return str(llm.generate(ask, max_new_tokens=12, temperature=1.0, seed=seed).text)


def test_transformers_samples_the_same_reply_for_the_same_seed(smollm: Any) -> None:
    assert _sample(smollm, 11) == _sample(smollm, 11)
    assert len({_sample(smollm, s) for s in range(4)}) > 1  # sampled, not greedy


def test_llamacpp_samples_the_same_reply_for_the_same_seed(lcpp: Any) -> None:
    assert _sample(lcpp, 11) == _sample(lcpp, 11)
    assert len({_sample(lcpp, s) for s in range(4)}) > 1


@pytest.fixture(scope="module")
def lcpp() -> Any:
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_llm(ModelSpec(llm="smollm2-135m", device="cpu", backend="llamacpp"), NULL_PROGRESS)


@pytest.mark.slow
def test_a_4k_window_query_end_to_end_with_smollm(tmp_path: Path) -> None:
    """Build and ask with smollm2-135m through the CLI at window 1024, temperature 0.2:
    every agent call's prompt fits (the agent counts with the model's own tokenizer),
    and the same seed gives the same answer and trace twice."""
    from lcr.cli.main import main

    text = (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[:2400]
    source = tmp_path / "short.txt"
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "s.idx"
    common = ["--llm", "smollm2-135m", "-q", "--backend", "llamacpp"]
    build = ["--set", "graphreader.chunk_tokens=600",
             "--set", "graphreader.extraction_max_new_tokens=48"]  # fmt: skip
    with pytest.raises(SystemExit) as ex:
        main(["index", str(source), "-o", str(out), "-m", "graphreader", *build, *common])
    assert ex.value.code == 0
    query = [
        "--set", "graphreader.window=1024", "--set", "graphreader.initial_nodes=1",
        "--set", "graphreader.max_calls=3", "--set", "graphreader.agent_max_new_tokens=32",
    ]  # fmt: skip

    def ask() -> dict[str, Any]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as ex:
            main(["ask", str(out), "Who was Cinderella's stepmother?", "-m", "graphreader",
                  "--json", "--max-new-tokens", "16", *query, *common])  # fmt: skip
        assert ex.value.code == 0
        result: dict[str, Any] = json.loads(buf.getvalue().strip().splitlines()[-1])
        return result

    first, second = ask(), ask()
    info = first["info"]
    assert info["counts"]["llm_calls"] >= 3 and info["counts"].get("over_window", 0) == 0
    # a 600-token chunk and the instructions do not fit 1024 - 32 - 64: any read is cut
    chunk_steps = [s for s in info["trace"] if s.get("stage") == "chunk"]
    assert all(s.get("chunk_chars_cut", 0) > 0 for s in chunk_steps)
    assert second["answer"] == first["answer"] and second["info"]["trace"] == info["trace"]

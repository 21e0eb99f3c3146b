"""PECAN: pure rules, the attention machinery on smollm2-135m, the built graph, the search.

Real-model tests run on the opening of Cinderella (a real story, cut to keep
them fast) with small chunk and batch settings; the CLI test kills a real
build process and resumes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lcr import api, pipeline
from lcr.errors import CapabilityError, ModelError, SettingError
from lcr.methods import get_method
from lcr.methods.pecan.build import effective_s
from lcr.methods.pecan.graph import (
    attention_scores,
    batch_nodes,
    best_candidate,
    edge_matrix,
    information_points,
    point_weights,
    tokens_in,
)
from lcr.methods.pecan.prompts import (
    BUILD_HEAD,
    BUILD_TAIL,
    SEARCH_HEAD,
    SEARCH_MID,
    SECOND_TURN,
    SECOND_TURNS,
    search_prompt,
)
from lcr.methods.pecan.prompts import segment_line as line
from lcr.methods.pecan.search import SCORES, SecondTurn, initial_nodes
from lcr.methods.pecan.settings import PecanBuild, PecanQuery
from lcr.models.base import Capability, Message
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.models.transformers_attend import span_mean_matrix
from lcr.models.transformers_llm import NodeKVCache
from lcr.pipeline.integrity import retired_reading
from lcr.pipeline.plans import parse_sets
from lcr.store import Document, Index
from tests.conftest import FIXTURES, REPO
from tests.eager import forward_with_attention
from tests.fakes import ScriptedLLM

EXCERPT_CHARS = 1500
BUILD_SETS = ["pecan.chunk_tokens=100", "pecan.s=256", "pecan.points_max_new_tokens=24"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _excerpt() -> str:
    return (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[:EXCERPT_CHARS]


def _index(path: Path, text: str) -> Index:
    raw = text.encode("utf-8")
    return Index.create(path, [Document("c.txt", text, hashlib.sha256(raw).hexdigest(), len(raw))])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, smollm: Any, embedder: Any) -> Index:
    index = _index(tmp_path_factory.mktemp("pecan") / "c.idx", _excerpt())
    api.plan_and_build(
        index, ["pecan"], Models.with_objects(llm=smollm, embedder=embedder), BUILD_SETS
    )
    return index


# ------------------------------------------------------------------ pure rules
# Tables A1 and A2 as /work/shared/papers/pecan.txt extracts them, the examples' text
# replaced by their slots (the extraction runs the three "* summary point" lines together)
TABLE_A1 = (
    "Summary the following information. Each segment is separated by a new line symbol. "
    "{segments} Split your summary into different summary points according to the semantic "
    "information in these information points. It is not necessary to generate each summary "
    "point for each information point. Gather and organize information into summary points. "
    "In each summary point, try to avoid using pronouns like he/she/they and instead use full "
    "names. Generate in the format of: * summary point* summary point* summary point..... Do "
    "not provide any explanation and start the summary directly."
)
TABLE_A2_FIRST = (
    'Can this question be answered by the following information? Response "Yes" or "No" in '
    "one word. Do not provide any explanation. Question: {question} Information: {nodes}"
)
TABLE_A2_SECOND = (
    "Given the above information and question, answer the question as concisely as you can."
)


def _bare(text: str) -> str:
    """No whitespace at all: the PDF extraction loses the line breaks between bullets."""
    return "".join(text.split())


def test_prompts_are_the_papers() -> None:
    """Every piece of Tables A1 and A2, compared whole (not only their openings)."""
    ours = BUILD_HEAD + "{segments}" + BUILD_TAIL
    assert _bare(ours) == _bare(TABLE_A1)
    first = SEARCH_HEAD + "{question}" + SEARCH_MID + "{nodes}"
    assert _bare(first) == _bare(TABLE_A2_FIRST)
    assert SECOND_TURN == TABLE_A2_SECOND
    # the line breaks the extraction lost are the format Table A1 shows, one point a line
    assert "* summary point\n* summary point\n* summary point\n.....\n" in BUILD_TAIL
    assert SEARCH_HEAD.endswith("\n\nQuestion:\n") and SEARCH_MID == "\n\nInformation:\n"


def test_second_turn_is_the_papers_or_restates_the_question(smollm: Any) -> None:
    question = "Who lost a glass slipper?"
    paper = search_prompt(smollm, question, "paper")
    restated = search_prompt(smollm, question, "question")
    assert paper.prefix == restated.prefix and paper.check == restated.check
    for word in ("Yes", "No"):
        said = smollm.tokenizer.decode(paper.answers[word])
        assert SECOND_TURN in said and question not in said and word in said
        said = smollm.tokenizer.decode(restated.answers[word])
        assert SECOND_TURN + "\n\nQuestion:\n" + question in said
    with pytest.raises(SettingError, match="second_turn"):
        pipeline.query_settings(get_method("pecan"), parse_sets(["pecan.second_turn=both"]))
    with pytest.raises(SettingError, match=r"pecan\.top"):
        pipeline.build_settings(get_method("pecan"), parse_sets(["pecan.top=both"]))


class _WideTokens:
    """A tokenizer alone (words as tokens) with a 32k window: what a build's batch size reads."""

    model_id = "words-32k"
    context_window = 32_768

    def encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    def render_text(self, messages: Sequence[Message]) -> str:
        return "\n\n".join(m["content"] for m in messages)


def test_the_papers_s_batches_a_build_on_a_wide_model() -> None:
    """The default s is the batch a build uses when the model's window allows it: 300-token
    chunks go 27 to a batch (8,100 tokens), never past 8,192; a 4k window lowers it."""
    s = effective_s(_WideTokens(), PecanBuild())
    assert s == PecanBuild().s == 8192
    batches = batch_nodes([300] * 60, s)
    assert [len(b) for b in batches] == [27, 27, 6]
    narrow = type("Narrow", (_WideTokens,), {"context_window": 4096})()
    assert effective_s(narrow, PecanBuild()) < 4096 - PecanBuild().points_max_new_tokens


def test_settings_are_typed() -> None:
    by_name = PecanQuery.by_name()
    assert by_name["score"].choices == SCORES
    assert by_name["second_turn"].choices == SECOND_TURNS
    build = PecanBuild.by_name()
    assert "the paper's s" in build["s"].help and "the paper's p" in by_name["patience"].help
    # the paper states no stopping rule: `summary` is lcr's reading of Table A4, which builds
    # (LLM cost) over texts that fit one batch (Table A3), which `fit` would leave unsummarised
    assert build["top"].origin == "lcr" and "Table A4" in build["top"].help
    assert build["top"].default == "summary" and not build["top"].measured_in
    for cls in (PecanBuild, PecanQuery):
        assert all(len(s.help) <= 100 for s in cls.declared())
    # a record from before embed_long was embedded by truncation: not read as today's
    assert retired_reading(get_method("pecan"), {"max_new_tokens": 24}) == (
        "pecan.embed_long=truncated",
        "",
    )


def test_batches_stay_within_s_and_keep_order() -> None:
    assert batch_nodes([100, 100, 100, 50], 250) == [[0, 1], [2, 3]]
    assert batch_nodes([300, 10], 250) == [[0], [1]]  # a node over s is a batch alone
    assert batch_nodes([], 10) == []


def test_information_points() -> None:
    text = "Here they are:\n* Cinderella goes to the ball.\n  She dances.\n- The prince looks.\n"
    pts = information_points(text)
    assert [p.text for p in pts] == [
        "Cinderella goes to the ball. She dances.",
        "The prince looks.",
    ]
    assert text[pts[1].start : pts[1].end] == "The prince looks."
    assert [p.text for p in information_points("one line\n\nother line")] == [
        "one line",
        "other line",
    ]
    assert [p.text for p in information_points("* a\n* a\n")] == ["a"]


def test_point_weights_are_normalised_means() -> None:
    att = np.array([[0.2, 0.6], [0.4, 0.2], [9.0, 9.0]])
    w = point_weights(att, [0, 1])
    assert np.allclose(w, [0.3 / 0.7, 0.4 / 0.7]) and abs(w.sum() - 1) < 1e-12
    assert np.allclose(point_weights(att, []), [0.5, 0.5])
    assert tokens_in([2, 5, 9], 3, 6) == [1, 2]


def test_z_is_e_transpose_r_and_best_skips_visited() -> None:
    # node 2 (level 1) points at 0 and 1; node 3 (level 1) at 1 only
    e = edge_matrix([(2, 0, 0.25), (2, 1, 0.75), (3, 1, 1.0)], 4)
    r = np.array([0.0, 0.0, 2.0, 1.0])
    z = attention_scores(e, r)
    assert np.allclose(z, [0.5, 2.5, 0.0, 0.0])
    assert best_candidate(z, {2, 3}) == 1
    assert best_candidate(z, {0, 1, 2, 3}) is None
    assert best_candidate(np.zeros(3), set()) == 0  # ties go to the earlier node


def test_initial_nodes_follow_the_settings_and_k() -> None:
    """The search starts from the top level: all of it under progress control, else the
    fixed node count spread over the levels (Table 2's rule), -k capping either; the
    most similar nodes are kept, in document order."""
    levels = np.array([0, 0, 0, 1, 1, 1, 1])  # two levels, nodes 3-6 on top
    cos = np.array([0.9, 0.8, 0.7, 0.1, 0.5, 0.3, 0.4])
    settings = PecanQuery()
    assert initial_nodes(levels, cos, settings, None) == [3, 4, 5, 6]
    assert initial_nodes(levels, cos, settings, 2) == [4, 6]
    fixed = settings.replace(progress_control=False)
    assert initial_nodes(levels, cos, fixed, 4) == [4, 6]  # -k 4: 4 nodes over 2 levels
    assert initial_nodes(levels, cos, fixed, 1) == [4]
    assert initial_nodes(levels, cos, fixed, None) == [3, 4, 5, 6]  # FIXED_NODES, 10


# --------------------------------------------------------- attention machinery
def test_accumulated_attention_equals_eager_capture(smollm: Any) -> None:
    prompt = smollm.render([{"role": "user", "content": "List two facts about the sea.\n"}])
    spans = [(2, 7), (7, len(prompt) - 3)]
    gen = smollm.generate_with_attention(prompt, max_new_tokens=12)
    by_span = smollm.generate_with_attention(prompt, spans=spans, max_new_tokens=12)
    assert gen.tokens and gen.tokens == by_span.tokens
    plain = smollm.generate(
        [{"role": "user", "content": "List two facts about the sea.\n"}], max_new_tokens=12
    )
    assert gen.text.strip() == plain.text.strip()  # the same greedy reply as plain generation
    _, attn, _ = forward_with_attention(smollm, prompt + gen.tokens, logits_to_keep=1)
    eager = torch.stack([a[0] for a in attn]).mean(dim=(0, 1))[len(prompt) :, : len(prompt)]
    assert gen.attention.shape == eager.shape
    assert float((gen.attention - eager).abs().max()) < 1e-5
    expected = eager @ span_mean_matrix(spans, len(prompt))
    assert float((by_span.attention - expected).abs().max()) < 1e-5


def test_append_and_roll_back_equal_from_scratch(smollm: Any) -> None:
    prompt = search_prompt(smollm, "Who lost a slipper?")
    nodes = [smollm.encode(line(t)) for t in ("Cinderella lost a slipper.", "The prince found it.")]
    cache = NodeKVCache(smollm, prompt.prefix, prompt.question)
    cache.append(nodes[0])
    first = cache.suffix_logits(prompt.check)
    cache.append(nodes[1])  # continues from the nodes alone: the suffix was rolled back
    second = cache.suffix_logits(prompt.check)
    for n_nodes, got in ((1, first), (2, second)):
        ids = prompt.prefix + [t for nd in nodes[:n_nodes] for t in nd] + prompt.check
        with torch.no_grad():
            full = smollm.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        want = full[-len(prompt.check) :]
        assert float((got - want).abs().max()) < 1e-3
        assert int(got[-1].argmax()) == int(want[-1].argmax())
    assert len(cache) == len(prompt.prefix) + len(nodes[0]) + len(nodes[1])


# ------------------------------------------------------------------ the graph
def test_graph_weights_sum_to_one_inside_their_batch(built: Index) -> None:
    reader = built.reader("pecan")
    nodes = reader.nodes()
    edges = reader.csr("edges")
    index = {n.id: i for i, n in enumerate(nodes)}
    stats = reader.stats
    assert stats["levels"][0] > stats["levels"][-1] and len(stats["levels"]) >= 2
    top = max(n.level for n in nodes)
    assert len({tuple(n.children) for n in nodes if n.level == top}) == 1  # one batch's points
    assert stats["llm_batches"] >= 2 and stats["llm_completion_tokens"] > 0
    for i, n in enumerate(nodes):
        row = edges[[i], :]
        if n.level == 0:
            assert row.nnz == 0
            continue
        cols = set(int(c) for c in row.indices)
        batch = [index[c] for c in n.children]
        assert cols == set(batch)  # only into its own batch
        assert batch == list(range(batch[0], batch[-1] + 1))  # consecutive nodes, in order
        assert all(nodes[j].level == n.level - 1 for j in batch)
        assert abs(float(row.sum()) - 1.0) < 1e-9 and float(row.data.min()) > 0
    # each level's batches respect s
    s = int(stats["s_effective"])
    seen: set[tuple[str, ...]] = {tuple(n.children) for n in nodes if n.level > 0}
    for batch_ids in seen:
        total = sum(int(nodes[index[c]].meta["tokens"]) for c in batch_ids)
        assert total <= s or len(batch_ids) == 1
    assert len(reader.array("embeddings")) == len(nodes)


def test_top_level_is_a_summary_even_when_the_text_fits_one_batch(
    tmp_path: Path, smollm: Any, embedder: Any
) -> None:
    """A document under s still gets one summary level by default (pecan.top=summary);
    pecan.top=fit keeps the chunks as the top, as a literal reading would."""
    text = _excerpt()[:600]
    models = Models.with_objects(llm=smollm, embedder=embedder)
    sets = ["pecan.chunk_tokens=60", "pecan.s=4096", "pecan.points_max_new_tokens=24"]
    default = _index(tmp_path / "summary.idx", text)
    api.plan_and_build(default, ["pecan"], models, sets)
    stats = default.reader("pecan").stats
    assert len(stats["levels"]) == 2 and stats["levels"][0] >= 2
    assert stats["llm_batches"] == 1 and "single batch" in stats["stop"]
    fit = _index(tmp_path / "fit.idx", text)
    api.plan_and_build(fit, ["pecan"], models, [*sets, "pecan.top=fit"])
    stats = fit.reader("pecan").stats
    assert stats["levels"] == [default.reader("pecan").stats["levels"][0]]
    assert stats["llm_batches"] == 0 and "fits one batch" in stats["stop"]


def test_a_node_past_the_embedders_window_is_embedded_whole(
    tmp_path: Path, smollm: Any, embedder: Any
) -> None:
    """A 600-token chunk of code-like lines is far over the embedder's 254 word pieces:
    its row is pooled over pieces (its tail counts), not the embedder's cut (the builds
    before embed_long, fixed at pooled in 0.2.0). pecan.top=fit: the chunks alone, no call."""
    from lcr.methods.toolkit import embed_pooled

    lines = [f"key_{i:03d}_{'x' * (i % 7)} = value_{i * 37 % 1000:03d}_{i}" for i in range(90)]
    text = "\n".join(lines) + "\n"
    models = Models.with_objects(llm=smollm, embedder=embedder)
    sets = ["pecan.chunk_tokens=600", "pecan.s=4096", "pecan.top=fit"]
    index = _index(tmp_path / "pooled.idx", text)
    api.plan_and_build(index, ["pecan"], models, sets)
    reader = Index.open(index.path).reader("pecan")
    assert reader.stats["llm_batches"] == 0
    texts = [n.text for n in reader.nodes()]
    rows = reader.array("embeddings")
    assert max(embedder.token_counts(texts)) > embedder.max_tokens  # the case at hand
    assert np.array_equal(rows, embed_pooled(embedder, texts))
    long = [i for i, n in enumerate(embedder.token_counts(texts)) if n > embedder.max_tokens]
    assert not np.allclose(rows[long], embedder.encode(texts)[long], atol=1e-3)


def test_scripted_llm_is_refused_clearly(built: Index, embedder: Any) -> None:
    with pytest.raises(ModelError, match="transformers backend"):
        api.plan_and_retrieve(
            built, "pecan", "Who?", Models.with_objects(llm=ScriptedLLM(), embedder=embedder)
        )
    other = Models(spec=ModelSpec(llm="smollm2-135m", backend="openai"))
    with pytest.raises(CapabilityError, match="attention"):
        api.plan_and_retrieve(built, "pecan", "Who?", other)
    pecan = get_method("pecan")
    build = pecan.build_needs(PecanBuild())
    assert build == pecan.retrieve_needs(PecanQuery()) == pecan.answer_needs(PecanQuery())
    assert build.embedder and Capability.ATTENTION in build.llm and not build.scorer


# ------------------------------------------------------------------ the search
def test_usage_proves_no_recomputation(built: Index, smollm: Any, embedder: Any) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    question = "Who fell sick and called her daughter?"
    r = api.plan_and_ask(built, "pecan", question, models, max_new_tokens=16)
    info = r.evidence.info
    items = r.evidence.items
    prompt = search_prompt(smollm, question)
    node_tokens = sum(len(smollm.encode(line(it.text))) for it in items)
    checks = len(info["checks"])
    last_yes = info["checks"][-1] > 0.5 if checks else True
    answer_suffix = prompt.answers["Yes" if last_yes else "No"]
    expected = len(prompt.prefix) + node_tokens + checks * len(prompt.check) + len(answer_suffix)
    assert r.usage.prompt_tokens == expected
    assert r.usage.completion_tokens == info["encoded_tokens"]["generated"] >= 1
    assert r.answer is not None and r.answer.strip()
    assert info["context_tokens"] == len(prompt.prefix) + node_tokens  # suffixes rolled back
    # one check after the initial top level, then one per node added
    top = max(it.level for it in items)
    n_top = sum(1 for it in items if it.level == top and it.extra["z"] is None)
    assert checks == len(items) - n_top + 1
    # visiting order: top-level nodes first, each step carries level, z and P(Yes)
    assert [it.extra["step"] for it in items] == list(range(1, len(items) + 1))
    assert all(it.level == top for it in items[:n_top])
    p_yes = [it.extra["p_yes"] for it in items[n_top - 1 :]]
    assert p_yes == pytest.approx(info["checks"], abs=1e-6)
    # re-encoding the prompt at every check would cost far more
    reencode = sum(
        len(prompt.prefix)
        + sum(len(smollm.encode(line(it.text))) for it in items[: n_top + c])
        + len(prompt.check)
        for c in range(checks)
    )
    assert reencode > expected - len(answer_suffix)


def test_ask_answers_through_the_hook_from_the_search_cache(
    built: Index, smollm: Any, embedder: Any
) -> None:
    """`lcr ask -m pecan` answers with PECAN's declared step (the paper's second turn
    from the search's KV cache, typed SecondTurn), and the answer equals the step's on
    the retrieved evidence."""
    from lcr.answer.shared import AnswerSettings
    from lcr.methods.base import AnswerContext

    models = Models.with_objects(llm=smollm, embedder=embedder)
    question = "Who fell sick and called her daughter?"
    asked = api.plan_and_ask(built, "pecan", question, models, max_new_tokens=12)
    assert asked.answer_settings is not None and asked.answer_settings["step"] == "pecan"
    assert asked.answer and asked.evidence.state is None  # answered: the cache let go
    # retrieval alone, resolved with the same reply length (the search keeps room for
    # it in the window): the same search, its cache kept for the step, no answer yet
    query = pipeline.plan_query("pecan", max_new_tokens=12)
    got = pipeline.retrieve_query(built, query, question, models, keep_state=True)
    assert isinstance(got.evidence.state, SecondTurn)
    assert got.answer is None and "generated" not in got.evidence.info["encoded_tokens"]
    assert got.evidence.info["encoded_tokens"]["answer"] == 0
    assert [it.id for it in got.evidence.items] == [it.id for it in asked.evidence.items]
    assert "state" not in json.dumps(got.to_json())
    ctx = AnswerContext(
        smollm,
        query.settings,
        AnswerSettings(max_new_tokens=12),
        built.source,
        built.documents,
    )
    step = get_method("pecan").answer_step(query.settings)
    out = step.answer(ctx, question, got.evidence, step.state_of(got.evidence))
    assert out.text == asked.answer and out.dropped == 0
    assert [it.id for it in out.used] == [it.id for it in got.evidence.items]
    encoded = got.evidence.info["encoded_tokens"]
    assert encoded == asked.evidence.info["encoded_tokens"]
    assert 1 <= encoded["generated"] <= 12 and encoded["answer"] > 0
    # evidence without the search's state is refused by name, never read untyped
    bare = pipeline.retrieve_query(built, query, question, models)
    with pytest.raises(TypeError, match="reads SecondTurn"):
        step.state_of(bare.evidence)


def test_cli_ask_answers_with_the_second_turn(
    built: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    from lcr.cli.main import main

    with pytest.raises(SystemExit) as ex:
        main(["ask", str(built.path), "Who fell sick?", "-m", "pecan", "--llm", "smollm2-135m",
              "--backend", "transformers", "--device", "cpu", "--json", "-q",
              "--max-new-tokens", "8"])  # fmt: skip
    captured = capsys.readouterr()
    assert ex.value.code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["answer"] and result["answer_settings"]["step"] == "pecan"
    assert result["answer_settings"]["max_new_tokens"] == 8
    assert 1 <= result["info"]["encoded_tokens"]["generated"] <= 8
    assert result["usage"]["completion_tokens"] == result["info"]["encoded_tokens"]["generated"]


def test_patience_k_and_ablations(built: Index, smollm: Any, embedder: Any) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    q = "What did the stepsisters do?"
    one = api.plan_and_retrieve(built, "pecan", q, models, ["pecan.yes_threshold=0"])
    assert one.evidence.info["stop"].startswith("the LLM said Yes 1")
    two = api.plan_and_retrieve(
        built, "pecan", q, models, ["pecan.yes_threshold=0", "pecan.patience=2"]
    )
    assert len(two.evidence.items) == len(one.evidence.items) + 1
    fixed = api.plan_and_retrieve(
        built, "pecan", q, models, ["pecan.progress_control=false", "pecan.max_nodes=3"]
    )
    assert len(fixed.evidence.items) == 3 and fixed.evidence.info["checks"] == []
    assert (
        fixed.usage.prompt_tokens
        == fixed.evidence.info["encoded_tokens"]["prefix"]
        + (fixed.evidence.info["encoded_tokens"]["nodes"])
    )
    k2 = api.plan_and_retrieve(built, "pecan", q, models, ["pecan.yes_threshold=1"], k=2)
    assert len(k2.evidence.items) == 2
    emb = api.plan_and_retrieve(
        built, "pecan", q, models, ["pecan.score=embedding", "pecan.yes_threshold=1"]
    )
    later = [it for it in emb.evidence.items if it.extra["z"] is not None]
    assert all(abs(it.score - it.extra["cos"]) < 1e-5 for it in later)
    full = api.plan_and_retrieve(built, "pecan", q, models, ["pecan.yes_threshold=1"])
    assert full.evidence.info["stop"] == "every node visited"
    assert len(full.evidence.items) == len(built.reader("pecan").nodes())


def test_context_window_overflow_is_reported(built: Index, smollm: Any, embedder: Any) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    r = api.plan_and_ask(
        built,
        "pecan",
        "Who?",
        models,
        ["pecan.yes_threshold=1", "pecan.max_context=400"],
        max_new_tokens=8,
    )
    assert r.evidence.info["stop"].startswith("context window full")
    assert r.evidence.info["context_tokens"] + 8 <= 400


# ------------------------------------------------------------ CLI, kill, resume
@pytest.mark.slow
def test_cli_build_killed_then_resumed_then_ask(tmp_path: Path) -> None:
    from lcr.cli.main import main

    story = tmp_path / "cinderella-opening.txt"
    story.write_text(_excerpt(), encoding="utf-8")
    out = tmp_path / "c.idx"
    sets = [a for s in BUILD_SETS for a in ("--set", s)]
    cmd = [
        sys.executable,
        "-m",
        "lcr",
        "index",
        str(story),
        "-o",
        str(out),
        "-m",
        "pecan",
        "--llm",
        "smollm2-135m",
        "-q",
        *sets,
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cache = out / "cache" / "pecan.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if cache.exists() and cache.read_text(encoding="utf-8").count("\n") >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the build ended before it could be killed: {proc.stderr}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    paid_before = cache.read_text(encoding="utf-8").count("\n")
    assert paid_before >= 1
    assert "pecan" not in Index.open(out).methods  # nothing half-built committed

    with pytest.raises(SystemExit) as ex:
        main(
            [
                "index",
                str(story),
                "-o",
                str(out),
                "-m",
                "pecan",
                "--llm",
                "smollm2-135m",
                "-q",
                *sets,
            ]
        )
    assert ex.value.code == 0
    stats = Index.open(out).reader("pecan").stats
    assert stats["llm_cached"] == paid_before  # no finished batch was generated again
    assert stats["llm_batches"] + stats["llm_cached"] == cache.read_text().count("\n")

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as ex:
        main(
            [
                "ask",
                str(out),
                "Who fell sick?",
                "-m",
                "pecan",
                "--llm",
                "smollm2-135m",
                "--json",
                "-q",
            ]
        )
    assert ex.value.code == 0
    result = json.loads(buf.getvalue().strip().splitlines()[-1])
    assert result["answer"] and result["evidence"]
    steps = [e["step"] for e in result["evidence"]]
    assert steps == sorted(steps) and all("p_yes" in e and "z" in e for e in result["evidence"])
    assert result["usage"]["prompt_tokens"] == sum(
        v for k, v in result["info"]["encoded_tokens"].items() if k != "generated"
    )


# ---------------------------------------------- SDPA with weights (no per-head copy)
@pytest.mark.parametrize("new", [1, 5])
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_sdpa_with_weights_equals_eager_attention(new: int, mask: str) -> None:
    """Weights and output equal eager attention (keys repeated per head, mask added).

    transformers passes no mask only for one new token or for no cache at all
    (SDPA's own causal flag is then right), so "none" with 5 new tokens has no cache.
    """
    from types import SimpleNamespace

    from lcr.models.weights_attention import sdpa_with_weights

    torch.manual_seed(0)
    heads, kv_heads, dim = 6, 2, 8
    keys = new if mask == "none" and new > 1 else 11
    q = torch.randn(1, heads, new, dim)
    k = torch.randn(1, kv_heads, keys, dim)
    v = torch.randn(1, kv_heads, keys, dim)
    allowed = torch.ones(new, keys, dtype=torch.bool).tril(diagonal=keys - new)
    allowed[:, 0] = False  # a masked position that causality alone would allow
    given: torch.Tensor | None = None
    if mask == "bool":
        given = allowed[None, None]
    elif mask == "float":
        given = torch.zeros(1, 1, new, keys).masked_fill(~allowed, float("-inf"))
    else:
        allowed[:, 0] = True
    module = SimpleNamespace(is_causal=True, num_key_value_groups=heads // kv_heads, training=False)
    out, weights = sdpa_with_weights(module, q, k, v, given, scaling=dim**-0.5)
    kr = k.repeat_interleave(heads // kv_heads, dim=1)
    vr = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = (q @ kr.transpose(2, 3)) * dim**-0.5
    want = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    assert weights.shape == (1, heads, new, keys)
    assert float((weights - want).abs().max()) < 1e-6
    assert float((out - (want @ vr).transpose(1, 2)).abs().max()) < 1e-5


# ------------------------------------------------------- the search, step by step
def test_r_z_and_cosine_choose_each_node_of_a_real_search(
    built: Index, smollm: Any, embedder: Any
) -> None:
    """Replays a real search: each node's r is its attention to the question times its
    position (the question is 1, appendix C), and each node after the top level is the
    unvisited one with the best z + cos, z = E^T r over the nodes visited before it.

    The attention is computed apart from the search's KV cache: one eager pass over the
    whole prompt so far (transformers' own weights), averaged over layers and heads, then
    over the node's tokens and the question's tokens (section 3.1's average)."""
    models = Models.with_objects(llm=smollm, embedder=embedder)
    q = "What did the stepsisters do?"
    res = api.plan_and_retrieve(built, "pecan", q, models, ["pecan.yes_threshold=1"], k=7)
    items = res.evidence.items
    assert len(items) == 7
    reader = built.reader("pecan")
    nodes = reader.nodes()
    index = {n.id: i for i, n in enumerate(nodes)}
    edges = reader.csr("edges")
    emb = reader.array("embeddings").astype(np.float32)
    cos = (emb @ np.asarray(embedder.encode([q])[0], dtype=np.float32)).astype(np.float64)
    prompt = search_prompt(smollm, q, "question")
    qa, qb = prompt.question
    ids = list(prompt.prefix)
    r = np.zeros(len(nodes))
    visited: set[int] = set()
    chosen_by_score = 0
    for position, item in enumerate(items, 2):
        i = index[item.id]
        if item.extra["z"] is not None:  # chosen by the search, not a top-level start
            z = edges.T @ r
            total = z + cos
            total[sorted(visited)] = -np.inf
            assert i == int(np.argmax(total))
            # r is float32 attention, here from eager weights and there from SDPA with
            # weights on a KV cache: 9e-7 apart (relative) on an AVX2 CPU (session 68), under
            # 1e-9 (absolute) on the machines before it
            assert item.extra["z"] == pytest.approx(z[i], rel=1e-5, abs=1e-9)
            assert item.score == pytest.approx(z[i] + cos[i], abs=1e-5)
            chosen_by_score += 1
        node = smollm.encode(line(nodes[i].text))
        start = len(ids)
        ids += node
        _, attn, _ = forward_with_attention(smollm, ids, logits_to_keep=1)
        mean = torch.stack([a[0] for a in attn]).mean(dim=(0, 1))  # (tokens, tokens)
        raw = float(mean[start:, qa:qb].mean())
        assert item.extra["r"] == pytest.approx(raw * position, rel=1e-3)
        r[i] = raw * position
        visited.add(i)
    assert chosen_by_score >= 2  # the test reaches past the top-level nodes
    # the weighting matters here: later nodes' raw attention is not their r
    assert any(abs(it.extra["r"] / p - it.extra["r"]) > 0 for p, it in enumerate(items, 2))


def test_the_answer_turn_follows_the_models_own_check(
    built: Index, smollm: Any, embedder: Any
) -> None:
    """With no check during the search (progress control off), the answer turn does
    not put a "Yes" in the model's mouth: the check runs once and its word is used."""
    models = Models.with_objects(llm=smollm, embedder=embedder)
    q = "What did the stepsisters do?"
    # the excerpt never writes "stepsisters" (only "sisters"): the term check would answer
    # "not found" before PECAN's turn, which is what this test reads
    sets = ["pecan.progress_control=false", "pecan.max_nodes=2", "answer.term_zipf=0"]
    for threshold, word in (("0", "Yes"), ("1", "No")):
        r = api.plan_and_ask(
            built,
            "pecan",
            q,
            models,
            [*sets, f"pecan.yes_threshold={threshold}"],
            max_new_tokens=4,
        )
        enc, first = r.evidence.info["encoded_tokens"], r.evidence.info["first_turn"]
        assert r.evidence.info["checks"] == []
        assert enc["final_check"] > 0 and 0.0 <= first["p_yes"] <= 1.0
        assert first["reply"] == word and first["checked_before_answer"]
    # with progress control the last check's word is used and no extra check runs
    r = api.plan_and_ask(
        built, "pecan", q, models, ["pecan.yes_threshold=1", sets[-1]], k=2, max_new_tokens=4
    )
    first = r.evidence.info["first_turn"]
    assert "final_check" not in r.evidence.info["encoded_tokens"]
    assert first == {"reply": "No", "checked_before_answer": False}


# ------------------------------------------------------------------ levels rule
class _Words:
    """count_tokens by words: enough for the level rules, which only add tokens up."""

    model_id = "words"
    context_window = 100_000

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _levels(monkeypatch: pytest.MonkeyPatch, leaves: list[str], reply: Any, **kw: Any) -> Any:
    from types import SimpleNamespace

    from lcr.methods.pecan import build as pecan_build
    from lcr.methods.toolkit import LLMCalls
    from lcr.progress import NULL_PROGRESS
    from lcr.store import MemoryCache, Node

    params = PecanBuild(**kw)
    monkeypatch.setattr(pecan_build, "effective_s", lambda llm, p: p.s)
    monkeypatch.setattr(
        pecan_build,
        "leaf_nodes",
        lambda documents, count, n: [
            Node(f"c{i}", 0, t, [(i, i + 1)], 0, meta={"tokens": len(t.split()) + 1})
            for i, t in enumerate(leaves)
        ],
    )
    monkeypatch.setattr(
        pecan_build,
        "_level_points",
        lambda llm, batches, p, c, graph, task: [reply(texts) for texts in batches],
    )
    ctx = SimpleNamespace(
        settings=params,
        progress=NULL_PROGRESS,
        out=SimpleNamespace(stats={}),
        warn=print,
        doc_texts=lambda: iter(()),
    )
    calls = LLMCalls(MemoryCache())
    return pecan_build.build_graph(ctx, _Words(), calls)  # type: ignore[arg-type]


def _halve(texts: list[str]) -> tuple[list[str], list[list[float]]]:
    """Two points per batch, each half as long as the batch: every level shrinks."""
    words = " ".join(texts).split()
    cut = max(1, len(words) // 4)
    points = [" ".join(words[:cut]), " ".join(words[cut : 2 * cut])]
    return points, [[1.0 / len(texts)] * len(texts) for _ in points]


def test_levels_stop_at_one_batch_and_never_grow(monkeypatch: pytest.MonkeyPatch) -> None:
    leaves = [" ".join(f"w{i}x{j}" for j in range(9)) for i in range(16)]  # 16 x 10 tokens
    g = _levels(monkeypatch, leaves, _halve, s=40)
    assert g.levels[0] == 16 and g.levels[-1] == 2
    assert g.stop.endswith("summarises a single batch")
    assert all(a >= b for a, b in zip(g.levels, g.levels[1:], strict=False))
    # a model restating its input (points as long as the batch) stops the levels at once

    def restate(t: list[str]) -> tuple[list[str], list[list[float]]]:
        return list(t), [[1.0 / len(t)] * len(t)] * len(t)

    same = _levels(monkeypatch, leaves, restate, s=40)
    assert same.stop == "level 1 is no shorter than the level below" and len(same.levels) == 2
    # top=fit: a level that fits one batch is the top, no summary above it
    fit = _levels(monkeypatch, leaves[:3], _halve, s=40, top="fit")
    assert fit.levels == [3] and "fits one batch" in fit.stop


def test_tree_ablation_gives_each_node_one_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Table 2's "w/o IP-based Graph": one summary node per batch, many-to-one."""
    leaves = [" ".join(f"w{i}x{j}" for j in range(9)) for i in range(16)]

    def weighted(texts: list[str]) -> tuple[list[str], list[list[float]]]:
        points, _ = _halve(texts)
        n = len(texts)
        return points, [[1.0] + [0.0] * (n - 1), [0.0] * (n - 1) + [1.0]] if n > 1 else [[1.0]] * 2

    points = _levels(monkeypatch, leaves, weighted, s=40)
    tree = _levels(monkeypatch, leaves, weighted, s=40, graph="tree")
    parents: dict[int, list[int]] = {}
    for hi, lo, _w in tree.edges:
        parents.setdefault(lo, []).append(hi)
    assert all(len(p) == 1 for p in parents.values())
    assert len(parents) == len(tree.nodes) - tree.levels[-1]  # all but the top have one
    assert tree.levels[1] == 4 and points.levels[1] == 8  # one node per batch, not two
    first = [e for e in tree.edges if e[0] == tree.levels[0]]
    assert sum(w for _, _, w in first) == pytest.approx(1.0)
    assert [w for _, _, w in first] == pytest.approx([0.5, 0.0, 0.0, 0.5])  # the mean
    assert tree.levels[-1] == 1
    # older indexes recorded no graph: the IP graph, still the default, so it reads true
    assert PecanBuild.from_stored({}).graph == "points"


def test_eval_records_keep_the_nodes_each_search_read(
    built: Index, smollm: Any, embedder: Any
) -> None:
    """``FIXED_NODES`` stands for the average node count of the progress-controlled
    search, so each eval record keeps its count (``retrieval.nodes_read``): here the
    count -k allows, then the fixed ablation's count, and nothing for a method that
    keeps none."""
    from lcr.eval import runner
    from lcr.eval.dataset import Question

    models = Models.with_objects(llm=smollm, embedder=embedder)
    q = Question("q1", "What did the stepsisters do?", ["went to the ball"], [])

    def record(method: str, sets: list[str], k: int | None = None) -> dict[str, Any]:
        opts = runner.RunOptions([method], k=k, sets=sets, max_new_tokens=4)
        (plan,) = runner.plan_methods([method], models, opts)
        return runner.run_one(q, plan, built, models, opts, [], [])

    unchecked = "answer.term_zipf=0"  # "stepsisters" is not in the excerpt (see above)
    capped = record("pecan", [*BUILD_SETS, "pecan.yes_threshold=1", unchecked], k=2)
    assert capped["retrieval"] == {"nodes_read": 2, "stop": "2 nodes visited"}
    fixed = record(
        "pecan", [*BUILD_SETS, "pecan.progress_control=false", "pecan.max_nodes=3", unchecked]
    )
    assert fixed["retrieval"]["nodes_read"] == 3 == len(fixed["evidence"])
    info = {"visited": 3}
    assert get_method("bm25").record_fields(info) == {}
    assert get_method("pecan").record_fields(info) == {"nodes_read": 3, "stop": None}

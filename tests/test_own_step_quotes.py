"""Quotes in the methods' own answer steps (issue 53): PECAN's second turn, GraphReader's
notebook answer (Figure 12) and LightPAL's paper prompt ask for a quote when
``answer.check`` is quote or both, and their reply goes through the shared step's
checks: the quote must be the document's words in the evidence that step read, a
failed quote is withheld, and no unverified quote is ever carried. With the default
check the paper's prompt and answer are as they were.

The control-flow tests script the reply; the end-to-end tests run smollm2-135m through
``lcr ask --json`` on the opening of tests/data/cinderella.txt."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lcr import api, pipeline
from lcr.answer.needs import support_needs
from lcr.answer.quotes import check_quotes
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.answer.step import NO_STATE, AnswerContext
from lcr.evidence import Evidence, EvidenceItem
from lcr.methods.graphreader.method import NOTEBOOK_ANSWER, GraphReaderQuery, Notebooks
from lcr.methods.lightpal.method import PAPER_PROMPT, LightPALQuery
from lcr.methods.pecan.method import SECOND_TURN
from lcr.methods.pecan.search import SecondTurn
from lcr.models.base import Capability
from lcr.models.container import Models
from lcr.models.hashing import HashingEmbedder
from lcr.pipeline.plans import answer_settings, parse_sets
from lcr.store import Document, Index
from tests.conftest import FIXTURES
from tests.fakes import Replying, ScriptedLLM
from tests.test_graphreader import StageLLM

TEXT = (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[:1700]
NAME = "cinderella.txt"
QUESTION = "What did the sisters call the step-child?"
TRUE_QUOTE = "And as on that account she always looked dusty and dirty, they called her cinderella"
FALSE_QUOTE = "The sisters named her Cinderella because of the ashes on her dress."


def _index(path: Path) -> Index:
    raw = TEXT.encode("utf-8")
    return Index.create(path, [Document(NAME, TEXT, hashlib.sha256(raw).hexdigest(), len(raw))])


def _chunks(source: str) -> list[EvidenceItem]:
    """Two chunks of the text, cut at a sentence, each exactly its span."""
    cut = source.index("Now began")
    return [
        EvidenceItem("c0", 0, 0, 2.0, source[:cut], [(0, cut)], {"rank": 1}),
        EvidenceItem("c1", 0, 0, 1.0, source[cut:], [(cut, len(source))], {"rank": 2}),
    ]


def _answer(*sets: str) -> AnswerSettings:
    return answer_settings(None, parse_sets(list(sets)))


def _graphreader(index: Index, reply: str, *sets: str) -> tuple[AnswerResult, Replying]:
    llm = Replying(reply)
    ctx = AnswerContext(llm, GraphReaderQuery(), _answer(*sets), index.source, index.documents)
    notes = Notebooks(["the sisters mocked her; they called her cinderella"])
    evidence = Evidence("graphreader", _chunks(index.source), state=notes)
    return NOTEBOOK_ANSWER.answer(ctx, QUESTION, evidence, notes), llm


def _lightpal(index: Index, reply: str, *sets: str) -> tuple[AnswerResult, Replying]:
    llm = Replying(reply)
    ctx = AnswerContext(llm, LightPALQuery(), _answer(*sets), index.source, index.documents)
    evidence = Evidence("lightpal", _chunks(index.source))
    return PAPER_PROMPT.answer(ctx, QUESTION, evidence, NO_STATE), llm


STEPS = {"graphreader": _graphreader, "lightpal": _lightpal}
REPLY = {
    # Figure 12's form: the analysis, then the final answer and its quote
    "graphreader": "Analyze: path 1 says so.\nFinal answer: cinderella\nQuote: {quote}",
    "lightpal": "Answer: cinderella\nQuote: {quote}",
}


@pytest.mark.parametrize("method", sorted(STEPS))
def test_own_step_asks_for_a_quote_and_gives_only_a_verified_one(
    method: str, tmp_path: Path
) -> None:
    index = _index(tmp_path / "c.idx")
    step = STEPS[method]
    good, llm = step(index, REPLY[method].format(quote=TRUE_QUOTE), "answer.check=both")
    asked = "\n".join(m["content"] for m in llm.prompts[-1])
    assert 'write "Quote:"' in asked and "Quote: <the sentence of the" in asked
    assert good.text == "cinderella" and good.withheld is None
    assert good.quote_check is not None and good.quote_check.holds
    assert good.support is not None  # both: the support check ran too
    (quote,) = good.quotes
    assert quote.item == "c1" and len(quote.spans) == 1
    start, end = quote.spans[0]
    assert index.source[start:end] == quote.text and "they called her cinderella" in quote.text


@pytest.mark.parametrize("method", sorted(STEPS))
def test_own_step_withholds_or_falls_back_on_a_quote_not_in_the_evidence(
    method: str, tmp_path: Path
) -> None:
    index = _index(tmp_path / "c.idx")
    step = STEPS[method]
    reply = REPLY[method].format(quote=FALSE_QUOTE)
    held, _ = step(index, reply, "answer.check=quote")
    assert held.text == NOT_FOUND and held.withheld == "cinderella" and held.quotes == ()
    assert held.quote_check is not None and held.quote_check.problem == "quote not in the evidence"
    assert held.support is None  # quote alone, no fallback: no support check
    both, _ = step(index, reply, "answer.check=both")
    assert both.text == NOT_FOUND and both.withheld == "cinderella" and both.support == 0.0
    guessed, _ = step(index, reply, "answer.check=quote", "answer.not_found=guess")
    assert guessed.text == "cinderella" and guessed.quotes == () and guessed.withheld is None


@pytest.mark.parametrize("method", sorted(STEPS))
def test_the_default_check_keeps_the_papers_prompt_and_answer(method: str, tmp_path: Path) -> None:
    index = _index(tmp_path / "c.idx")
    reply = REPLY[method].format(quote=FALSE_QUOTE)
    out, llm = STEPS[method](index, reply)  # answer.check=support, lcr's default
    assert "Quote" not in "\n".join(m["content"] for m in llm.prompts[-1])
    assert out.quote_check is None and out.support is None and out.quotes == ()
    assert out.text.startswith("cinderella" if method == "graphreader" else "Answer: cinderella")


def test_the_support_checks_scoring_call_is_needed_where_an_own_step_runs_it() -> None:
    """The support check's scoring call (made when its constants weigh P(yes)) needs
    log-probabilities: the shared step always asks for it while abstaining; a method's
    own step only beside the quote check (``answer.check=both``)."""
    wants = Capability.CHOICE_PROBABILITY
    own = {
        ("answer.check=support",): False,  # the paper's step runs no check
        ("answer.check=quote",): False,  # a failed quote is withheld: no support score
        ("answer.check=both",): True,
        ("answer.check=both", "answer.not_found=guess"): False,  # nothing withheld
    }
    for sets, needed in own.items():
        settings = _answer(*sets).replace(p_yes=True)  # the constants weighing P(yes)
        assert (wants in support_needs(settings, shared=False).llm) is needed, sets
        shared = settings.not_found == "abstain"
        assert (wants in support_needs(settings, shared=True).llm) is shared, sets


def _cli_json(index: Path, method: str, models: Models, *args: str) -> dict[str, Any]:
    """``lcr ask INDEX QUESTION -m METHOD --json`` with ``models`` (the CLI's seam)."""
    from lcr.cli.main import main

    buf = io.StringIO()
    argv = ["ask", str(index), QUESTION, "-m", method, "--json", "-q", *args]
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as ex:
        main(argv, models=lambda spec, progress: models)
    assert ex.value.code == 0
    record: dict[str, Any] = json.loads(buf.getvalue().strip().splitlines()[-1])
    return record


def _assert_cited(record: dict[str, Any], index: Index) -> None:
    """Every quote of ``--json``: the document's own text at its span, its file named,
    read in an evidence item the answer read."""
    source = index.source
    for quote in record["quotes"]:
        start, end = quote["span"]
        pieces = quote.get("spans", [[start, end]])
        assert " \u2026 ".join(source[s:e] for s, e in pieces) == quote["text"]
        if len(pieces) == 1:
            assert source[start:end] == quote["text"]
        assert quote["document"] == NAME and quote["citations"][0]["document"] == NAME
        assert quote["evidence"] in {e["id"] for e in record["evidence"]}


def test_graphreader_ask_json_carries_the_notebook_answers_verified_quote(tmp_path: Path) -> None:
    """Through ``lcr ask --json``: the agent (scripted) reads chunk c0 and writes a notebook,
    Figure 12's reply quotes the document, and the quote is cited from the chunk read."""
    index = _index(tmp_path / "c.idx")
    embedder = HashingEmbedder()
    build = ["graphreader.chunk_tokens=600"]
    api.plan_and_build(
        index, ["graphreader"], Models.with_objects(ScriptedLLM(words=60), embedder), build
    )
    final = "Analyze: the notebook says so.\nFinal answer: cinderella\nQuote: {quote}"

    def ask(quote: str, *sets: str) -> dict[str, Any]:
        replies = {
            "atomic_facts": [
                "*Updated Notebook*: a step-child\n*Chosen Action*: read_chunk(['c0'])"
            ],
            "chunk": [
                "*Updated Notebook*: they called her cinderella\n*Chosen Action*: termination()"
            ],
            "neighbors": ["*Chosen Action*: termination()"],
            "answer": [final.format(quote=quote)],
        }
        models = Models.with_objects(StageLLM(replies), embedder)
        args = ["--set", "graphreader.initial_nodes=1", *[a for s in sets for a in ("--set", s)]]
        return _cli_json(index.path, "graphreader", models, *args)

    good = ask(TRUE_QUOTE, "answer.check=both")
    assert good["answer_settings"]["step"] == "graphreader"
    assert good["info"]["notebooks"] == ["they called her cinderella"]
    assert good["answer"] == "cinderella" and good["quote_check"]["holds"], json.dumps(
        {k: v for k, v in good.items() if k not in ("info", "evidence")}
    )
    assert len(good["quotes"]) == 1 and good["quotes"][0]["evidence"] == "c0"
    _assert_cited(good, index)
    held = ask(FALSE_QUOTE, "answer.check=both")
    assert held["answer"] == NOT_FOUND and held["quotes"] == []
    assert held["withheld_answer"] == "cinderella"
    assert held["quote_check"]["problem"] == "quote not in the evidence"


def test_lightpal_ask_json_carries_the_paper_prompts_verified_quote(tmp_path: Path) -> None:
    """Through ``lcr ask --json``: the paper's prompt asks for a quote, and the reply's
    quote is cited from the passage it is in; a quote not there falls back to the
    support check withholds it with ``answer.check=both``, never shown."""
    index = _index(tmp_path / "c.idx")
    embedder = HashingEmbedder()
    build = ["lightpal.scorer=llm", "lightpal.candidates=2", "lightpal.chunk_chars=600"]
    api.plan_and_build(index, ["lightpal"], Models.with_objects(ScriptedLLM(), embedder), build)

    def ask(quote: str, *sets: str) -> tuple[dict[str, Any], Replying]:
        llm = Replying(f"Answer: cinderella\nQuote: {quote}")
        models = Models.with_objects(llm, embedder)
        args = ["-k", "5", *[a for s in sets for a in ("--set", s)]]
        return _cli_json(index.path, "lightpal", models, *args), llm

    good, llm = ask(TRUE_QUOTE, "answer.check=both")
    assert "## SECTION:" in llm.prompts[-1][-1]["content"]  # the paper's prompt
    assert good["answer_settings"]["step"] == "lightpal"
    assert good["answer"] == "cinderella" and len(good["quotes"]) == 1
    _assert_cited(good, index)
    kept, _ = ask(FALSE_QUOTE, "answer.check=both")
    assert kept["quote_check"]["problem"] == "quote not in the evidence"
    assert kept["answer"] == NOT_FOUND and kept["support"] == 0.0
    # the model's failed quote is never shown
    assert kept["quotes"] == []


# ------------------------------------------------------------- smollm2-135m, PECAN
PECAN_BUILD = ["pecan.chunk_tokens=100", "pecan.s=256", "pecan.points_max_new_tokens=24"]
pecan_module = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def pecan_index(tmp_path_factory: pytest.TempPathFactory, smollm: Any, embedder: Any) -> Index:
    index = _index(tmp_path_factory.mktemp("pecan") / "c.idx")
    api.plan_and_build(
        index, ["pecan"], Models.with_objects(llm=smollm, embedder=embedder), PECAN_BUILD
    )
    return index


@dataclasses.dataclass
class ScriptedTurn:
    """The search's real KV cache, but the answer turn's reply scripted."""

    cache: Any
    reply: str
    suffixes: list[list[int]] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.cache)

    def append(self, node: Sequence[int]) -> float:
        return float(self.cache.append(node))

    def yes_probability(
        self, suffix: Sequence[int], yes: frozenset[int], no: frozenset[int]
    ) -> float:
        return float(self.cache.yes_probability(suffix, yes, no))

    def answer(self, suffix: Sequence[int], max_new_tokens: int) -> tuple[str, int]:
        self.suffixes.append(list(suffix))
        return self.reply, 5


@pecan_module
def test_pecans_second_turn_asks_for_a_quote_and_checks_it_against_the_nodes(
    pecan_index: Index, smollm: Any, embedder: Any
) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    query = pipeline.plan_query("pecan", parse_sets(["answer.check=quote"]), max_new_tokens=32)
    got = pipeline.retrieve_query(pecan_index, query, QUESTION, models, keep_state=True)
    state = got.evidence.state
    assert isinstance(state, SecondTurn)
    source = pecan_index.source

    def answered(reply: str, *sets: str) -> tuple[AnswerResult, ScriptedTurn]:
        turn = ScriptedTurn(state.cache, reply)
        kept = dataclasses.replace(state, cache=turn)
        ctx = AnswerContext(smollm, query.settings, _answer(*sets), source, pecan_index.documents)
        return SECOND_TURN.answer(ctx, QUESTION, got.evidence, kept), turn

    leaf = next(it for it in got.evidence.items if it.level == 0)  # the document's own text
    quote = " ".join(leaf.text.split()[:8])
    word = max(quote.split(), key=len)
    good, turn = answered(f"Answer: {word}\nQuote: {quote}", "answer.check=quote")
    assert "Quote:" in smollm.tokenizer.decode(turn.suffixes[-1])  # the turn asks for it
    assert good.quote_check is not None and good.quote_check.holds, good.quote_check
    assert good.text == word and len(good.quotes) == 1
    ((start, end),) = good.quotes[0].spans
    assert source[start:end] == good.quotes[0].text and good.quotes[0].item == leaf.id
    held, _ = answered(f"Answer: cinderella\nQuote: {FALSE_QUOTE}", "answer.check=quote")
    assert held.text == NOT_FOUND and held.withheld == "cinderella" and held.quotes == ()
    kept, _ = answered(f"Answer: cinderella\nQuote: {FALSE_QUOTE}", "answer.check=both")
    assert kept.text == NOT_FOUND and kept.support == 0.0 and kept.quotes == ()
    # the default check: the paper's turn, no quote asked, the reply as it is
    plain = pipeline.plan_query("pecan", max_new_tokens=32)
    bare = pipeline.retrieve_query(pecan_index, plain, QUESTION, models, keep_state=True)
    assert isinstance(bare.evidence.state, SecondTurn)
    for suffix in bare.evidence.state.prompt.answers.values():
        assert "Quote" not in smollm.tokenizer.decode(suffix)


# ------------------------------------------------------ smollm2-135m, lcr ask --json
def _ask_json(index: Path, method: str, models: Models, *args: str) -> dict[str, Any]:
    return _cli_json(index, method, models, "--set", "answer.check=both", *args)


def _spans(record: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(s), int(e)) for s, e in record["spans"]]


def _assert_checked(record: dict[str, Any], index: Index, step: str) -> None:
    """What ``--json`` says of a reply checked with ``answer.check=both``: the step that
    answered, the checks' verdicts, and every quote the document's own text, cited."""
    assert record["answer_settings"]["check"] == "both"
    assert record["answer_settings"]["step"] == step
    source = index.source
    check = record.get("quote_check")
    assert "support" in record  # both: the support check's score, whatever the quote did
    if check is None:  # the reply said the answer is not there: nothing to check
        assert record["answer"] == NOT_FOUND and not record.get("quotes")
        return
    assert "quotes" in record
    read = [
        EvidenceItem(e["id"], e["doc"], e["level"], e["score"], e["text"], _spans(e))
        for e in record["evidence"]
    ]
    settings = _answer("answer.check=both")
    again = check_quotes(check["reply"], QUESTION, read, source, settings.quote_tolerance())
    assert again.problem == check["problem"] and again.holds is check["holds"]
    if not check["holds"]:
        assert record["answer"] == NOT_FOUND and record["quotes"] == []
    elif record["answer"] != NOT_FOUND:
        assert record["quotes"] and record["support"] >= settings.support
    _assert_cited(record, index)


@pecan_module
def test_pecan_ask_json_with_both_checks(pecan_index: Index, smollm: Any, embedder: Any) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    record = _ask_json(pecan_index.path, "pecan", models, "--max-new-tokens", "48")
    _assert_checked(record, pecan_index, "pecan")


@pytest.mark.slow
def test_graphreader_ask_json_with_both_checks(tmp_path: Path, smollm: Any, embedder: Any) -> None:
    index = _index(tmp_path / "c.idx")
    models = Models.with_objects(llm=smollm, embedder=embedder)
    build = ["graphreader.chunk_tokens=120", "graphreader.extraction_max_new_tokens=48"]
    api.plan_and_build(index, ["graphreader"], models, build)
    query = ["graphreader.initial_nodes=1", "graphreader.max_calls=2",
             "graphreader.agent_max_new_tokens=48"]  # fmt: skip
    sets = [a for s in query for a in ("--set", s)]
    record = _ask_json(index.path, "graphreader", models, "--max-new-tokens", "64", *sets)
    step = "graphreader" if any(n.strip() for n in record["info"]["notebooks"]) else "shared"
    _assert_checked(record, index, step)


@pytest.mark.slow
def test_lightpal_ask_json_with_both_checks(tmp_path: Path, smollm: Any, embedder: Any) -> None:
    index = _index(tmp_path / "c.idx")
    models = Models.with_objects(llm=smollm, embedder=embedder)
    build = ["lightpal.scorer=llm", "lightpal.candidates=2", "lightpal.chunk_chars=600",
             "lightpal.continuation_tokens=16"]  # fmt: skip
    api.plan_and_build(index, ["lightpal"], models, build)
    record = _ask_json(index.path, "lightpal", models, "-k", "3", "--max-new-tokens", "64")
    _assert_checked(record, index, "lightpal")


class QuotingTurn(ScriptedTurn):
    """The search's real KV cache; the answer turn quotes the first node visited that is
    the document's own text (its first ten words) and answers with its longest word."""

    def __init__(self, cache: Any, llm: Any, source: str) -> None:
        super().__init__(cache, "")
        self.llm, self.source, self.nodes = llm, " ".join(source.split()), []

    def append(self, node: Sequence[int]) -> float:
        self.nodes.append(self.llm.tokenizer.decode(list(node)).strip().removeprefix("* "))
        return super().append(node)

    def answer(self, suffix: Sequence[int], max_new_tokens: int) -> tuple[str, int]:
        leaf = next(n for n in self.nodes if n in self.source)
        quote = " ".join(leaf.split()[:10])
        self.reply = f"Answer: {max(quote.split(), key=len)}\nQuote: {quote}"
        return super().answer(suffix, max_new_tokens)


class QuotingLLM:
    """smollm2-135m as PECAN uses it, but each search's cache a :class:`QuotingTurn`."""

    def __init__(self, llm: Any, source: str) -> None:
        self.llm, self.source, self.turns = llm, source, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.llm, name)

    def node_cache(self, prefix: Sequence[int], question: tuple[int, int]) -> QuotingTurn:
        turn = QuotingTurn(self.llm.node_cache(prefix, question), self.llm, self.source)
        self.turns.append(turn)
        return turn


@pecan_module
def test_pecan_ask_json_cites_the_quote_of_a_node_visited(
    pecan_index: Index, smollm: Any, embedder: Any
) -> None:
    """Through ``lcr ask --json``: the real search, its answer turn replying with a quote
    of a node it visited; the quote is cited at its span in source.txt."""
    llm = QuotingLLM(smollm, pecan_index.source)
    record = _ask_json(pecan_index.path, "pecan", Models.with_objects(llm, embedder))
    (turn,) = llm.turns
    assert "Quote:" in smollm.tokenizer.decode(turn.suffixes[-1])
    assert record["quote_check"]["holds"] and len(record["quotes"]) == 1, record["quote_check"]
    _assert_cited(record, pecan_index)
    given = record["answer"] != NOT_FOUND
    assert given is (record["support"] >= AnswerSettings().support)

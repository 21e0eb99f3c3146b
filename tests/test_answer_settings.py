"""The shared answer step's settings (answer.*): prompts built from real evidence for each
variant, abstaining, the not-found normaliser on real replies, validation and recording."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from lcr import api
from lcr.answer.shared import (
    NOT_FOUND,
    ORIGINAL,
    AnswerSettings,
    build_messages,
    fit_to_budget,
    prepare_evidence,
    says_not_found,
    shared_answer,
    shared_prompt,
)
from lcr.cli.eval import eval_group
from lcr.cli.main import cli
from lcr.errors import SettingError
from lcr.eval import runner
from lcr.evidence import EvidenceItem
from lcr.models.container import Models
from lcr.pipeline.plans import answer_settings, parse_sets
from lcr.store import Index
from tests.fakes import ForbiddenLLM, ScriptedLLM

QUESTION = "What did the bird throw down to Cinderella?"


@pytest.fixture(scope="module")
def two_parts(cinderella: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    """The story split at a sentence into two documents, indexed with bm25."""
    folder = tmp_path_factory.mktemp("parts")
    text = cinderella.read_text(encoding="utf-8")
    cut = text.index(". ", len(text) // 2) + 2
    (folder / "first-half.txt").write_text(text[:cut], encoding="utf-8")
    (folder / "second-half.txt").write_text(text[cut:], encoding="utf-8")
    paths = [folder / "first-half.txt", folder / "second-half.txt"]
    index, _ = api.plan_and_index(
        paths, folder / "parts.idx", ["bm25"], Models.with_objects(llm=ForbiddenLLM())
    )
    return index


def _evidence(index: Index) -> list[EvidenceItem]:
    models = Models.with_objects(llm=ForbiddenLLM())
    return api.plan_and_retrieve(index, "bm25", QUESTION, models, k=14).evidence.items


def _names(index: Index) -> list[str]:
    return [d.name for d in index.documents]


def resolve_answer_settings(
    sets: list[str], max_new_tokens: int = 256, method_defaults: dict[str, Any] | None = None
) -> AnswerSettings:
    """The answer settings a run resolves: ``--set`` parsed once by the plans, over a
    method whose paper fixes ``method_defaults``."""
    method = SimpleNamespace(answer_measured={}, answer_paper=method_defaults or {})
    return answer_settings(method, parse_sets(sets), max_new_tokens)  # type: ignore[arg-type]


def test_default_is_todays_prompt_word_for_word(two_parts: Index) -> None:
    items = _evidence(two_parts)
    # lcr's default differs from the original step in abstaining (measured, issue 19),
    # with the term check before reading (term_zipf, #53); and in the constants its
    # stages read by: keeping the rank-1 item's sentences when it selects, the quote
    # check's answer words looked for in the evidence read, and the floors abstaining
    # withholds by (names, words never read, a quote about something else, no quote)
    assert resolve_answer_settings([]) == AnswerSettings()
    back = resolve_answer_settings(["answer.not_found=guess", "answer.term_zipf=0"])
    constants = {
        "keep_first": False,
        "quote_answer_in": "quote",
        "names_floor": 0.0,
        "located_floor": 0.0,
        "related_floor": 0.0,
        "unquoted": "show",
    }
    assert back.replace(**constants) == ORIGINAL
    prepared = prepare_evidence(items, ORIGINAL, two_parts.source, _names(two_parts))
    assert [it.id for it in prepared] == [it.id for it in _in_document_order(items)]
    # the prompt every result made before issue 19 was answered with, written out here
    # from the evidence itself (not from lcr's builder), so a change to it fails
    role = "You answer questions about a document using only the numbered excerpts given. "
    guess = "If the excerpts do not contain the answer, say that you do not know."
    excerpts = "\n\n".join(f"[{i}] {it.text}" for i, it in enumerate(prepared, 1))
    original = [
        {"role": "system", "content": role + "Answer concisely. " + guess},
        {"role": "user", "content": f"Excerpts:\n\n{excerpts}\n\nQuestion: {QUESTION}\nAnswer:"},
    ]
    assert build_messages(QUESTION, prepared) == original
    # abstaining by the support check asks as the original does, then checks the answer's
    # support (issue 40); `instruct` differs only in the system prompt's last sentence
    by_support = resolve_answer_settings([])
    assert shared_prompt(by_support)(QUESTION, prepared) == original
    # the quote check asks for the answer and the sentence it rests on (issue 53)
    quoting = shared_prompt(resolve_answer_settings(["answer.check=quote"]))(QUESTION, prepared)
    assert quoting[0]["content"] == original[0]["content"] + (
        ' After the answer, on a line of its own, write "Quote:" and the sentence of the '
        "excerpts that states the answer, copied word for word; if the answer needs two "
        'sentences, write a second "Quote:" line.'
    )
    assert quoting[1]["content"] == original[1]["content"].removesuffix("Answer:") + (
        "Reply in this form:\nAnswer: <the answer>\n"
        "Quote: <the sentence of the excerpts that states it, copied exactly>"
    )
    told = shared_prompt(
        resolve_answer_settings(["answer.not_found=instruct", "answer.check=support"])
    )(QUESTION, prepared)
    assert told[1] == original[1]
    assert told[0]["content"] == (
        role + "Answer concisely. If the excerpts do not contain the answer, "
        f'reply exactly "{NOT_FOUND}".'
    )


def _in_document_order(items: list[EvidenceItem]) -> list[EvidenceItem]:
    return sorted(items, key=lambda it: (min(s for s, _ in it.spans), it.id))


def test_document_order_is_one_view_of_rank_order(two_parts: Index) -> None:
    """Issue 71: the evidence is held best first; document order is one view
    (:func:`lcr.evidence.document_order`), which the answer step's layout and a method's
    own step both take, never a sort of their own."""
    from lcr.answer.passages import merge_passages, ordered
    from lcr.evidence import Evidence, document_order

    items = _evidence(two_parts)
    want = [it.id for it in _in_document_order(items)]
    assert [it.id for it in document_order(items)] == want
    assert [it.id for it in ordered(items, "document")] == want
    assert [it.id for it in Evidence("bm25", items).in_document_order()] == want
    merged = merge_passages(items, two_parts.source, _names(two_parts))
    assert merged == document_order(merged)


@pytest.mark.parametrize("order", ["document", "rank"])
def test_chunks_prompt_keeps_spans_and_order(two_parts: Index, order: str) -> None:
    items = _evidence(two_parts)
    settings = AnswerSettings(order=order, check="support")  # the prompt without quotes
    prepared = prepare_evidence(items, settings, two_parts.source, _names(two_parts))
    assert sorted(it.id for it in prepared) == sorted(it.id for it in items)
    for it in prepared:  # chunks as retrieved: exact slices of the source
        ((s, e),) = it.spans
        assert two_parts.source[s:e] == it.text
    if order == "rank":
        assert [it.extra["rank"] for it in prepared] == list(range(1, len(items) + 1))
    else:
        starts = [it.spans[0][0] for it in prepared]
        assert starts == sorted(starts)
    user = shared_prompt(settings)(QUESTION, prepared)[1]["content"]
    at = [user.index(f"[{i}] {it.text}") for i, it in enumerate(prepared, 1)]
    assert at == sorted(at) and user.endswith(f"Question: {QUESTION}\nAnswer:")


@pytest.mark.parametrize("order", ["document", "rank"])
def test_merged_passages_carry_every_span_and_their_document(two_parts: Index, order: str) -> None:
    items = _evidence(two_parts)
    source, names = two_parts.source, _names(two_parts)
    settings = AnswerSettings(order=order, passages="merged")
    passages = prepare_evidence(items, settings, source, names)
    assert len(passages) < len(items)  # 14 of the story's chunks: some are neighbours
    assert {n for p in passages for n in p.extra.get("merged", [p.id])} == {it.id for it in items}
    by_id = {it.id: it for it in items}
    for p in passages:
        members = [by_id[i] for i in p.extra.get("merged", [p.id])]
        start, end = min(m.spans[0][0] for m in members), max(m.spans[0][1] for m in members)
        assert p.text == source[start:end]  # the source between them, nothing left out
        for m in members:  # every member's span lies inside one of the passage's spans
            (ms, me) = m.spans[0]
            assert any(s <= ms and me <= e for s, e in p.spans)
            assert m.doc == p.doc
        doc = two_parts.documents[p.doc]
        assert doc.start <= start and end <= doc.end and p.extra["document"] == doc.name
        assert p.extra["rank"] == min(m.extra["rank"] for m in members)
    if order == "rank":
        ranks = [p.extra["rank"] for p in passages]
        assert ranks == sorted(ranks)
    else:
        starts = [p.spans[0][0] for p in passages]
        assert starts == sorted(starts)
    user = shared_prompt(settings)(QUESTION, passages)[1]["content"]
    for i, p in enumerate(passages, 1):
        assert f"[{i}] Document: {p.extra['document']}\n{p.text}" in user
    assert {p.extra["document"] for p in passages} == {"first-half.txt", "second-half.txt"}


def test_strict_and_abstain_instructions() -> None:
    strict = shared_prompt(AnswerSettings(instruction="strict", not_found="guess"))("Q?", [])
    strict = strict[0]["content"]
    assert "answer alone" in strict and "do not know" in strict
    both = shared_prompt(AnswerSettings(instruction="strict", not_found="instruct"))("Q?", [])
    assert f'reply exactly "{NOT_FOUND}"' in both[0]["content"]
    assert "do not know" not in both[0]["content"]
    # abstain answers with the guess prompt; the support check decides afterwards
    checked = shared_prompt(AnswerSettings(instruction="strict", not_found="abstain"))("Q?", [])
    assert checked[0]["content"] == strict


def test_heading_is_counted_when_fitting() -> None:
    llm = ScriptedLLM()
    text = " ".join(f"w{i}" for i in range(60))
    plain = EvidenceItem("c0", 0, 0, 1.0, text, [(0, len(text))])
    headed = EvidenceItem("c0", 0, 0, 1.0, text, [(0, len(text))], {"document": "a b c d e f"})
    prompt = shared_prompt(AnswerSettings(passages="merged"))
    overhead = llm.count_tokens("\n".join(m["content"] for m in prompt("Q?", []))) + 16
    budget = overhead + llm.count_tokens(text) + 4  # room for the text, not its heading
    assert fit_to_budget("Q?", [plain], llm, budget, prompt).items == [plain]
    cut = fit_to_budget("Q?", [headed], llm, budget, prompt)
    assert cut.truncated and len(cut.items[0].text) < len(text)


def test_abstain_on_empty_evidence_makes_no_llm_call() -> None:
    out = shared_answer(
        "Q?", [], ForbiddenLLM(), AnswerSettings(not_found="abstain"), source="", names=[]
    )
    assert out.text == NOT_FOUND and out.used == [] and out.usage.calls == 0
    llm = ScriptedLLM()  # guessing asks the LLM even with nothing to read
    out = shared_answer("Q?", [], llm, AnswerSettings(not_found="guess"), source="", names=[])
    assert out.usage.calls == 1 and len(llm.prompts) == 1


# Real smollm2-135m replies, captured from the shared step with the abstain instruction on
# questions whose excerpts lack the answer, and real answers it gave (which must stay).
SAYS_NOT_FOUND = [
    "The car was a red car.\n\nThe answer is not found in the document.",
    "The excerpt says the river froze over in the night. The answer is not found in the document.",
    "The excerpt does not say who won. It is a factual description of a natural event, but "
    "it does not provide any information about the winner.",
    "The excerpt says the river froze over in the night. The answer is not provided.",
    "not found in the document",  # qwen2.5-coder-0.5b's reply, word for word
]
ANSWERS = [
    "The king's dog was a fox.",
    "The stepmother ate for breakfast on Sunday.",
    "The answer to the question is: 18 years old.",
    'The password is "The weather was cold and the river froze over in the night."',
    "The bird sat on the gold and silver dress.",
    "The answer is: 2. The stepmother owned 2 cats.",
    "They do not know the way.",  # a negation is not a missing answer
]


def test_not_found_normaliser_on_real_replies() -> None:
    abstain = AnswerSettings(not_found="abstain")
    for reply in SAYS_NOT_FOUND:
        assert says_not_found(reply), reply
        assert _normalised(reply, abstain) == NOT_FOUND
        assert _normalised(reply, ORIGINAL) == reply  # guessing keeps the reply as it is
    for reply in ANSWERS:
        assert not says_not_found(reply), reply
        assert _normalised(reply, abstain) == reply


def _normalised(reply: str, settings: AnswerSettings) -> str:
    from lcr.answer.shared import normalise_reply

    return normalise_reply(reply, settings)


def test_resolution_order_and_bad_values() -> None:
    assert resolve_answer_settings([], 32).max_new_tokens == 32
    paper = {"order": "rank"}  # a method whose paper fixes an answer setting keeps it ...
    assert resolve_answer_settings(["bm25.top_k=3"], method_defaults=paper).order == "rank"
    # ... unless the user sets it
    assert resolve_answer_settings(["answer.order=document"], method_defaults=paper).order == (
        "document"
    )
    with pytest.raises(SettingError, match=r"answer.order must be one of document, rank"):
        resolve_answer_settings(["answer.order=sideways"])
    with pytest.raises(
        SettingError,
        match=r"unknown setting answer.colour; valid: budget, check, evidence, instruction, ",
    ):
        resolve_answer_settings(["answer.colour=red"])
    with pytest.raises(SettingError, match="--max-new-tokens"):
        resolve_answer_settings(["answer.max_new_tokens=8"])


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("answer.order=sideways", "answer.order must be one of document, rank"),
        ("answer.nope=1", "unknown setting answer.nope"),
        ("answer.max_new_tokens=8", "--max-new-tokens"),
        ("answer.not_found=maybe", "answer.not_found must be one of guess, abstain"),
    ],
)
def test_bad_answer_settings_exit_2_on_ask_and_eval(
    two_parts: Index, tmp_path: Path, setting: str, message: str
) -> None:
    res = CliRunner().invoke(
        cli, ["ask", str(two_parts.path), "q?", "--set", setting], prog_name="lcr"
    )
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    data = tmp_path / "d.jsonl"
    res = CliRunner().invoke(eval_group, ["generate", "vt", "--length", "300", "-o", str(data)])
    assert res.exit_code == 0
    res = CliRunner().invoke(
        cli, ["eval", str(data), "-m", "bm25", "--set", setting, "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 2 and message in res.stderr, res.stderr
    assert not (tmp_path / "o").exists()


ANSWER_KEYS_IN_ORDER = [  # the chain's order: decide before reading, read, reply, verify, decide
    "term_zipf",
    "order",
    "passages",
    "select",
    "budget",
    "pool",
    "instruction",
    "evidence",
    "check",
    "support",
    "not_found",
]


def test_methods_list_the_answer_settings_and_what_each_method_keeps() -> None:
    res = CliRunner().invoke(cli, ["methods", "--json"], prog_name="lcr")
    rows = {r["name"]: r for r in map(json.loads, res.stdout.splitlines())}
    order = rows["mixpr"]["answer_settings"]["order"]
    assert order["default"] == "document" and order["paper"] is True
    assert rows["bm25"]["answer_settings"]["order"]["paper"] is False
    assert list(rows["bm25"]["answer_settings"]) == ANSWER_KEYS_IN_ORDER
    assert "KV cache" in rows["pecan"]["answer_note"] and rows["bm25"]["answer_note"] == ""
    # bm25's measured reading is its default, shown as measured; tfidf keeps lcr's
    select = rows["bm25"]["answer_settings"]["select"]
    assert (select["default"], select["measured"], select["paper"]) == ("bm25", True, False)
    assert rows["bm25"]["answer_settings"]["pool"]["default"] == 20
    assert rows["tfidf"]["answer_settings"]["select"]["default"] == "off"
    assert not rows["tfidf"]["answer_settings"]["select"]["measured"]
    res = CliRunner().invoke(cli, ["methods", "--settings"], prog_name="lcr")
    lines = res.stdout.splitlines()
    assert "    answer  keeps the paper's answer.order=document as its default" in lines
    block = lines.index(next(line for line in lines if line.startswith("answer (")))
    shown = [  # each setting's first line (a long one goes on, indented further)
        line.split()[1].split("=")[0]
        for line in lines[block + 1 :]
        if line.startswith("    answer  ")
    ]
    assert shown == [*(f"answer.{name}" for name in ANSWER_KEYS_IN_ORDER), "--max-new-tokens"]


def test_a_methods_measured_reading_is_its_default_and_sets_override_it() -> None:
    from lcr.pipeline.plans import plan_query

    def plan(*sets: str) -> Any:
        return plan_query("bm25", parse_sets(sets))

    bm25 = plan().answer
    assert (bm25.select, bm25.budget, bm25.pool) == ("bm25", 450, 20)
    assert plan_query("tfidf").answer.select == "off"  # measured with bm25 alone
    assert plan("answer.select=off").answer.select == "off"
    assert plan("answer.budget=200").answer.budget == 200
    # the method's own k setting is -k: it wins over the pool
    assert plan("bm25.top_k=4").k == 4 and plan("bm25.top_k=4").k_given
    assert not plan().k_given


def test_run_key_separates_variants_and_ignores_what_decides_nothing(tmp_path: Path) -> None:
    models = Models.with_objects(llm=ForbiddenLLM())

    def key(sets: list[str], **kw: object) -> str:
        opts = runner.RunOptions(methods=["bm25"], sets=sets, **kw)  # type: ignore[arg-type]
        return runner.plan_methods(["bm25"], models, opts)[0].key

    assert key([]) == key(["answer.order=document"])  # the default, named
    variants = {key(sets) for sets in (["answer.order=rank"], ["answer.passages=merged"], [])}
    assert len(variants) == 3
    # a setting that decides nothing where it is given leaves the key as it is
    off = ["answer.select=off"]
    assert key(off) == key([*off, "answer.budget=200"]) != key(["answer.budget=200"])
    guess = ["answer.not_found=guess"]
    assert key(guess) == key([*guess, "answer.support=0.9", "answer.term_zipf=0"])
    assert key(["answer.support=0.9"]) != key([])
    # retrieval alone reads no answer settings: the same run whatever they say
    assert key(["answer.order=rank"], retrieval_only=True) == key([], retrieval_only=True)


@pytest.mark.slow
def test_real_model_records_answer_settings(two_parts: Index, tmp_path: Path) -> None:
    """smollm2 end to end: ask --json and lcr eval record the settings; a variant reruns."""
    args = ["ask", str(two_parts.path), QUESTION, "-k", "4", "--llm", "smollm2-135m"]
    args += ["--device", "cpu", "--max-new-tokens", "12", "--json", "-q"]
    args += ["--set", "answer.passages=merged", "--set", "answer.order=rank"]
    res = CliRunner().invoke(cli, args, prog_name="lcr")
    assert res.exit_code == 0, res.stderr
    obj = json.loads(res.stdout)
    assert obj["answer_settings"] == {
        "order": "rank",
        "passages": "merged",
        "instruction": "plain",
        "not_found": "abstain",
        "evidence": "plain",
        "select": "bm25",  # bm25's measured default
        "budget": 450,
        "pool": 20,
        "support": 0.5,
        "term_zipf": 3.0,
        "check": "support",
        "max_new_tokens": 12,
        "step": "shared",
    }
    # the answer alone: the support check reads words and asks the LLM nothing by default
    assert obj["answer"] and obj["usage"]["calls"] == 1
    for ev in obj["evidence"]:
        assert ev["document"] in ("first-half.txt", "second-half.txt")

    data = tmp_path / "vt.jsonl"
    res = CliRunner().invoke(eval_group, ["generate", "vt", "--length", "400", "-o", str(data)])
    assert res.exit_code == 0
    base = [str(data), "-m", "bm25", "--limit", "1", "-k", "2", "--llm", "smollm2-135m"]
    base += ["--device", "cpu", "--max-new-tokens", "8", "--json", "-q"]
    out = tmp_path / "r.jsonl"
    first = CliRunner().invoke(eval_group, [*base, "--out", str(out)])
    assert first.exit_code == 0, first.output
    guess = [*base, "--out", str(out), "--set", "answer.not_found=guess"]
    second = CliRunner().invoke(eval_group, guess)
    assert json.loads(second.output)["new"] == 1  # another answer step: not "already done"
    again = CliRunner().invoke(eval_group, guess)
    assert json.loads(again.output)["new"] == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["answer_settings"]["not_found"] for r in records] == ["abstain", "guess"]
    assert all(r["answer_settings"]["max_new_tokens"] == 8 for r in records)
    assert all("text" in ev for r in records for ev in r["evidence"])
    assert "answer_found" in records[0]["metrics"]


def test_run_keys_of_default_runs_are_those_lcr_always_gave() -> None:
    """The typed settings changed how settings are held, not the keys of results files:
    these digests are what lcr 0.1.0 computed before the change (rerun nothing)."""
    models = Models()  # the default model ids; nothing is loaded
    ask = runner.plan_methods(["bm25"], models, runner.RunOptions(methods=["bm25"]))[0]
    only = runner.RunOptions(methods=["tfidf"], retrieval_only=True)
    # the default abstain became the support check (issue 40), then the check stopped
    # asking the LLM by default (no scoring call: one call, not two), then bm25 read
    # its measured selection of sentences by default, then selection kept the rank-1
    # item's sentences (issue 53), then the names floor withheld more (issue 53), then the
    # floor on words never read, then the quote about another subject, then no answer
    # without a quote, then a term the document never writes (issue 53): new runs each time;
    # 0.2.0 names every answer setting that decides, no legacy value left out (issue 71)
    assert ask.key == "5a046d713482350f"
    # tfidf's chunks follow paragraphs by default (issue 53): its build settings, so its key
    assert runner.plan_methods(["tfidf"], models, only)[0].key == "8665493ee01d74e0"


def test_the_chain_declares_each_setting_once_in_its_stage_and_the_docs_draw_it() -> None:
    """Issue 71: the answer step is one chain of named stages, written once as data; each
    stage declares its own few settings, their union is the step's (at most 12), and
    docs/architecture.md and docs/answer-step.md draw the same chain."""
    from lcr.answer.shared import ANSWER_SETTINGS, STAGES

    names = [st.name for st in STAGES]
    assert names == ["decide before reading", "read", "reply", "verify", "decide"]
    declared = [s.name for st in STAGES for s in st.settings.declared()]
    assert declared == [s.name for s in ANSWER_SETTINGS] == ANSWER_KEYS_IN_ORDER
    assert len(declared) <= 12
    root = Path(__file__).resolve().parents[1]
    architecture = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    reference = (root / "docs" / "answer-step.md").read_text(encoding="utf-8")
    for n, stage in enumerate(STAGES, 1):
        module = stage.run.__module__.rsplit(".", 1)[-1]
        assert f"{n} {stage.name}" in architecture and f"answer/{module}.py" in architecture
        assert f"{n}. {stage.name}" in reference and f"{module}.py" in reference
        for s in stage.settings.declared():
            assert f"`answer.{s.name}`" in reference


_CHOSEN_BY = re.compile(r"((?:bench/results|docs)/[\w./-]+\.md|bench/[\w/]+\.py)(?:#([\w-]+))?")


def _numeric_constants(path: Path) -> list[tuple[str, str]]:
    """Each module-level UPPER_CASE name given a number in ``path``, with the words beside
    it: its docstring, its line's comment, and the comment lines just above it (above the
    run of such constants it ends, so a comment may speak for several fitted together)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    body = ast.parse(source).body
    numeric: set[int] = set()
    found = []
    for i, node in enumerate(body):
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(value, ast.UnaryOp):
            value = value.operand
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Constant)):
            continue
        if not re.fullmatch(r"_?[A-Z][A-Z0-9_]*", target.id) or isinstance(value.value, bool):
            continue
        if not isinstance(value.value, (int, float)):
            continue
        numeric.add(node.lineno)
        words = [lines[node.lineno - 1].partition("#")[2]]
        after = body[i + 1] if i + 1 < len(body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            words.append(str(after.value.value))
        row = node.lineno - 2
        while row >= 0 and (row + 1 in numeric or lines[row].lstrip().startswith("#")):
            words.append(lines[row].partition("#")[2])
            row -= 1
        found.append((target.id, " ".join(words)))
    return found


def test_every_answer_constant_says_what_chose_it() -> None:
    """Issue 71: every tolerance of the answer step that is not a setting is a named constant
    with a line saying which measurement chose it (a results page and its section, or the
    script that measured it, that exist) or that none did ("not measured")."""
    from tests.test_docs import _anchors

    root = Path(__file__).resolve().parents[1]
    silent = []
    for path in sorted((root / "lcr" / "answer").glob("*.py")):
        for name, words in _numeric_constants(path):
            said = " ".join(words.split())
            pages = _CHOSEN_BY.findall(said)
            for page, anchor in pages:
                assert (root / page).is_file(), f"{path.name} {name}: no {page}"
                assert not anchor or anchor in _anchors(root / page), f"{name}: {page}#{anchor}"
            if not pages and "not measured" not in said:
                silent.append(f"{path.name}:{name}")
    assert not silent, f"constants that say nothing of what chose them: {silent}"

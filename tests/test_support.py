"""The support check of ``answer.not_found=abstain`` (lcr/answer/support.py): its pure signals, the
decision with a scripted LLM (supported, unsupported, borderline), its score in ``--json``
and eval records, the threshold setting's validation, and the unanswerable-set generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lcr import api
from lcr.answer.shared import (
    NOT_FOUND,
    AnswerResult,
    AnswerSettings,
    shared_answer,
)
from lcr.answer.support import (
    NAMES_FLOOR,
    SupportSignals,
    answer_overlap,
    check_messages,
    support_score,
)
from lcr.cli.main import cli
from lcr.errors import SettingError
from lcr.eval import dataset, runner
from lcr.eval.dataset import Document, GoldEvidence, Question
from lcr.eval.unanswerable import main as unanswerable_main
from lcr.eval.unanswerable import unanswerable
from lcr.evidence import EvidenceItem
from lcr.models.container import Models
from lcr.pipeline.plans import parse_sets
from lcr.store import Index
from tests.asking import ask_with
from tests.fakes import ForbiddenLLM, ScriptedLLM

QUESTION = "What did the bird throw down to Cinderella?"
TEXT = "The bird threw down a gold and silver dress to Cinderella."


def _items() -> list[EvidenceItem]:
    return [EvidenceItem("c0", 0, 0, 7.5, TEXT, [(0, len(TEXT))])]


def test_overlap_counts_the_answers_content_words_in_the_evidence() -> None:
    assert answer_overlap("a gold dress", TEXT) == 1.0
    assert answer_overlap("The golden slipper", TEXT) == 0.0
    assert answer_overlap("gold slipper", TEXT) == 0.5
    assert answer_overlap("Yes", TEXT) == 1.0  # nothing to look for


def test_coverage_is_the_share_of_the_questions_words_in_the_evidence() -> None:
    from lcr.answer.support import question_coverage

    assert question_coverage(QUESTION, TEXT) == 0.75  # bird, down, cinderella; "throw" is not
    assert question_coverage("Who wrote Premalekha?", TEXT) == 0.0
    # words asking for an account of the text are not looked for: no story says "plot"
    assert question_coverage("What is the plot of the story?", TEXT) == 1.0
    assert question_coverage("Describe the setting of the story.", TEXT) == 1.0
    assert question_coverage("Describe the dress in the story.", TEXT) == 1.0  # dress
    assert question_coverage("Describe the slipper in the story.", TEXT) == 0.0


def test_names_are_the_questions_runs_of_capitalised_words() -> None:
    from lcr.answer.support import question_names

    assert question_names("Who had more pen names, George Orwell or Nelson DeMille?") == [
        ("george", "orwell"),
        ("nelson", "demille"),
    ]
    # a possessive is dropped; numbers join a name but never make one alone
    assert question_names("Who sang on Maroon 5's sixth album, released 3/4 of 2010?") == [
        ("maroon", "5")
    ]
    # the first word is a name only when one follows it; function words are trimmed
    assert question_names("Katie sagona is known as what kind of actor?") == []
    assert question_names("Nominated in ten categories at the 38th Annual César Awards?") == [
        ("38th", "annual", "césar", "awards")
    ]
    assert question_names("Are Staten Island Catapult and This Is Elvis documentaries?") == [
        ("staten", "island", "catapult"),
        ("elvis",),
    ]


def test_paths_and_identifiers_are_names_too() -> None:
    """A manual's things are often lower case: "/srv", "Foo::Bar", "SET_NAMED". Asked of a
    manual that never says "srv", a question about /srv has its one name unread, so the
    names floor withholds whatever the model makes of unrelated excerpts (issue 53)."""
    from lcr.answer.support import name_coverage, question_names

    assert question_names("What does the /srv directory contain?") == [("srv",)]
    assert ("etc", "fstab") in question_names("Who reads /etc/fstab at boot?")
    assert ("foo", "bar") in question_names("How is the module Foo::Bar packaged?")
    assert ("set_named",) in question_names("what does set_named do?")
    assert ("r", "app") in question_names("where is R.app installed?")
    # initials are not identifiers
    assert question_names("Did R.D. Reid act in it?") == [("r", "d", "reid")]
    question = "What does the /srv directory contain?"
    assert name_coverage(question, "Complete repositories contain packages.") == 0.0
    assert name_coverage(question, "It is mounted on /srv/files at boot.") == 1.0
    # an identifier is spelt exactly: "src" is another directory, not "srv" misspelt
    assert name_coverage(question, "The src directory now uses automake.") == 0.0
    assert name_coverage("Is Srv Kumar a singer?", "Src Kumar sang.") == 1.0  # a person's


def test_name_coverage_looks_for_each_name_weighed_by_its_letters() -> None:
    from lcr.answer.support import name_coverage

    text = "Nelson DeMille's novels; Orwell wrote as George Orwell, born Eric Blair."
    assert name_coverage("Who had more pen names, George Orwell or Nelson DeMille?", text) == 1.0
    # the words of a name apart count half ("Elsie" and "Tobias Venn" for "Elsie Venn")
    assert name_coverage("Did Eric Orwell write novels?", text) == 0.5
    assert name_coverage("Did Eric Miller write novels?", text) == 0.0
    # each name weighs its letters: "george orwell" has 12 of the 23
    assert name_coverage("Did George Orwell meet Henry Miller?", text) == 12 / 23
    assert name_coverage("who wrote the novels?", text) == 1.0  # nothing to look for


def test_a_name_word_may_be_one_edit_apart() -> None:
    from lcr.answer.support import name_coverage, one_edit_apart

    assert one_edit_apart("curson", "curzon") and one_edit_apart("rio", "río")
    assert one_edit_apart("orwel", "orwell") and one_edit_apart("rand", "ran")
    assert not one_edit_apart("us", "is")  # two letters: as written only
    assert not one_edit_apart("orwell", "owel") and not one_edit_apart("geroge", "george")
    rand = "The 2016 campaign of Rand Paul began at the Galt House."
    assert name_coverage("Where did the Ran Paul campaign begin?", rand) == 1.0
    assert name_coverage("Where did the Ron Pool campaign begin?", rand) == 0.0


def test_a_name_begun_by_the_questions_first_word_may_go_without_it() -> None:
    from lcr.answer.support import name_coverage

    text = "Stephen A. Smith appears with Max Kellerman. Greyia has three species."
    assert name_coverage("Stephen Smith appears alongside whom?", text) == 1.0
    assert name_coverage("Between Greyia and Calibanus, which has more species?", text) == 13 / 22
    assert name_coverage("Who did Stephen Smith appear with?", text) == 0.5  # apart, not first


def test_names_are_also_looked_for_in_the_paragraphs_first_line() -> None:
    from lcr.answer.selection import paragraph_leads
    from lcr.answer.support import record_signals, signals_of

    source = (
        "Philip Kraft. Philip Kraft is a Swiss chemist. He has lectured at the University "
        "of Zurich.\n\nBasil Dean. Basil Dean was an English actor."
    )
    start = source.index("He has")
    end = source.index("\n\n")
    assert paragraph_leads([(start, end)], source) == ["Philip Kraft."]
    assert paragraph_leads([(0, 13)], source) == []  # the span is its paragraph's lead
    question = "Where did Philip Kraft lecture?"
    sentence = source[start:end]
    alone = signals_of(0.9, question, "Zurich", sentence)
    led = signals_of(0.9, question, "Zurich", sentence, leads=["Philip Kraft."])
    assert (alone.names, led.names) == (0.0, 1.0)
    # the question's words are looked for in the lead too; the answer's in the evidence alone
    assert (alone.coverage, led.coverage) == (0.0, 2 / 3)  # philip, kraft; not "lectured"
    assert led.overlap == alone.overlap == signals_of(0.9, question, "Zurich", sentence).overlap
    swiss = signals_of(0.9, question, "Swiss", sentence, leads=["Philip Kraft is Swiss."])
    assert swiss.overlap == 0
    record = {
        "question": question,
        "answer": "Zurich",
        "support_signals": {"p_yes": 0.9, "retrieval": 1.0},
        "evidence": [{"document": "d", "spans": [[start, end]], "text": sentence}],
    }
    assert record_signals(record, {"d": source}) == led.__class__(
        0.9, led.overlap, led.coverage, 1.0, 1.0
    )
    assert record_signals({"answer": "x"}, {}) is None  # no check, nothing to score


def test_the_shared_step_looks_for_names_in_the_evidences_paragraph_leads() -> None:
    source = "Philip Kraft. Philip Kraft is a chemist.\n\nHe has lectured at Zurich."
    start = source.index("He has")
    sentence = source[start:]
    item = EvidenceItem("s0", 0, 0, 1.0, sentence, [(start, len(source))])
    settings = AnswerSettings(check="support", not_found="abstain", support=0.0)
    question = "Where did Philip Kraft lecture?"
    llm = ScriptedLLM(yes_probability=0.9, words=4, after="[1] ")
    out = shared_answer(question, [item], llm, settings, source=source, names=["s"])
    assert out.signals is not None and out.signals.names == 0.0  # another paragraph's lead
    source = "Philip Kraft. Philip Kraft is a chemist. He has lectured at Zurich."
    start = source.index("He has")
    item = EvidenceItem("s0", 0, 0, 1.0, source[start:], [(start, len(source))])
    out = shared_answer(question, [item], llm, settings, source=source, names=["s"])
    assert out.signals is not None and out.signals.names == 1.0  # its own paragraph's lead


def test_names_weigh_in_the_score() -> None:
    from lcr.answer.support import NAMES_WEIGHT

    named = support_score(SupportSignals(0.8, 1.0, 1.0, None, names=1.0))
    unnamed = support_score(SupportSignals(0.8, 1.0, 1.0, None, names=0.0))
    assert NAMES_WEIGHT > 0 and named > unnamed


def test_score_never_falls_as_a_signal_rises_and_stays_a_probability() -> None:
    grid = (0.0, 0.2, 0.5, 0.8, 1.0)
    for field in ("p_yes", "overlap", "coverage", "names"):
        base = {"p_yes": 0.5, "overlap": 0.5, "coverage": 0.5, "names": 0.5}
        scores = [support_score(SupportSignals(**{**base, field: v})) for v in grid]
        assert scores == sorted(scores), field
        assert all(0.0 <= s <= 1.0 for s in scores)
    # the words the check reads each count (the model's P(yes) may weigh nothing)
    for field in ("overlap", "coverage", "names"):
        low = SupportSignals(**{"p_yes": 0.5, "overlap": 1.0, "coverage": 1.0, field: 0.0})
        assert support_score(low) < support_score(SupportSignals(0.5, 1.0, 1.0)), field


def test_check_is_a_follow_up_turn_of_the_answers_own_conversation() -> None:
    asked = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    msgs = check_messages(asked, 'a "gold" dress', QUESTION)
    assert msgs[:2] == asked  # the same prefix: a prefix cache reuses it
    assert msgs[2] == {"role": "assistant", "content": 'a "gold" dress'}
    assert "\"a 'gold' dress\"" in msgs[3]["content"] and QUESTION in msgs[3]["content"]


def _checked(question: str, threshold: float) -> tuple[ScriptedLLM, AnswerResult]:
    llm = ScriptedLLM(yes_probability=0.9, words=4, after="[1] ")
    settings = AnswerSettings(check="support", not_found="abstain", support=threshold, p_yes=True)
    return llm, shared_answer(question, _items(), llm, settings, source=TEXT, names=["s"])


# the same answer to a question the excerpt is about, and to one naming what it never
# mentions (Rapunzel: its name and one word missing); the threshold between
ELSEWHERE = "What did the bird throw down to Rapunzel?"
_, _SURE = _checked(QUESTION, 0.0)
_, _DOUBT = _checked(ELSEWHERE, 0.0)


@pytest.mark.parametrize(
    ("question", "threshold", "kept"),
    [
        (QUESTION, None, True),
        (ELSEWHERE, None, False),
        (ELSEWHERE, "at", True),
        (ELSEWHERE, "above", False),
    ],
    ids=["supported", "unsupported", "borderline-at", "borderline-below"],
)
def test_abstain_withholds_an_answer_scored_below_the_threshold(
    question: str, threshold: str | None, kept: bool
) -> None:
    assert _SURE.support is not None and _DOUBT.support is not None
    assert _SURE.support > 0.5 > _DOUBT.support  # the default threshold lies between
    between = (_SURE.support + _DOUBT.support) / 2
    _, probe = _checked(question, 0.0)
    assert probe.support is not None
    t = {None: between, "at": probe.support, "above": probe.support + 1e-6}[threshold]
    llm, out = _checked(question, min(t, 1.0))
    draft = "The bird threw down"  # the scripted answer: the excerpt's first words
    assert out.signals is not None and out.signals.p_yes == 0.9
    assert out.support == pytest.approx(support_score(out.signals))
    assert out.signals.overlap == 1.0 and out.signals.retrieval == 7.5
    assert out.signals.names == (1.0 if question == QUESTION else 0.0)
    assert out.usage.calls == 2  # the answer, then one scoring call
    assert llm.prompts[1][:2] == llm.prompts[0]  # the check reuses the answer's prompt
    assert llm.prompts[1][2] == {"role": "assistant", "content": draft}
    if kept:
        assert out.text == draft and out.withheld is None
    else:
        assert out.text == NOT_FOUND and out.withheld == draft


def test_abstain_answers_with_the_guess_prompt_and_instruct_keeps_the_old_one() -> None:
    for not_found, told in (("abstain", False), ("instruct", True), ("guess", False)):
        llm = ScriptedLLM(yes_probability=0.9)
        settings = AnswerSettings(check="support", not_found=not_found)  # type: ignore[arg-type]
        out = shared_answer(QUESTION, _items(), llm, settings, source=TEXT, names=["s"])
        system = llm.prompts[0][0]["content"]
        assert (f'reply exactly "{NOT_FOUND}"' in system) is told, not_found
        assert (out.support is not None) is (not_found == "abstain")
        assert out.usage.calls == 1  # the check asks the LLM nothing by default


def test_the_scoring_call_is_made_only_when_asked_and_weighs_as_the_constants_say() -> None:
    from lcr.answer.support import ASK_P_YES, P_YES_WEIGHT

    assert AnswerSettings().p_yes is ASK_P_YES is (P_YES_WEIGHT != 0.0)  # the default
    runs = {}
    for ask in (False, True):
        llm = ScriptedLLM(yes_probability=0.9, words=4, after="[1] ")
        settings = AnswerSettings(check="support", not_found="abstain", p_yes=ask)
        runs[ask] = shared_answer(QUESTION, _items(), llm, settings, source=TEXT, names=["s"])
        assert (
            runs[ask].usage.calls == (2 if ask else 1) and len(llm.prompts) == runs[ask].usage.calls
        )
    skipped, asked = runs[False].signals, runs[True].signals
    assert skipped is not None and asked is not None
    assert (skipped.p_yes, asked.p_yes) == (None, 0.9)
    assert skipped.to_json()["p_yes"] is None
    # the other signals are the same; the score differs only by P(yes)'s weighted term
    assert (skipped.overlap, skipped.coverage, skipped.names) == (
        asked.overlap,
        asked.coverage,
        asked.names,
    )
    if P_YES_WEIGHT == 0.0:
        assert runs[False].support == runs[True].support
    weighed = (-1.0, 1.0, 1.0, 1.0, 1.0)  # constants that do weigh P(yes)
    assert support_score(asked, weighed) > support_score(skipped, weighed)
    with pytest.raises(SettingError, match=r"unknown setting answer\.p_yes"):
        parse_sets(["answer.p_yes=true"])  # the constants decide, since 0.2.0 (issue 71)


def test_a_draft_saying_it_does_not_know_scores_zero_without_a_check() -> None:
    llm = ScriptedLLM(yes_probability=0.99, words=4, after="[1] ")
    item = EvidenceItem("c0", 0, 0, 1.0, "I do not know.", [(0, 14)])
    out = shared_answer(
        QUESTION, [item], llm, AnswerSettings(check="support"), source="I do not know.", names=[]
    )
    assert out.text == NOT_FOUND and out.support == 0.0 and out.usage.calls == 1


def test_no_evidence_scores_zero_without_a_call() -> None:
    out = shared_answer(
        QUESTION, [], ForbiddenLLM(), AnswerSettings(check="support"), source="", names=[]
    )
    assert out.text == NOT_FOUND and out.support == 0.0


def test_threshold_setting_is_validated() -> None:
    assert parse_sets(["answer.support=0.8"]).answer_values() == {"support": 0.8}
    for bad in ("answer.support=2", "answer.support=-0.1", "answer.support=high"):
        with pytest.raises(SettingError):
            parse_sets([bad])


def test_bad_threshold_on_the_command_line_is_one_line_exit_2(story: Index) -> None:
    res = CliRunner().invoke(
        cli, ["ask", str(story.path), QUESTION, "--set", "answer.support=1.5"], prog_name="lcr"
    )
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "answer.support" in res.stderr
    assert "Traceback" not in res.output


@pytest.fixture(scope="module")
def story(cinderella: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    folder = tmp_path_factory.mktemp("support")
    index, _ = api.plan_and_index(
        [cinderella], folder / "story.idx", ["bm25"], Models.with_objects(llm=ForbiddenLLM())
    )
    return index


def test_support_is_in_the_json_of_ask(story: Index) -> None:
    low = Models.with_objects(llm=ScriptedLLM(yes_probability=0.1, words=5))
    sets = ["answer.check=support", "answer.support=1"]
    # the scoring call, made when the support constants weigh P(yes)
    obj = ask_with(story, "bm25", QUESTION, low, sets, k=3, p_yes=True).to_json()
    assert obj["answer"] == NOT_FOUND and 0.0 < obj["support"] < 1.0
    assert obj["withheld_answer"] and obj["support_signals"]["p_yes"] == pytest.approx(0.1)
    high = Models.with_objects(llm=ScriptedLLM(yes_probability=0.9, words=5))
    # the scripted reply is the prompt's words, in no one run of the story: shown unquoted
    lifted = ["answer.check=support", "answer.support=0"]
    kept = ask_with(story, "bm25", QUESTION, high, lifted, k=3, unquoted="show").to_json()
    assert kept["answer"] != NOT_FOUND and kept["support"] == obj["support"]  # the same text
    assert "withheld_answer" not in kept
    assert set(kept["support_signals"]) == {"p_yes", "overlap", "coverage", "names", "retrieval"}
    assert kept["support_signals"]["p_yes"] is None  # not asked by default
    guess = api.plan_and_ask(story, "bm25", QUESTION, high, ["answer.not_found=guess"], k=3)
    assert "support" not in guess.to_json()  # no check, no score


def _corpora(cinderella: Path) -> tuple[Document, Document]:
    story = cinderella.read_text(encoding="utf-8")
    other = Path("examples/lighthouse.txt").read_text(encoding="utf-8")
    return Document("cinderella", "", story), Document("lighthouse", "", other)


def test_eval_records_carry_the_support_score(cinderella: Path, tmp_path: Path) -> None:
    doc, _ = _corpora(cinderella)
    data = tmp_path / "d.jsonl"
    dataset.save([Question("q1", QUESTION, ["a gold and silver dress"], [doc])], data)
    models = Models.with_objects(llm=ScriptedLLM(yes_probability=0.2, words=5))
    opts = runner.RunOptions(methods=["bm25", "gold"], out=tmp_path / "r.jsonl", k=2)
    with pytest.raises(Exception, match="gold evidence"):
        runner.run(data, models, opts)  # gold needs gold evidence: this question has none
    opts = runner.RunOptions(
        methods=["bm25"],
        out=tmp_path / "r.jsonl",
        k=2,
        sets=["answer.check=support", "answer.support=1"],
    )
    rec = runner.run(data, models, opts).records[0]
    assert 0.0 < rec["support"] < 1.0 and rec["answer"] == NOT_FOUND
    assert rec["withheld_answer"]
    assert set(rec["support_signals"]) == {"p_yes", "overlap", "coverage", "retrieval", "names"}


def test_unanswerable_asks_each_question_of_a_corpus_without_its_answer(
    cinderella: Path, tmp_path: Path
) -> None:
    story, light = _corpora(cinderella)
    qs = [
        Question("q1", QUESTION, ["a gold and silver dress"], [story]),
        Question(
            "q2",
            "Who kept the light?",
            ["Tobias Venn"],
            [light],
            [GoldEvidence("lighthouse", text="Tobias Venn")],
        ),
        # its answer is in both stories: no corpus lacks it, so it is left out
        Question("q3", "Who wept?", ["the"], [story]),
    ]
    made = unanswerable(qs)
    assert [(q.id, q.documents[0].id) for q in made] == [
        ("q1@lighthouse", "lighthouse"),
        ("q2@cinderella", "cinderella"),
    ]
    assert all(q.evidence == [] and q.task == "unanswerable" for q in made)
    assert made[0].meta == {"asked_of": "lighthouse", "answered_in": "cinderella"}
    data, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    dataset.save(qs, data)
    assert unanswerable_main([str(data), "-o", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in lines] == ["q1@lighthouse", "q2@cinderella"]
    assert [q.id for q in dataset.load(out)] == ["q1@lighthouse", "q2@cinderella"]


@pytest.mark.slow
def test_real_model_scores_support_on_the_answers_cached_prompt(story: Index, smollm: Any) -> None:
    """smollm2 end to end: the check's score and signals in the record, its scoring call
    (``p_yes``, a constant since 0.2.0) reading the answer's prompt from llama.cpp's
    prefix cache; through the CLI, a threshold of 1 withholds the answer and keeps it."""
    base = ["ask", str(story.path), QUESTION, "-k", "3", "--llm", "smollm2-135m"]
    base += [
        "--device",
        "cpu",
        "--max-new-tokens",
        "12",
        "--json",
        "-q",
        "--set",
        "answer.check=support",
    ]
    models = Models.with_objects(llm=smollm)
    sets = ["answer.check=support"]
    obj = ask_with(story, "bm25", QUESTION, models, sets, k=3, max_new_tokens=12, p_yes=True)
    out = obj.to_json()
    assert 0.0 <= out["support"] <= 1.0
    if out["answer"] != NOT_FOUND or "withheld_answer" in out:  # the model answered
        assert set(out["support_signals"]) == {"p_yes", "overlap", "coverage", "retrieval", "names"}
        assert out["usage"]["calls"] == 2
        if type(smollm).__name__.startswith("LlamaCpp"):  # the evidence is not encoded twice
            assert out["usage"]["cached_tokens"] > out["usage"]["prompt_tokens"] / 3
    # by default the check makes no call: the answer's is the only one
    strict = CliRunner().invoke(cli, [*base, "--set", "answer.support=1"], prog_name="lcr")
    withheld = json.loads(strict.stdout)
    assert withheld["answer"] == NOT_FOUND
    if "support_signals" in withheld:
        assert withheld["withheld_answer"] and withheld["support"] < 1.0
        assert withheld["support_signals"]["p_yes"] is None and withheld["usage"]["calls"] == 1


ORWELL = (
    "George Orwell bibliography. The bibliography of George Orwell includes journalism, "
    "essays and novels, written under his own name or under more than one of his pen "
    "names, George Orwell the best known."
)
PEN_NAMES = "Who had more pen names, George Orwell or Nelson DeMille?"


def test_a_question_whose_names_are_mostly_not_read_scores_zero_whatever_the_words() -> None:
    from lcr.answer.support import NAMES_FLOOR, name_coverage, signals_of

    # "George Orwell" is read, "Nelson DeMille" (the longer name) is not: 12 of 25 letters
    signals = signals_of(None, PEN_NAMES, "George Orwell", ORWELL)
    assert signals.names == pytest.approx(12 / 25) and signals.names < NAMES_FLOOR
    assert signals.overlap == 1.0 and signals.coverage == 5 / 7  # all but the missing name
    assert support_score(signals, names_floor=0.0) > 0.5  # the sum alone would give it
    assert support_score(signals) == 0.0
    # a name whose words are both read, apart, counts half: at the floor, not under it
    story = "Elsie was born in the storm. Her father, Tobias Venn, kept the light."
    question = "On what date was Elsie Venn born?"
    assert name_coverage(question, story) == NAMES_FLOOR
    assert support_score(signals_of(None, question, "the storm", story)) > 0.0


def test_the_names_floor_withholds_in_the_step_and_is_a_constant() -> None:
    item = EvidenceItem("c0", 0, 0, 3.0, ORWELL, [(0, len(ORWELL))])
    llm = ScriptedLLM(words=2, after="[1] ")
    floor = AnswerSettings(check="support", not_found="abstain")
    out = shared_answer(PEN_NAMES, [item], llm, floor, source=ORWELL, names=["s"])
    assert out.text == NOT_FOUND and out.withheld and out.support == 0.0
    lifted = floor.replace(names_floor=0.0)
    out = shared_answer(PEN_NAMES, [item], llm, lifted, source=ORWELL, names=["s"])
    assert out.text != NOT_FOUND and out.withheld is None
    assert out.support is not None and out.support > 0.5
    assert AnswerSettings().names_floor == NAMES_FLOOR
    with pytest.raises(SettingError, match=r"unknown setting answer\.names_floor"):
        parse_sets(["answer.names_floor=0"])  # a constant since 0.2.0 (issue 71)

"""Every answer on the words it stands on (lcr/answer/grounding.py): the quote lcr
locates for an answer in the evidence read (lcr.answer.quotes.answer_quote), shown and
cited under every answer given without the model's own quotes, and ``answer.check=located``
withholding an answer whose words no sentence read holds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from lcr.answer.grounding import ground
from lcr.answer.quotes import answer_keys, answer_quote, enough, missing_words
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.cli.main import main
from lcr.evidence import EvidenceItem
from lcr.pipeline.plans import answer_settings, parse_sets

SOURCE = (
    "Gull Rock\n\n"
    "The light on Gull Rock was first lit in 1858. Silas Prout brought the stores every "
    "Thursday in a broad-beamed boat called the Patience. He carried oil for the lamp.\n\n"
    "The keeper, Ambrose Kell, kept the log. Visitors came from Las Vegas in summer."
)
BOAT = "Silas Prout brought the stores every Thursday in a broad-beamed boat called the Patience."
Q = "What was the name of the boat that brought stores every Thursday?"


def item(text: str, cid: str = "c0", score: float = 1.0) -> EvidenceItem:
    start = SOURCE.index(text)
    return EvidenceItem(cid, 0, 0, score, text, [(start, start + len(text))])


PARAGRAPH = item(SOURCE[SOURCE.index("The light") : SOURCE.index("lamp.") + 5])
KEEPER = item(SOURCE[SOURCE.index("The keeper") :], "c1", 0.5)


def test_the_sentence_holding_the_answers_words_is_the_quote_as_the_source_has_it() -> None:
    quote = answer_quote("It was the Patience.", Q, [KEEPER, PARAGRAPH], SOURCE)
    assert quote is not None and quote.found_by == "lcr" and quote.item == "c0"
    ((start, end),) = quote.spans
    assert SOURCE[start:end] == quote.text == BOAT  # one sentence, not the paragraph


def test_an_answer_whose_words_were_not_read_has_no_quote() -> None:
    # the model's own knowledge in the evidence's vocabulary: "boat", "Thursday" are read,
    # "Endeavour" is not (the "use the cron command" from a file without "cron")
    assert answer_quote("The boat was the Endeavour.", Q, [PARAGRAPH, KEEPER], SOURCE) is None
    # a word read in one item and the other in another: no one place states the answer
    assert answer_quote("Ambrose Patience", "Who?", [PARAGRAPH, KEEPER], SOURCE) is None


def test_a_word_the_document_leaves_out_is_forgiven_from_three_words_on() -> None:
    las_vegas = answer_quote("Las Vegas, NV", "Where did visitors come from?", [KEEPER], SOURCE)
    assert las_vegas is not None and "Las Vegas" in las_vegas.text
    assert enough(2, 3, False) and not enough(1, 2, False) and enough(2, 2, False)


def test_words_the_question_gave_ground_nothing_new_so_one_is_enough() -> None:
    keys, from_question = answer_keys("Yes", "Was Ambrose Kell the keeper on Gull Rock?")
    assert from_question and "kell" in keys
    assert answer_keys("Ambrose Kell", "Was it Ambrose Kell or Silas Prout?")[1]
    assert answer_keys("The Patience", Q) == (["patience"], False)
    quote = answer_quote("Yes", "Was Ambrose Kell the keeper?", [PARAGRAPH, KEEPER], SOURCE)
    assert quote is not None and quote.text == "The keeper, Ambrose Kell, kept the log."


def test_a_quote_never_crosses_the_selections_gap() -> None:
    first = SOURCE.index("The light")
    boat = SOURCE.index("Silas")
    joined = EvidenceItem(
        "c0[x]",
        0,
        0,
        1.0,
        "The light on Gull Rock was first lit in 1858. \u2026 " + BOAT,
        [(first, first + 45), (boat, boat + len(BOAT))],
    )
    quote = answer_quote("The Patience in 1858", Q, [joined], SOURCE)
    assert quote is None  # the two words sit either side of the gap: not one run
    alone = answer_quote("The Patience", Q, [joined], SOURCE)
    assert alone is not None and alone.spans == ((boat, boat + len(BOAT)),)
    # the sentence that ends at the gap is located too: the gap mark is no part of it
    lit = answer_quote("1858", "When was the light on Gull Rock first lit?", [joined], SOURCE)
    assert lit is not None and lit.spans == ((first, first + 45),)


def _answered(text: str) -> AnswerResult:
    return AnswerResult(text, [PARAGRAPH, KEEPER], 0)


def _settings(*sets: str, **constants: Any) -> AnswerSettings:
    """``--set`` text, and the stages' ``constants`` replaced (``--set`` cannot)."""
    return answer_settings(None, parse_sets(list(sets))).replace(**constants)


def test_ground_quotes_every_given_answer_and_located_withholds_the_rest() -> None:
    default = _settings()
    given = ground(Q, _answered("The Patience"), default, SOURCE)
    assert given.text == "The Patience" and [q.text for q in given.quotes] == [BOAT]
    assert given.info["located"] == 1
    # an answer whose own words were read nowhere is withheld by default (the floor on
    # words never read); without the floor it is still withheld, having no quote, and
    # only unquoted=show gives it, with no quote
    assert ground(Q, _answered("The Endeavour"), default, SOURCE).text == NOT_FOUND
    lifted = _settings(located_floor=0.0)
    assert ground(Q, _answered("The Endeavour"), lifted, SOURCE).text == NOT_FOUND
    shown = _settings(located_floor=0.0, unquoted="show")
    unlocated = ground(Q, _answered("The Endeavour"), shown, SOURCE)
    assert unlocated.text == "The Endeavour" and unlocated.quotes == ()
    located = _settings("answer.check=located")
    held = ground(Q, _answered("The Endeavour"), located, SOURCE)
    assert held.text == NOT_FOUND and held.withheld == "The Endeavour"
    assert held.info["located"] == 0
    guess = _settings("answer.check=located", "answer.not_found=guess")
    assert ground(Q, _answered("The Endeavour"), guess, SOURCE).text == "The Endeavour"
    # not found, or the model's verified quotes already there: left as they are
    assert ground(Q, _answered(NOT_FOUND), located, SOURCE).quotes == ()
    by_model = dataclasses.replace(given.quotes[0], found_by="model")
    quoted = dataclasses.replace(_answered("The Patience"), quotes=(by_model,))
    assert ground(Q, quoted, located, SOURCE).quotes[0].found_by == "model"


def test_located_is_a_check_value_and_keys_its_runs() -> None:
    assert _settings("answer.check=located").choices()["check"] == "located"
    assert _settings().choices()["check"] == "support"  # 0.2.0: every deciding setting named


def test_the_real_model_answer_is_quoted_under_it_on_the_cli(
    smollm: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """smollm2-135m end to end: `lcr ask --json` gives every quote's exact span in
    source.txt and its file; the plain output shows it under the answer."""
    src = Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt"
    idx = tmp_path / "l.idx"
    with pytest.raises(SystemExit) as made:
        main(["index", str(src), "-o", str(idx), "-m", "bm25", "-q"])
    assert made.value.code == 0
    capsys.readouterr()
    question = "What was the name of the boat that brought stores to Gull Rock every Thursday?"
    args = ["ask", str(idx), question, "-m", "bm25", "--llm", "smollm2-135m"]
    with pytest.raises(SystemExit) as asked:
        main([*args, "--json"])
    assert asked.value.code == 0
    record = json.loads(capsys.readouterr().out)
    source = (idx / "source.txt").read_text(encoding="utf-8")
    assert "Patience" in record["answer"]  # greedy smollm2 gets this one right
    assert record["quotes"], record["answer"]
    for quote in record.get("quotes", []):
        start, end = quote["span"]
        assert source[start:end] == quote["text"] and quote["document"] == "lighthouse.txt"
        assert quote["found_by"] == "lcr"
    with pytest.raises(SystemExit):
        main(args)
    plain = capsys.readouterr().out
    for quote in record.get("quotes", []):
        assert "\u201c" + quote["text"].split()[0] in plain and "-- lighthouse.txt" in plain


def test_the_questions_verb_in_another_tense_is_the_questions_word() -> None:
    # #73: the README's --each example; "brought" is the question's "bring", so the
    # quote must hold the answer's own words (branch, hazel, bush), not the verb's tense
    source = (
        "He broke off the branch and took it with him. When he reached home he gave to "
        "the step-daughters the things which they had wished for, and to cinderella he "
        "gave the branch from the hazel-bush."
    )
    gave = source[source.index("to cinderella") :]
    evidence = [EvidenceItem("c0", 0, 0, 1.0, source, [(0, len(source))])]
    question = "What did the father bring Cinderella from his journey?"
    answer = AnswerResult("The father brought the branch from the hazel-bush.", evidence, 0)
    shown = ground(question, answer, AnswerSettings(), source)
    assert shown.text == answer.text, shown.info
    (quote,) = shown.quotes
    assert gave in quote.text
    assert answer_keys("He brought it.", "What did he bring?") == (["bring"], True)
    # a past tense the question does not give is still the answer's own word
    assert "sold" in missing_words("She sold it.", "What did she do with the box?", [source])

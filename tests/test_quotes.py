"""Answers that quote (answer.check=quote): the reply split into answer and quotes,
each quote found in the evidence read and in source.txt, the answer's words found in
its quotes, and the shared step withholding an answer whose quote does not hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from lcr.answer.quotes import (
    Tolerance,
    check_quotes,
    locate,
    missing_words,
    normalise,
    split_reply,
)
from lcr.answer.shared import NOT_FOUND, ORIGINAL, AnswerSettings, shared_answer
from lcr.errors import SettingError
from lcr.evidence import EvidenceItem
from lcr.models.base import Generation, Message
from lcr.pipeline.plans import answer_settings, parse_sets
from lcr.testing import ScriptedLLM

SOURCE = (
    "Version numbers\n\n"
    "The version number of a package has four components, read left to right. "
    "The epoch is a single \u201csmall\u201d unsigned integer \u2014 it may be omitted.\n\n"
    "Silas Prout brought the stores every Thursday in a broad-beamed boat called the "
    "Patience."
)


def chunk(start: int, end: int, cid: str = "c0") -> EvidenceItem:
    return EvidenceItem(cid, 0, 0, 1.0, SOURCE[start:end], [(start, end)])


WHOLE = chunk(0, len(SOURCE))


def test_normalise_maps_each_character_back() -> None:
    text, where = normalise("  A\u201cB\u201d \n\t C\u2026")
    assert text == 'a"b" c...'
    assert [where[i] for i in range(len(text))] == [
        2,
        3,
        4,
        5,
        10,
        10,
        11,
        11,
        11,
    ]  # a blank: the next character


@pytest.mark.parametrize(
    ("reply", "answer", "quotes"),
    [
        (
            "Answer: four\nQuote: The version number has four components.",
            "four",
            ("The version number has four components",),
        ),
        (
            'The boat was the Patience. Quote: "Silas Prout brought the stores."',
            "The boat was the Patience.",
            ("Silas Prout brought the stores",),
        ),
        ("Roofing slate", "Roofing slate", ()),
        ("He said: yes, quoted", "He said: yes, quoted", ()),
        (
            "x\n**Quote:** \u201cone two three\u201d\n- Quote 2: four five six",
            "x",
            ("one two three", "four five six"),
        ),
    ],
)
def test_split_reply(reply: str, answer: str, quotes: tuple[str, ...]) -> None:
    parsed = split_reply(reply)
    assert (parsed.answer, parsed.quotes) == (answer, quotes)


def test_a_quote_is_found_despite_case_blanks_and_quote_marks() -> None:
    quote = 'the epoch is a single "small" unsigned integer - it may be omitted'
    found = locate(quote, [WHOLE], SOURCE)
    assert found is not None and found.item == "c0"
    ((s, e),) = found.spans
    assert SOURCE[s:e] == found.text
    assert found.text.startswith("The epoch") and found.text.endswith(
        "omitted."
    )  # its closing stop


def test_an_ellipsis_elides_between_pieces_found_in_order() -> None:
    found = locate("The version number ... has four components", [WHOLE], SOURCE)
    assert found is not None and len(found.spans) == 2
    assert [SOURCE[s:e] for s, e in found.spans] == ["The version number", "has four components"]
    assert locate("has four components ... The version number", [WHOLE], SOURCE) is None


def test_a_changed_word_or_a_short_quote_is_not_a_quote() -> None:
    assert locate("The version number has five components", [WHOLE], SOURCE) is None
    assert locate("the Patience", [WHOLE], SOURCE) is None  # too short to show anything


def test_the_models_own_words_are_never_the_documents() -> None:
    """Up to two words of the model's own are let pass (a name for "he"), but the quote
    is the document's text under the runs found: the changed word is not in it."""
    found = locate("The version number of a package has five components", [WHOLE], SOURCE)
    assert found is not None and found.text == "The version number of a package has"
    question = "How many parts does a package version have?"
    reply = "Answer: five\nQuote: The version number of a package has five components."
    assert check_quotes(reply, question, [WHOLE], SOURCE).problem == (
        "answer words not in the quote: 5"
    )
    added = locate("Silas Prout, the keeper, brought the stores every Thursday", [WHOLE], SOURCE)
    assert added is not None and added.text == "Silas Prout brought the stores every Thursday"
    assert locate("Prout and a boy and a dog brought the stores", [WHOLE], SOURCE) is None


def test_only_what_was_read_counts() -> None:
    first = chunk(0, 90)  # the title and the first sentence
    assert locate("Silas Prout brought the stores", [first], SOURCE) is None
    later = chunk(159, len(SOURCE), "c1")
    found = locate("Silas Prout brought the stores", [first, later], SOURCE)
    assert found is not None and found.item == "c1"


def test_a_summary_quote_must_be_the_documents_words() -> None:
    """A summary's own words are not the document's: its quote counts only where the
    text its spans rest on holds it too."""
    summary = EvidenceItem(
        "s1",
        0,
        1,
        1.0,
        "Prout's boat, the Patience, came weekly with stores.",
        [(159, len(SOURCE))],
    )
    assert locate("the Patience, came weekly with stores", [summary], SOURCE) is None
    copied = EvidenceItem(
        "s2", 0, 1, 1.0, "He writes: brought the stores every Thursday.", [(159, len(SOURCE))]
    )
    found = locate("brought the stores every Thursday", [copied], SOURCE)
    assert found is not None and SOURCE[found.spans[0][0] : found.spans[0][1]] == found.text


@pytest.mark.parametrize(
    ("answer", "missing"),
    [
        ("4", []),  # "four" in the quote
        ("four components", []),
        ("Four.", []),
        ("five", ["5"]),
        ("use the cron command", ["use", "cron", "command"]),
        ("The package's version has four components", []),  # question words and a plural
        ("Yes", []),
    ],
)
def test_answer_words_must_be_in_the_quote(answer: str, missing: list[str]) -> None:
    question = "How many parts does a package version have?"
    quote = "The version number of a package has four components"
    assert missing_words(answer, question, [quote]) == missing


def test_check_quotes_verdicts() -> None:
    question = "How many parts does a package version have?"
    good = check_quotes(
        "Answer: 4\nQuote: The version number of a package has four components.",
        question,
        [WHOLE],
        SOURCE,
    )
    assert good.holds and good.answer == "4" and len(good.quotes) == 1
    assert check_quotes("4", question, [WHOLE], SOURCE).problem == "no quote"
    bad = check_quotes("4\nQuote: The version has 4 parts.", question, [WHOLE], SOURCE)
    assert bad.problem == "quote not in the evidence" and bad.unfound == (
        "The version has 4 parts",
    )
    wrong = check_quotes(
        "Answer: 3\nQuote: The version number of a package has four components.",
        question,
        [WHOLE],
        SOURCE,
    )
    assert wrong.problem == "answer words not in the quote: 3"


class Replying(ScriptedLLM):
    """Writes a fixed reply (the control flow of the check; the real-model test below
    covers the same path with smollm2-135m)."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self.reply = reply

    def generate(self, messages: Sequence[Message], **kw: Any) -> Generation:
        self.prompts.append(list(messages))
        on_text = kw.get("on_text")
        if on_text is not None:
            on_text(self.reply)
        self.usage.add(10, 5)
        return Generation(self.reply, 10, 5)


class Heard:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.tokens = 0

    def reading(self, tokens: int) -> None:
        self.tokens = tokens

    def text(self, piece: str) -> None:
        self.pieces.append(piece)


def resolve_answer_settings(sets: list[str]) -> AnswerSettings:
    """lcr's answer settings with the quote check (``answer.check=quote`` unless ``sets``
    name a check), ``--set`` parsed once as a run does."""
    given = list(sets)
    if not any(s.startswith("answer.check=") for s in given):
        given.insert(0, "answer.check=quote")
    return answer_settings(None, parse_sets(given))


def ask(reply: str, *sets: str, stream: Heard | None = None, **constants: Any) -> Any:
    """The shared step's answer to ``reply`` with ``sets`` (``--set``) and ``constants``
    (a stage's constants, which ``--set`` cannot reach)."""
    llm = Replying(reply)
    out = shared_answer(
        "How many parts does a package version have?",
        [WHOLE],
        llm,
        resolve_answer_settings(list(sets)).replace(**constants),
        source=SOURCE,
        names=["policy.txt"],
        stream=stream,
    )
    return out, llm


def test_the_shared_step_gives_a_quoted_answer_and_withholds_the_rest() -> None:
    heard = Heard()
    out, llm = ask(
        "Answer: four\nQuote: The version number of a package has four components.", stream=heard
    )
    assert out.text == "four" and out.withheld is None and len(out.quotes) == 1
    assert "Quote:" in llm.prompts[0][-1]["content"]  # the prompt asks for it
    assert heard.tokens > 0 and heard.pieces == []  # not streamed before it is checked
    assert out.support is None and "support" not in out.support_json()
    withheld, _ = ask("Answer: three\nQuote: The version number has three components.")
    assert withheld.text == NOT_FOUND and withheld.withheld == "three" and not withheld.quotes
    record = withheld.support_json()
    assert record["quote_check"]["problem"] == "quote not in the evidence"
    assert record["quote_check"]["reply"].startswith("Answer: three\nQuote:")  # rerun offline
    assert record["withheld_answer"] == "three"


def test_guess_never_withholds_and_support_check_keeps_the_old_prompt() -> None:
    guessed, _ = ask("three\nQuote: no such sentence at all", "answer.not_found=guess")
    assert guessed.text == "three" and guessed.withheld is None
    assert guessed.quote_check is not None and not guessed.quote_check.holds
    heard = Heard()
    old, llm = ask("three", "answer.check=support", "answer.support=0", stream=heard)
    assert "Quote" not in llm.prompts[0][0]["content"] and heard.pieces == ["three"]
    assert old.text == "three" and old.quote_check is None and old.support is not None
    assert ORIGINAL.check == "support"  # the original prompt never asked for quotes


def test_run_keys_name_the_check() -> None:
    assert answer_settings(None, parse_sets([])).check == "support"  # the default (issue 53)
    assert resolve_answer_settings([]).choices()["check"] == "quote"
    assert "support" not in resolve_answer_settings([]).choices()  # not deciding
    assert ORIGINAL.choices()["check"] == "support"
    both = resolve_answer_settings(["answer.check=both"]).choices()
    assert both["check"] == "both" and "support" in both


def test_real_model_reply_is_checked_against_the_evidence(smollm: Any) -> None:
    """smollm2-135m through the same path: its reply split, its quotes (if any) found in
    the evidence and cited as exact slices of the source, or the answer withheld with
    the reason; whatever it writes, no answer is given without a quote that holds."""
    llm = smollm
    out = shared_answer(
        "What was the boat that brought the stores called?",
        [WHOLE],
        llm,
        resolve_answer_settings([]),
        source=SOURCE,
        names=["policy.txt"],
    )
    assert out.usage.calls == 1 and out.quote_check is not None
    if out.text == NOT_FOUND:
        assert out.quote_check.problem or out.withheld is None
        assert not out.quotes
    else:
        assert out.quote_check.holds and out.quotes
        for quote in out.quotes:
            assert " \u2026 ".join(SOURCE[s:e] for s, e in quote.spans) == quote.text
        assert not missing_words(out.text, "the boat stores called", [q.text for q in out.quotes])


def test_the_tolerance_decides_what_counts_as_a_quote() -> None:
    elided = "The version number ... has four components"
    assert locate(elided, [WHOLE], SOURCE, Tolerance(pieces=1)) is None
    assert locate(elided, [WHOLE], SOURCE, Tolerance(pieces=2)) is not None
    own = "Silas Prout, the keeper, brought the stores every Thursday"
    assert locate(own, [WHOLE], SOURCE, Tolerance(added=1)) is None
    assert locate(own, [WHOLE], SOURCE, Tolerance(added=2)) is not None
    far = "The version number ... brought the stores every Thursday"
    assert locate(far, [WHOLE], SOURCE, Tolerance(spread=100)) is None
    assert locate(far, [WHOLE], SOURCE, Tolerance(spread=1000)) is not None
    assert locate("the Patience", [WHOLE], SOURCE, Tolerance(min_words=2)) is not None


def test_where_the_answers_words_must_be() -> None:
    first, later = chunk(0, 90), chunk(159, len(SOURCE), "c1")
    question = "When did the stores come?"
    reply = "Answer: every Thursday\nQuote: Silas Prout brought the stores"
    for where, holds in (("quote", False), ("item", True), ("evidence", True)):
        tol = Tolerance(answer_in=where)  # type: ignore[arg-type]
        assert check_quotes(reply, question, [first, later], SOURCE, tol).holds is holds
    four = "Answer: four\nQuote: Silas Prout brought the stores"  # four is in the other one
    assert not check_quotes(
        four, question, [first, later], SOURCE, Tolerance(answer_in="item")
    ).holds
    # read elsewhere, "four" still needs a quote that holds it and speaks of what was
    # asked: "has four components" is not when the stores came (issue 73)
    assert not check_quotes(
        four, question, [first, later], SOURCE, Tolerance(answer_in="evidence")
    ).holds


def test_the_quote_checks_tolerance_is_the_verify_stages_constants() -> None:
    assert AnswerSettings().quote_tolerance() == Tolerance(answer_in="evidence")
    chosen = AnswerSettings().replace(quote_pieces=2, quote_answer_in="item")
    assert chosen.quote_tolerance().pieces == 2 and chosen.quote_tolerance().answer_in == "item"
    assert not any(k.startswith("quote_") for k in chosen.choices())
    for gone in ("answer.quote_pieces=2", "answer.quote_fallback=support"):  # 0.2.0
        with pytest.raises(SettingError, match=r"unknown setting answer\.quote_"):
            resolve_answer_settings([gone])


def test_a_quote_copied_across_the_selections_gap_is_two_pieces() -> None:
    """Selected sentences are read side by side, joined by the gap mark: a quote the model
    copies across it ("The Bachelor (1990 film). It is based on ...", HotpotQA dev) is
    the two pieces of the document, however far apart they stand there."""
    later = SOURCE.index("Silas")
    joined = EvidenceItem(
        "s0", 0, 0, 1.0, SOURCE[:15] + " \u2026 " + SOURCE[later:], [(0, 15), (later, len(SOURCE))]
    )
    quote = "Version numbers. Silas Prout brought the stores every Thursday"
    found = locate(quote, [joined], SOURCE, Tolerance(spread=100))  # near in what was read
    assert found is not None and found.spans[0] == (0, 15) and found.spans[1][0] == later
    assert found.text == "Version numbers \u2026 Silas Prout brought the stores every Thursday"


def test_blocks_alignment_is_not_pulled_astray_by_a_word_put_in_front() -> None:
    """The 1.5B model copies the excerpt's number and adds "The" to a title line (HotpotQA
    dev: "[4] The PlayStation 2. The PlayStation 2 (PS2) is ..."): matching the longest
    run at each word in turn takes "The version" for the start and loses the rest;
    the longest common run first finds the sentence and the title before it."""
    quote = "4] The Version numbers. The version number of a package has four components"
    assert locate(quote, [WHOLE], SOURCE) is None
    found = locate(quote, [WHOLE], SOURCE, Tolerance(align="blocks"))
    assert found is not None and found.text.startswith("Version numbers")
    assert "The version number of a package has four components" in found.text
    assert (
        locate("The version number has five parts", [WHOLE], SOURCE, Tolerance(align="blocks"))
        is None
    )

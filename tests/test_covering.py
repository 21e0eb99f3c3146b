"""Quotes for long answers (lcr/answer/covering.py): an answer of several parts, or a
summary, grounded by a few located quotes that together hold its words, with the share
they hold in ``info.located``; short answers keep the single-run rule unchanged."""

from __future__ import annotations

from typing import Any

from lcr.answer.covering import (
    COVER_SHARE,
    LOCATED_FLOOR,
    LONG_FROM,
    MAX_QUOTES,
    cover_quotes,
    long_keys,
    root,
)
from lcr.answer.grounding import ground, restates_question, words_read
from lcr.answer.quotes import answer_keys
from lcr.answer.selection import PIECE_GAP
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.cli.output import _located_line
from lcr.evidence import EvidenceItem
from lcr.pipeline.plans import answer_settings, parse_sets

# sentences of examples/lighthouse.txt, two paragraphs as the source has them
BIRTH = (
    "On the ninth of February, 1882, in a gale that kept the Patience in Harrowmouth for "
    "eight days, Margaret Venn gave birth to a daughter in the keeper's cottage. There was "
    "no doctor and no midwife. Tobias delivered the child himself and then went up the one "
    "hundred and twelve steps to wind the clockwork because it was time. They called the "
    "girl Elsie."
)
KEY = (
    "Jonas Birch, the blacksmith, died in April 1921, and his forge on Quay Lane was sold. "
    "On the ninth of May, 1921, he picked up the brass doorstop, found it heavier than it "
    "looked, and heard something small rattle inside it when he tipped it over. Among the "
    "lead shot inside was a small brass key, green with age. Toby knew at once what it was."
)
STORES = (
    "Silas Prout brought the stores every Thursday in a broad-beamed boat called the "
    "Patience. He carried oil for the lamp, flour, tea, salt pork, letters and newspapers."
)
SOURCE = "The Keeper of Gull Rock\n\n" + BIRTH + "\n\n" + KEY + "\n\n" + STORES


def chunk(text: str, cid: str) -> EvidenceItem:
    start = SOURCE.index(text)
    return EvidenceItem(cid, 0, 0, 1.0, text, [(start, start + len(text))])


ITEMS = [chunk(BIRTH, "c0"), chunk(KEY, "c1")]
QUESTION = "When was Elsie born, who delivered her, and where was the key found?"
TWO_PARTS = (
    "Elsie was born in February 1882 in the keeper's cottage, and Tobias delivered her. "
    "The key was found among the lead shot of the brass doorstop from Birch's forge in 1921."
)


def test_a_many_part_answer_gets_a_quote_for_each_part_each_a_run_of_the_source() -> None:
    cover = cover_quotes(TWO_PARTS, QUESTION, ITEMS, SOURCE)
    assert cover is not None and cover.grounded and len(cover.quotes) >= 2
    for quote in cover.quotes:
        ((start, end),) = quote.spans
        assert SOURCE[start:end] == quote.text and quote.found_by == "lcr"
    texts = [q.text for q in cover.quotes]
    # in the answer's order: the birth's sentence first, then the key's
    assert texts[0].startswith("On the ninth of February, 1882")
    # the question's name is in the quote's item, a sentence away ("... the girl Elsie")
    assert cover.on_question and not any("Elsie" in t for t in texts)
    assert any("brass key" in t or "brass doorstop" in t for t in texts[1:])
    assert cover.share >= COVER_SHARE and cover.found <= cover.keys
    assert {i.id for i in ITEMS} == {q.item for q in cover.quotes}


def test_the_same_answer_over_another_text_is_not_grounded() -> None:
    # the answer's words are not in what was read: the stores paragraph shares "Patience"
    # and "Harrowmouth"-like names with the story, not the answer's facts
    other = [chunk(STORES, "c2")]
    cover = cover_quotes(TWO_PARTS, QUESTION, other, SOURCE)
    assert cover is not None and not cover.grounded and cover.quotes == ()
    assert "1882" in cover.missing and "tobias" in cover.missing


def test_each_quote_must_add_two_words_and_there_are_at_most_four() -> None:
    # "1921" alone would add one word from the Birch sentence: not a quote of its own
    answer = "Margaret Venn gave birth to a daughter in a gale, in 1921."
    cover = cover_quotes(answer, "What did Margaret do?", ITEMS, SOURCE)
    assert cover is not None and [q.item for q in cover.quotes] == ["c0"]
    assert cover.missing == ("1921",) and cover.grounded  # 5 of 6 words
    assert len(cover.quotes[0].text) < len(BIRTH)  # a run, not the paragraph
    # five parts, in sentences no run of two joins: four quotes, the fifth part missing
    many = " ".join(
        ["Margaret Venn gave birth in a gale.", "Tobias climbed a hundred and twelve steps.",
         "Jonas Birch the blacksmith died.", "Among the lead shot was a small key.",
         "Silas Prout brought stores on Thursdays."]
    )  # fmt: skip
    capped = cover_quotes(many, "What happened?", [*ITEMS, chunk(STORES, "c2")], SOURCE)
    assert capped is not None and len(capped.quotes) == MAX_QUOTES
    assert 0.75 < capped.share < 1 and len(capped.missing) >= 2


def test_short_answers_keep_the_single_run_rule() -> None:
    short = "On the ninth of February, 1882"
    keys, _ = answer_keys(short, QUESTION)
    assert len(keys) == LONG_FROM - 1
    assert cover_quotes(short, QUESTION, ITEMS, SOURCE) is None
    # a date is quoted from a sentence that speaks of what was asked (issue 73): this one
    # says "gave birth to a daughter", not "Elsie" or "born"
    birth = "When did Margaret Venn give birth to a daughter?"
    out = ground(birth, AnswerResult(short, ITEMS, 0), _settings(), SOURCE)
    assert len(out.quotes) == 1 and out.info["located"] == 1
    assert "located_words" not in out.info
    elsie = ground(QUESTION, AnswerResult(short, ITEMS, 0), _settings(), SOURCE)
    assert elsie.text == NOT_FOUND and not elsie.quotes


def test_a_sentence_before_the_selections_gap_mark_is_quoted_without_it() -> None:
    first = BIRTH.split(". ")[0] + "."
    last = "Among the lead shot inside was a small brass key, green with age."
    a, b = SOURCE.index(first), SOURCE.index(last)
    joined = EvidenceItem(
        "c0[x]", 0, 0, 1.0, first + PIECE_GAP + last, [(a, a + len(first)), (b, b + len(last))]
    )
    answer = "Margaret Venn gave birth in the gale; the small brass key was green with age."
    cover = cover_quotes(answer, "What happened?", [joined], SOURCE)
    assert cover is not None and [q.text for q in cover.quotes] == [first, last]


def test_words_are_found_in_another_tense_and_frame_words_are_not_looked_for() -> None:
    assert root("moves") == root("moved") == root("move")
    assert root("invaded") == root("invade") and root("stories") == root("story")
    assert root("glass") == "glass" and root("its") == "its"
    keys = long_keys("Harold Tate is a character in the story who is described as drunk", "Who?")
    assert keys == [root("harold"), root("tate"), root("drunk")]
    # a single letter names nothing, a single digit is a number of the answer
    assert long_keys("The T.R.S. Aphrodite, wound every four hours", "Where?") == [
        root("aphrodite"),
        root("wound"),
        "4",
        root("hours"),
    ]


def _settings(*sets: str, **constants: Any) -> AnswerSettings:
    """``--set`` text, and the stages' ``constants`` replaced (``--set`` cannot)."""
    return answer_settings(None, parse_sets(list(sets))).replace(**constants)


def test_ground_records_the_share_and_located_withholds_below_it() -> None:
    grounded = ground(QUESTION, AnswerResult(TWO_PARTS, ITEMS, 0), _settings(), SOURCE)
    assert len(grounded.quotes) >= 2 and grounded.text == TWO_PARTS
    found, total = map(int, grounded.info["located_words"].split("/"))
    assert grounded.info["located"] == round(found / total, 2) >= COVER_SHARE
    # read against another paragraph: without the floor on words never read, and shown
    # when unquoted, given without a quote, its share said
    other = [chunk(STORES, "c2")]
    lifted = _settings(located_floor=0.0, unquoted="show")
    given = ground(QUESTION, AnswerResult(TWO_PARTS, other, 0), lifted, SOURCE)
    assert given.text == TWO_PARTS and given.quotes == () and given.info["located"] < 0.5
    held = ground(
        QUESTION,
        AnswerResult(TWO_PARTS, other, 0),
        _settings("answer.check=located", located_floor=0.0),
        SOURCE,
    )
    assert held.text == NOT_FOUND and held.withheld == TWO_PARTS
    assert held.info["located"] == given.info["located"] and "unlocated" in held.info


def test_a_terminal_says_how_much_of_a_long_answer_its_quotes_hold() -> None:
    partial = {"located": 0.8, "located_words": "8/10", "unlocated": "autumn, 1897"}
    assert _located_line(partial, True) == (
        "(the quotes hold 8 of the answer's 10 words; not in them: autumn, 1897)"
    )
    assert "no quote" in _located_line({**partial, "located_words": "2/10"}, False)
    assert _located_line({"located": 1.0, "located_words": "9/9"}, True) == ""
    assert _located_line({"located": 1}, True) == ""  # a short answer: its quote says it


def test_quotes_that_never_name_what_was_asked_do_not_ground_it() -> None:
    # another document's sentences copied, the question's name left to the question
    answer = "She gave birth to a daughter in a gale; the blacksmith died and the forge was sold."
    off = cover_quotes(answer, "What happens to Wass through the story?", ITEMS, SOURCE)
    assert off is not None and off.share == 1.0 and len(off.quotes) == 2
    assert not off.on_question and not off.grounded
    on = cover_quotes(answer, "What happened to Margaret and Jonas Birch?", ITEMS, SOURCE)
    assert on is not None and on.on_question and on.grounded
    out = ground("What happens to Wass?", AnswerResult(answer, ITEMS, 0), _settings(), SOURCE)
    assert out.quotes == () and out.info["off_question"] == 1 and out.info["located"] == 1.0
    assert out.text == NOT_FOUND  # quotes that never name Wass are not shown as its quotes
    assert "never name what was asked" in _located_line(out.info, False)


def test_an_answer_from_words_never_read_is_withheld_by_default() -> None:
    """A long answer none of whose own words the text read holds is the model's own
    knowledge (issue 53: "R is named R because it was created by the R Foundation" from
    R's manuals); the default floor withholds it, with its share recorded, and 0 gives it."""
    known = "Elsie was born in Paris in 1850, daughter of a watchmaker and a singer."
    other = [chunk(STORES, "c2")]
    held = ground(QUESTION, AnswerResult(known, other, 0), _settings(), SOURCE)
    assert held.text == NOT_FOUND and held.withheld == known
    assert held.info["located"] < LOCATED_FLOOR and "paris" in held.info["unlocated"]
    shown = _settings(located_floor=0.0, unquoted="show")
    lifted = ground(QUESTION, AnswerResult(known, other, 0), shown, SOURCE)
    assert lifted.text == known
    # guessing withholds nothing, whatever the floor
    guessed = ground(
        QUESTION, AnswerResult(known, other, 0), _settings("answer.not_found=guess"), SOURCE
    )
    assert guessed.text == known
    # read against its own paragraphs, the same kind of answer stands on its quotes
    assert ground(QUESTION, AnswerResult(TWO_PARTS, ITEMS, 0), _settings(), SOURCE).quotes


def test_an_answer_that_only_restates_the_question_is_withheld() -> None:
    """Its located "quote" would be any sentence holding the question's words ("A list is a
    set of numbers" under "The gnuplot command to set the number of contour levels to 10
    is `set contour levels 10`"): the answer says nothing the text said."""
    question = "Which gnuplot command sets the number of contour levels to 10?"
    restated = (
        "The gnuplot command to set the number of contour levels to 10 is `set contour levels 10`."
    )
    assert restates_question(restated, question)
    assert restates_question(
        "Fast-food", "What genre is the novel the fast-food chain is named after?"
    )
    assert not restates_question("set cntrparam levels 10", question)  # "cntrparam" is new
    assert not restates_question("Yes", "Are Staten Island Catapult and This Is Elvis both films?")
    assert not restates_question(
        "Nelson DeMille", "Who wrote more, George Orwell or Nelson DeMille?"
    )
    # a name the question gives may be the answer: a single called as its album is
    # one of two names the question compares is a pick, not a restatement
    assert not restates_question("Greyia", "Between Greyia and Calibanus, which has more species?")
    assert not restates_question("Ross Case", "Of Ross Case and Slobodan Zivojinovic, who won?")
    # a name the question gives for another reason is (issue 53's eighth manual question)
    foo = "What should the Debian package of the Perl module Foo::Bar be named?"
    assert restates_question("Foo::Bar", foo) and not restates_question("libfoo-bar-perl", foo)
    stores = "What did Silas Prout bring every Thursday?"
    held = ground(
        stores,
        AnswerResult("Silas Prout did bring it every Thursday.", [chunk(STORES, "c2")], 0),
        _settings(),
        SOURCE,
    )
    assert held.text == NOT_FOUND and held.info["restates"] == 1
    lifted = _settings(located_floor=0.0)
    given = ground(
        stores,
        AnswerResult("Silas Prout did bring it every Thursday.", [chunk(STORES, "c2")], 0),
        lifted,
        SOURCE,
    )
    assert given.text.startswith("Silas") and given.quotes  # the sentence holding its words


def test_a_short_answer_none_of_whose_own_words_were_read_is_withheld() -> None:
    """ "80 characters" from a manual that never says 80: no run holds it and none of its
    own words is anywhere in the excerpts read, so it came from the model's own knowledge."""
    question = "How long may the single line synopsis of a package description be?"
    read = [chunk(STORES, "c2")]
    found, keys = words_read("Up to 80 characters.", question, read)
    assert found == 0 and keys >= 2  # "80", "characters" (and "up")
    held = ground(question, AnswerResult("Up to 80 characters.", read, 0), _settings(), SOURCE)
    assert held.text == NOT_FOUND and held.info["located_words"] == f"0/{keys}"
    lifted = _settings(located_floor=0.0, unquoted="show")
    assert ground(question, AnswerResult("Up to 80 characters.", read, 0), lifted, SOURCE).text
    # one of its words read anywhere, though in no one run with the other: past the
    # floor, but with no quote to show it is withheld by default (UNQUOTED)
    assert words_read("Tea and oil.", "What did Silas bring?", read) == (2, 2)
    asked = "What did the Patience carry besides coal?"
    held = ground(asked, AnswerResult("Flour and gunpowder.", read, 0), _settings(), SOURCE)
    assert held.text == NOT_FOUND and held.withheld == "Flour and gunpowder."
    assert held.info["located"] == 0 and held.info["located_words"] == "1/2"
    shown = _settings(unquoted="show")
    given = ground(asked, AnswerResult("Flour and gunpowder.", read, 0), shown, SOURCE)
    assert given.text == "Flour and gunpowder." and given.info["located"] == 0


def test_the_floor_on_words_never_read_is_a_constant() -> None:
    import pytest

    from lcr.errors import SettingError

    assert _settings().located_floor == LOCATED_FLOOR
    with pytest.raises(SettingError, match=r"unknown setting answer\.located_floor"):
        parse_sets(["answer.located_floor=0"])  # a constant since 0.2.0 (issue 71)


def test_a_long_answer_partly_held_is_shown_with_the_quotes_that_hold_its_part() -> None:
    """Every answer shown carries verified quotes (issue 53): a long answer its quotes
    hold in part, past the floor, gets those quotes and the words they lack; with
    ``answer.check=located`` it is withheld, as before."""
    half = [chunk(BIRTH, "c0")]  # the birth's paragraph read, not the key's
    out = ground(QUESTION, AnswerResult(TWO_PARTS, half, 0), _settings(), SOURCE)
    assert out.text == TWO_PARTS and out.quotes
    assert all(SOURCE[q.spans[0][0] : q.spans[0][1]] == q.text for q in out.quotes)
    assert LOCATED_FLOOR <= out.info["located"] < COVER_SHARE
    assert _located_line(out.info, True).startswith("(the quotes hold ")
    held = ground(
        QUESTION, AnswerResult(TWO_PARTS, half, 0), _settings("answer.check=located"), SOURCE
    )
    assert held.text == NOT_FOUND

"""A quote about something else (issue 53): an answer lcr locates in a passage that holds
too few of the question's words is withheld under ``RELATED_FLOOR``, while a
right answer, and a two-step answer found under its own title, keep their quote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lcr.answer.covering import RELATED_FLOOR
from lcr.answer.grounding import (
    PASSAGE_FLOOR,
    PASSAGE_REACH,
    ground,
    passage_around,
    passage_share,
)
from lcr.answer.quotes import Quote, quotable
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.cli.output import _located_line
from lcr.errors import SettingError
from lcr.evidence import EvidenceItem
from lcr.pipeline.plans import answer_settings, parse_sets

STORY = (Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt").read_text("utf-8")
ENGINEER = (
    "How was the engineer who oversaw the 1921 conversion connected to Gull Rock, "
    "and which keepers had saved his life?"
)


def _settings(*sets: str, **constants: Any) -> AnswerSettings:
    """``--set`` text, and the stages' ``constants`` replaced (``--set`` cannot)."""
    return answer_settings(None, parse_sets(list(sets))).replace(**constants)


def _paragraph(source: str, words: str) -> EvidenceItem:
    """The evidence item of the whole paragraph of ``source`` that holds ``words``."""
    at = source.index(words)
    start = source.rfind("\n\n", 0, at)
    start = 0 if start < 0 else start + 2
    end = source.find("\n\n", at)
    end = len(source) if end < 0 else end
    return EvidenceItem(f"c{start}", 0, 0, 1.0, source[start:end], [(start, end)])


def test_an_answer_located_in_a_passage_about_something_else_is_withheld() -> None:
    # the default model's answer to examples/questions.txt's engineer question: its
    # words are in the story, in the paragraph about the clockwork's weight
    wrong = (
        "The engineer was connected to Gull Rock through the brass weight, which had a "
        "screw cap in its top."
    )
    weight = _paragraph(STORY, "The brass weight had a screw cap")
    held = ground(ENGINEER, AnswerResult(wrong, [weight], 0), _settings(), STORY)
    assert held.text == NOT_FOUND and held.withheld == wrong and not held.quotes
    found, asked = map(int, held.info["unrelated"].split("/"))
    assert found / asked < RELATED_FLOOR and held.info["related"] == round(found / asked, 2)
    # set to 0, the same answer is given with the sentence lcr located for it
    lifted = ground(ENGINEER, AnswerResult(wrong, [weight], 0), _settings(related_floor=0.0), STORY)
    assert lifted.text == wrong and "screw cap" in lifted.quotes[0].text
    # guessing withholds nothing
    guess = ground(
        ENGINEER, AnswerResult(wrong, [weight], 0), _settings("answer.not_found=guess"), STORY
    )
    assert guess.text == wrong


def test_the_right_answer_keeps_its_quote() -> None:
    right = "He had been the ship's boy on the Marigold Ann."
    lusk = _paragraph(STORY, "named Peter Lusk, and when he stepped")
    given = ground(ENGINEER, AnswerResult(right, [lusk], 0), _settings(), STORY)
    assert given.text == right and "ship's boy on the Marigold Ann" in given.quotes[0].text
    assert given.info["related"] >= RELATED_FLOOR and "unrelated" not in given.info


# two titled paragraphs, as a folder of articles gives them (made up for the test)
ARTICLES = (
    "Halden Motors KX-4.\n\nThe Halden Motors KX-4 is an open racing car built in 1991 "
    "for the endurance series and driven at three circuits.\n\n"
    "Mira Solano.\n\nMira Solano is a Mexican actress and singer who played the lead in the "
    'telenovela "La casa del faro" and recorded three albums.'
)


def test_a_title_alone_is_not_a_relation_but_its_paragraph_can_be() -> None:
    car = _paragraph(ARTICLES, "Halden Motors KX-4.")
    body = _paragraph(ARTICLES, "The Halden Motors KX-4 is")
    rental = "Who was the chief executive of the second largest car rental company by sales?"
    held = ground(rental, AnswerResult("Halden Motors KX-4", [car, body], 0), _settings(), ARTICLES)
    assert held.text == NOT_FOUND and "unrelated" in held.info
    # a two-step answer: the question names the telenovela, the passage holds it
    star = 'Which star of the telenovela "La casa del faro" also records as a singer?'
    lead = _paragraph(ARTICLES, "Mira Solano is a Mexican")
    given = ground(star, AnswerResult("Mira Solano", [lead], 0), _settings(), ARTICLES)
    assert given.text == "Mira Solano" and given.quotes
    assert given.info["related"] >= 0.5


def test_the_passage_stops_at_blank_lines_and_at_its_reach() -> None:
    long = "A paragraph of its own, long enough to stand alone as the passage of a quote. " * 3
    text = f"Before.\n\n{long}The one paragraph holds the quote here.\n\nAfter."
    at = text.index("quote here")
    assert passage_around(text, at, at + 5) == f"{long}The one paragraph holds the quote here."
    book = "word " * 2000  # a text with no blank lines is cut at the reach
    middle = passage_around(book, 5000, 5004)
    assert len(middle) == 2 * PASSAGE_REACH + 4
    quote = Quote("quote", "c0", ((at, at + 5),), "lcr")
    assert passage_share("Where is the quote paragraph?", quote, text) == (2, 2)
    assert passage_share("What is it?", quote, text) == (0, 0)  # no content words asked


def test_a_heading_or_a_lists_term_takes_in_the_lines_under_it() -> None:
    """An HTML page's text puts a blank line after every line: the term "Games/Puzzles"
    is its own paragraph, explained by the next (Debian's menu policy, issue 53's loop)."""
    menu = (
        "Games/Toys\n\nThings that are amusing.\n\nGames/Puzzles\n\nTests of ingenuity "
        "and logic.\n\nExamples: xmpuzzles, sgt-puzzles, enigma\n\nGames/Simulation\n\n"
        "Simulation of the real world in all its detail and complexity.\n\nEnd."
    )
    at = menu.index("Games/Puzzles")
    passage = passage_around(menu, at, at + len("Games/Puzzles"))
    assert passage == "Games/Puzzles\n\nTests of ingenuity and logic."  # the term, its line
    assert len("Games/Puzzles") < PASSAGE_FLOOR
    asked = "In the Debian menu structure, which section is for tests of ingenuity and logic?"
    term = _paragraph(menu, "Games/Puzzles")
    given = ground(asked, AnswerResult("Games/Puzzles", [term], 0), _settings(), menu)
    assert given.text == "Games/Puzzles" and given.info["related"] >= RELATED_FLOOR


def test_the_floor_is_a_constant_and_says_why_on_a_terminal() -> None:
    assert _settings().related_floor == RELATED_FLOOR
    with pytest.raises(SettingError, match=r"unknown setting answer\.related_floor"):
        parse_sets(["answer.related_floor=0"])  # a constant since 0.2.0 (issue 71)
    line = _located_line({"located": 1, "related": 0.1, "unrelated": "1/10"}, False)
    assert line == "(no quote: its passage has only 1 of the question's 10 words)"
    unquoted = _located_line({"located": 0, "unquoted": 1}, False)
    assert unquoted == "(no quote: no run of sentences read holds the answer's words)"


def test_an_answer_read_from_a_summary_is_quoted_from_the_text_under_it() -> None:
    """A method's own text (a RAPTOR summary, a GraphReader atomic fact) is never quoted:
    lcr looks for the answer's sentence in the document text the summary was made from."""
    lusk = _paragraph(STORY, "named Peter Lusk, and when he stepped")
    start, end = lusk.spans[0]
    summary = EvidenceItem(
        "s1", 0, 1, 1.0, "An engineer who was once saved comes back.", [(start, end)]
    )
    (under,) = quotable([summary], STORY)
    assert under.text == STORY[start:end] and under.id == "s1"
    assert quotable([lusk], STORY) == [lusk]  # the document's own text stays as it is
    given = ground(ENGINEER, AnswerResult("Peter Lusk", [summary], 0), _settings(), STORY)
    assert given.text == "Peter Lusk" and "Peter Lusk" in given.quotes[0].text
    assert STORY[given.quotes[0].spans[0][0] : given.quotes[0].spans[0][1]] == given.quotes[0].text

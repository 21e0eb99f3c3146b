"""A term the document never writes (issue 53): a question's word rarer in English than
``answer.term_zipf`` that the text never uses means "not found", and the model is never
asked; a term the text writes in another form (a plural, a split, a typo's right spelling)
still reaches it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lcr.answer.grounding import unwritten_terms
from lcr.answer.shared import AnswerSettings
from lcr.answer.terms import TERM_ZIPF, absent_terms, one_edit_apart, question_terms, zipf
from lcr.cli.output import _located_line
from lcr.errors import SettingError
from lcr.pipeline.plans import parse_sets
from tests.test_cli import run

STORY = Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt"


def test_a_term_is_a_word_rare_in_english_and_frame_words_are_not() -> None:
    assert zipf("the") > 7 and 0 < zipf("gnuplot") < TERM_ZIPF and zipf("autopkgtest") == 0
    asked = "Which autopkgtest restriction says that a test must be run as root?"
    assert question_terms(asked) == ["autopkgtest"]
    # words a question frames its ask with are common English, whatever the document says
    assert question_terms("What is the significance of the role Kell plays?") == ["kell"]
    # a lower-case word of the language ("frontend") a text may say otherwise: the model
    # is asked (issue 72)
    assert question_terms("Which debconf protocol command tells the frontend?") == ["debconf"]
    assert question_terms("Which debconf protocol command tells gnuplot?") == [
        "debconf",
        "gnuplot",
    ]
    # nor are words about the text, or asking for something done to it, rare as they are
    assert question_terms("Summarise, chronologically, what the narrator says of Kell") == ["kell"]
    # numbers, words under three letters and repeats are never terms; 0 turns it off
    assert question_terms("Is R 4.2.2 or 3x faster than qq qq?") == []
    assert question_terms(asked, 0.0) == []
    # the list is English's: a question in another language has no terms
    assert question_terms("Quelle est la nationalité de Marie Curie ?") == []
    assert question_terms("Wer hat den Schlüssel im Leuchtturm versteckt?") == []
    # a higher floor takes in commoner names (a lower-case word of the language is never
    # a term: a text may say it otherwise, issue 72)
    assert question_terms("Who did Ambrose Kell meet?") == ["kell"]
    assert question_terms("Who did Ambrose Kell meet?", 4.0) == ["ambrose", "kell"]
    assert "restriction" not in question_terms(asked, 4.0)


def test_a_term_is_written_as_itself_its_stem_a_split_or_a_typos_right_spelling() -> None:
    text = (
        "Debian 11 has the codenames of toys. See debconf_specification and the "
        "ontologies of Fenty; the code name scheme is approximately forty years old."
    )
    assert absent_terms(["codename"], text) == []  # a longer word begins with it
    assert absent_terms(["ontology"], text) == []  # its stem, "ontolog"
    assert absent_terms(["fenty"], text) == []  # itself, though its stem is "fenti"
    assert absent_terms(["debconf"], text) == []  # inside an identifier, at its start
    assert absent_terms(["codename"], "the code name and the code-name") == []
    assert absent_terms(["approcimately"], text) == []  # a typo: one letter changed
    assert absent_terms(["autopkgtest", "debconf", "conf"], text) == ["autopkgtest", "conf"]
    # inside another word is not written: "conf" does not start a word of the text
    assert absent_terms(["kell"], "Shackelton") == ["kell"]
    assert absent_terms([], text) == []


def test_one_edit_apart() -> None:
    assert one_edit_apart("curson", "curzon")  # changed
    assert one_edit_apart("argentia", "argentina")  # added
    assert one_edit_apart("intersate", "interstate")
    assert one_edit_apart("recieve", "receive")  # two neighbours swapped
    assert not one_edit_apart("curson", "curson")
    assert not one_edit_apart("debconf", "dpkg")
    assert not one_edit_apart("abcd", "badc")


def test_only_an_abstaining_step_reads_terms() -> None:
    asked = "Which autopkgtest restriction says that a test must be run as root?"
    story = STORY.read_text("utf-8")
    assert unwritten_terms(asked, AnswerSettings(), story) == ["autopkgtest"]
    for off in (AnswerSettings(not_found="guess"), AnswerSettings(term_zipf=0.0)):
        assert unwritten_terms(asked, off, story) == []


def test_the_terminal_says_why_the_model_was_not_asked(tmp_path: Path) -> None:
    story = tmp_path / "lighthouse.txt"
    shutil.copy(STORY, story)
    assert run(["index", str(story), "-q"])[0] == 0
    asked = "Which autopkgtest restriction did the keeper break?"
    code, out, err = run(["ask", str(story.with_suffix(".idx")), asked, "--llm", "no-such", "-v"])
    assert code == 0 and err == "", err  # no model is loaded: an unknown one never fails
    assert out.splitlines()[1:5] == [
        "A: not found in the document",
        "   (the model was not asked: the document never writes the question's word",
        "    \u201cautopkgtest\u201d)",
        "",
    ]
    assert "Evidence (bm25): none read" in out and "info: absent=autopkgtest" in out


def test_on_a_terminal_too_nothing_read_is_said_plainly(tmp_path: Path) -> None:
    """On a terminal the answer line is written as it streams, apart from the evidence:
    the evidence still says none was read (80 columns, the screen as a person sees it)."""
    from tests.terminal import run_in_terminal

    story = tmp_path / "lighthouse.txt"
    shutil.copy(STORY, story)
    assert run(["index", str(story), "-m", "bm25", "-q"])[0] == 0
    asked = "Which debconf command did the keeper send to gnuplot?"
    screen = run_in_terminal(
        ["ask", str(story.with_suffix(".idx")), asked, "--llm", "no-such"], columns=80
    )
    shown = [line.rstrip() for line in screen.final if line.strip()]
    assert screen.code == 0 and shown[1] == "A: not found in the document", shown
    assert "    \u201cdebconf\u201d, \u201cgnuplot\u201d)" in shown
    assert "Evidence (bm25): none read" in shown and max(map(len, shown)) <= 80


def test_the_setting_refuses_bad_values_and_the_terminal_says_why() -> None:
    assert AnswerSettings().term_zipf == TERM_ZIPF
    assert parse_sets(["answer.term_zipf=0"]).answer_values() == {"term_zipf": 0.0}
    for bad in ("answer.term_zipf=9", "answer.term_zipf=-1", "answer.term_zipf=rare"):
        with pytest.raises(SettingError):
            parse_sets([bad])
    one = _located_line({"absent": "autopkgtest"}, False)
    assert one == (
        "(the model was not asked: the document never writes the question's word "
        "\u201cautopkgtest\u201d)"
    )
    two = _located_line({"absent": "debconf, frontend"}, False)
    assert two.endswith("words \u201cdebconf\u201d, \u201cfrontend\u201d)")


@pytest.mark.slow
def test_an_ask_of_a_story_without_the_term_never_asks_the_model(tmp_path: Path) -> None:
    """End to end, SmolLM2-135M answering: the term absent, no call and "not found";
    the term turned off or present, the model is asked."""
    story = tmp_path / "lighthouse.txt"
    shutil.copy(STORY, story)
    code, _, err = run(["index", str(story), "-q"])
    assert code == 0, err
    idx = str(story.with_suffix(".idx"))
    model = ["--llm", "smollm2-135m", "--device", "cpu", "--json", "-q"]

    def ask(question: str, *sets: str) -> dict[str, object]:
        extra = [x for s in sets for x in ("--set", s)]
        code, out, err = run(["ask", idx, question, *model, *extra])
        assert code == 0, err
        got: dict[str, object] = json.loads(out)
        return got

    absent = ask("Which autopkgtest restriction did the keeper break?")
    assert absent["answer"] == "not found in the document"
    assert absent["usage"]["calls"] == 0  # type: ignore[index]
    assert absent["info"]["absent"] == "autopkgtest"  # type: ignore[index]
    assert absent["evidence"] == []  # nothing read; no model loaded
    assert absent["quotes"] == []  # the key is there for scripts, empty
    assert absent["models"]["llm"] == "smollm2-135m"  # type: ignore[index]
    asked = ask("Which autopkgtest restriction did the keeper break?", "answer.term_zipf=0")
    assert asked["usage"]["calls"] == 1  # type: ignore[index]
    assert "absent" not in asked["info"]  # type: ignore[operator]
    present = ask("What did Ambrose Kell hide?")  # "kell" is rare, and in the story
    assert present["usage"]["calls"] == 1  # type: ignore[index]
    assert "absent" not in present["info"]  # type: ignore[operator]

"""The trust guarantees of lcr's answers (issues 72 and 73): the unwritten-term rule says
"not found" only where no form of the term is written, a word split at a line end is one
word, an elided quote never drops what changes its sense, a quote holds the answer's
words as it states them (not as it denies them) and in the sense the question asks, a
quote holds body text only, and a pooled quote is cited where its own index cites it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lcr
from lcr.answer import quotes, terms
from lcr.answer.grounding import ground
from lcr.answer.quotes import answer_quote, check_quotes, locate
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.answer.terms import absent_terms, question_terms
from lcr.cli.main import cli
from lcr.cli.models import Seams
from lcr.cli.output import quote_place
from lcr.evidence import EvidenceItem
from lcr.models.container import Models
from lcr.result import cite_quotes
from lcr.store import SourceDoc
from lcr.text import citation
from lcr.text.layout import DocumentLayout, Heading, Page
from tests.fakes import Replying

STORY = Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt"


def whole(source: str, cid: str = "c0") -> EvidenceItem:
    return EvidenceItem(cid, 0, 0, 1.0, source, [(0, len(source))])


# -- #72 row 8: the unwritten-term rule ------------------------------------------------


@pytest.mark.parametrize(
    ("question", "text"),
    [
        # accents composed or decomposed, in the question or the text
        ("What did Goedel prove about zorblax?", "G\u00f6del proved zorblax incomplete."),
        ("What did G\u00f6del prove?", "Goedel proved it."),
        ("What did Go\u0308del prove?", "G\u00f6del proved it."),
        ("Who played Dvorak's ninth?", "Dvo\u0159\u00e1k wrote nine symphonies."),
        ("Where does Kilic live?", "K\u0131l\u0131\u00e7 lives in Izmir."),
        ("What did Ngugi write?", "Ng\u0169g\u0129 wrote novels."),
        ("Who ruled \u0130zmirbad?", "Izmirbad was ruled by a bey."),
        ("Who is Lukasz Wrobel?", "\u0141ukasz Wr\u00f3bel keeps the light."),
        ("Who is Ostergaard?", "\u00d8stergaard keeps the light."),
        ("Who is Strassburgen?", "Stra\u00dfburgen keeps the light."),
        # characters a reader never sees, and the non-breaking hyphen
        ("What does autopkgtest run?", "auto\u00adpkgtest runs the tests."),
        ("What does autopkgtest run?", "auto\u200bpkg\u200dtest runs the tests."),
        ("What does autopkgtest run?", "\ufeffautopkgtest runs the tests."),
        ("What does auto-pkgtest run?", "auto\u2011pkgtest runs the tests."),
        # compatibility forms: a ligature, fullwidth letters
        ("What is fidgetronics?", "\ufb01dgetronics is a craft."),
        ("What is gnuplot?", "\uff47\uff4e\uff55\uff50\uff4c\uff4f\uff54 draws plots."),
        ("What is \uff47\uff4e\uff55\uff50\uff4c\uff4f\uff54?", "gnuplot draws plots."),
        # identifiers in any of their spellings
        ("What does getUserName return?", "get_user_name returns the login."),
        ("What does get_user_name return?", "GetUserName returns the login."),
        ("What does getusername return?", "getUserName returns the login."),
        # a word split by a line-end or page-end hyphen
        ("Where was the zorbwood found?", "The zorb-\nwood lay on the beach."),
        ("Where was the zorbwood found?", "The zorb-\n\nwood lay on the beach."),
    ],
)
def test_a_term_written_in_another_form_is_written(question: str, text: str) -> None:
    assert absent_terms(question_terms(question), text) == []


def test_irregular_plurals_are_one_term() -> None:
    assert absent_terms(["cacti"], "The cactus grows.") == []
    assert absent_terms(["cactus"], "The cacti grow.") == []
    assert absent_terms(["hippopotami"], "A hippopotamus swam.") == []
    assert absent_terms(["larvae"], "The larva hatched.") == []
    assert absent_terms(["zorblax"], "The cactus grows.") == ["zorblax"]  # the rule holds


def test_terms_the_rule_cannot_be_sure_of_are_left_to_the_model() -> None:
    # acronyms a text may spell out; Roman numerals it may write as digits
    assert question_terms("What does WPA protect against?") == []
    assert question_terms("Which UNHCR's office opened?") == []
    assert question_terms("What happens in chapter xiv?") == []
    # a word of the language a text may say in other words ("boat" for "skiff")
    assert question_terms("Who rowed the skiff to Gull Rock?") == []
    # another script: the question's word, or a text that writes its words in one
    assert question_terms("What did \u041f\u0443\u0448\u043a\u0438\u043d write?") == []
    pushkin = "\u041f\u0443\u0448\u043a\u0438\u043d wrote Eugene Onegin."
    assert absent_terms(question_terms("What did Pushkin write?"), pushkin) == []
    # a text in a script lcr does not transliterate: a term may stand in it
    tokyo = "\u6771\u4eac\u306e\u753a \u5927\u962a\u306e\u753a and the port."
    assert absent_terms(["zorblax"], tokyo) == []
    assert absent_terms(["zorblax"], "Pushkin wrote Eugene Onegin.") == ["zorblax"]
    # names, programs and words no dictionary has stay terms
    assert question_terms("Which autopkgtest restriction needs root?") == ["autopkgtest"]
    assert question_terms("What is the significance of the role Kell plays?") == ["kell"]


@pytest.mark.parametrize(
    "question",
    [
        "Was ist der Leuchtturmw\u00e4rter von Gull Rock?",
        "Wie was de vuurtorenwachter van Gull Rock?",
        "Quem do farol guardava a chave?",
        "Qual \u00e9 o nome do barco do faroleiro?",
    ],
)
def test_a_question_in_another_language_has_no_terms(question: str) -> None:
    assert not terms.is_english(question)
    assert question_terms(question) == []


def test_english_is_decided_by_more_than_one_word() -> None:
    assert terms.is_english("Who was Charles de Gaulle?")  # "de" alone does not make it French
    assert terms.is_english("Who wrote Pnin?")
    assert question_terms("Who was Charles de Gaulle's aide Zorblax?") == ["zorblax"]


# -- #72 row 9: a word hyphenated at a line or page end --------------------------------

DRIFT = "The keeper built his table from drift-\nwood he found below the light."
DRIFT_PAGE = "The keeper built his table from drift-\n\nwood he found below the light."


@pytest.mark.parametrize("source", [DRIFT, DRIFT_PAGE])
def test_a_word_split_at_a_line_end_is_located_joined(source: str) -> None:
    quote = locate("his table from driftwood he found", [whole(source)], source)
    assert quote is not None and "drift-" in quote.text
    q = "What did the keeper build his table from?"
    located = answer_quote("driftwood", q, [whole(source)], source)
    assert located is not None and located.spans == ((0, len(source)),)
    # and a true compound broken at a line end still matches as written
    compound = "The keeper was a well-\nknown man on the coast."
    assert locate("The keeper was a well-known man", [whole(compound)], compound) is not None


# -- #72 row 10: verified quotes that back wrong answers --------------------------------

TREASURE = (
    "The treasure was never hidden in the cellar of the inn. "
    "It lay under the third step of the lighthouse stair."
)


def test_an_elision_that_drops_a_negation_is_refused() -> None:
    reply = (
        "Answer: in the cellar of the inn\n"
        "Quote: The treasure was \u2026 hidden in the cellar of the inn"
    )
    checked = check_quotes(reply, "Where was the treasure hidden?", [whole(TREASURE)], TREASURE)
    assert not checked.holds and checked.unfound
    for dropped in ("not", "no longer", "hardly", "unless asked,", "without", "wasn't"):
        text = f"The keeper said the lamp was {dropped} lit at dusk by the boy."
        elided = locate(
            "The keeper said the lamp was \u2026 lit at dusk by the boy", [whole(text)], text
        )
        assert elided is None, dropped


def test_an_elision_that_changes_nothing_is_cited_over_every_piece() -> None:
    text = "The keeper, Ambrose Kell, kept the log.\fHe wrote in it every night."
    found = locate("The keeper \u2026 kept the log", [whole(text)], text)
    assert found is not None and len(found.spans) == 2
    page_two = text.index("He wrote")
    docs = [SourceDoc("log.pdf", "", len(text), 0, len(text))]
    layout = DocumentLayout((Page(0, "1"), Page(page_two, "2")), ())
    spread = locate("The keeper \u2026 wrote in it every night", [whole(text)], text)
    assert spread is not None
    (record,) = cite_quotes(_Citable(docs, [layout]), [spread])
    assert record["pages"] == "pp. 1-2"  # the first piece's page to the last's
    assert (record["start"], record["end"]) == (0, len(text))
    docs_plain = [SourceDoc("log.txt", "", len(text), 0, len(text))]
    (plain,) = cite_quotes(_Citable(docs_plain, [DocumentLayout()]), [found])
    assert quote_place(plain) == f"log.txt chars 0-{found.spans[-1][1]}"


class _Citable:
    def __init__(self, documents: list[SourceDoc], layouts: list[DocumentLayout]) -> None:
        self.documents = documents
        self.layouts = tuple(layouts)


BOATS = (
    "Anyone asked its name must now reply Seagull, not Bluebell. "
    "In the old days before the great storm of 1890 the keepers called the little boat the "
    "Bluebell."
)


def test_a_word_under_a_negation_is_not_held() -> None:
    said, denied = quotes.stated("Anyone asked its name must now reply Seagull, not Bluebell.")
    assert "seagull" in said and "bluebell" in denied
    said, _ = quotes.stated("It was not until 1890 that the Bluebell sailed.")
    assert "1890" in said and "bluebell" in said
    q = "What did the keepers call the boat in the old days?"
    located = answer_quote("The Bluebell.", q, [whole(BOATS)], BOATS)
    assert located is not None and located.text.startswith("In the old days")
    reply = "Answer: Bluebell\nQuote: Anyone asked its name must now reply Seagull, not Bluebell."
    checked = check_quotes(reply, q, [whole(BOATS)], BOATS)
    assert not checked.holds and "bluebell" in checked.problem
    # a question that asks of a negation gets its answer from the negation
    asked = check_quotes(
        reply, "What must nobody reply when asked its name?", [whole(BOATS)], BOATS
    )
    assert asked.holds


BELL = (
    "The fog bell hung from a bracket of oak and iron on the gallery. "
    "The bell itself was cast in bronze at Whitechapel."
)


def test_an_answer_with_words_no_quote_holds_is_withheld() -> None:
    q = "What was the fog bell made of?"
    wrong = "The fog bell was made of oak and iron, and its chemical symbol is Fe"
    out = AnswerResult(wrong, [whole(BELL)], 0)
    shown = ground(q, out, AnswerSettings(), BELL)
    assert shown.text == NOT_FOUND and shown.withheld == wrong and not shown.quotes
    assert "fe" in shown.info["unlocated"]
    right = ground(
        q, AnswerResult("It was cast in bronze.", [whole(BELL)], 0), AnswerSettings(), BELL
    )
    assert right.text == "It was cast in bronze." and right.quotes
    # guessing shows what it has
    guessed = ground(q, out, AnswerSettings(not_found="guess"), BELL)
    assert guessed.text == wrong


def test_scripted_replies_through_the_shared_step(tmp_path: Path) -> None:
    """The three replies of row 10, each fixed, through ``lcr ask``: no quote shown drops
    a negation or denies the answer, and the wrong answers are withheld."""
    doc = tmp_path / "inn.txt"
    doc.write_text(TREASURE + "\n\n" + BOATS + "\n\n" + BELL + "\n", encoding="utf-8")
    idx = tmp_path / "inn.idx"
    lcr.index(doc, idx, methods=["bm25"])
    cases = [
        (
            "Where was the treasure hidden?",
            "in the cellar of the inn\n"
            "Quote: The treasure was \u2026 hidden in the cellar of the inn",
            ["--set", "answer.check=quote"],
        ),
        (
            "What did the keepers call the boat in the old days?",
            "Bluebell\nQuote: Anyone asked its name must now reply Seagull, not Bluebell.",
            ["--set", "answer.check=quote"],
        ),
        (
            "What was the fog bell made of?",
            "The fog bell was made of oak and iron, and its chemical symbol is Fe",
            [],
        ),
    ]
    for question, reply, sets in cases:
        code, out, err = _run(["ask", str(idx), question, "--json", "-q", *sets], Replying(reply))
        assert code == 0, err
        record = json.loads(out)
        texts = [q["text"] for q in record["quotes"]]
        assert not any("not Bluebell" in t or "\u2026" in t for t in texts), record
        if "Bluebell" in reply:  # the right answer, under the sentence that states it
            assert record["answer"] in (NOT_FOUND, "Bluebell"), record
            assert record["answer"] == NOT_FOUND or texts[0].startswith("In the old days")
        else:
            assert record["answer"] == NOT_FOUND, (question, record)


# -- #73: quotes in the sense the question asks -----------------------------------------

CONTENTS = "Contents\n\n1 Exit status ........ 30\n\n2 Files ........ 31\n\n"
MANUAL = CONTENTS + (
    "An exit status of zero indicates success. A file that cannot be opened makes the "
    "program exit with status 2.\n\n"
    "The worst night of the winter was the fourteenth of November, 1893, when the lamp "
    "failed.\n\nElsie Venn was the keeper's daughter."
)


def test_a_number_needs_a_quote_that_speaks_of_what_was_asked() -> None:
    items = [whole(MANUAL)]
    q = "What exit status does the program give when a file cannot be opened?"
    wrong = answer_quote("0", q, items, MANUAL)
    assert wrong is None or "cannot be opened" in wrong.text  # never "exit status of zero"
    right = answer_quote("2", q, items, MANUAL)
    assert right is not None and "cannot be opened" in right.text
    born = "Elsie Venn was born on November 14, 1893"
    assert answer_quote(born, "When was Elsie Venn born?", items, MANUAL) is None
    assert answer_quote("30", "On what page is the exit status described?", items, MANUAL) is None
    reply = "Answer: 0\nQuote: An exit status of zero indicates success."
    assert not check_quotes(reply, q, items, MANUAL).holds
    listed = check_quotes("Answer: 30\nQuote: 1 Exit status ........ 30", q, items, MANUAL)
    assert not listed.holds


# -- #72 row 13c: a quote holds body text only --------------------------------------------


def test_a_located_quote_leaves_the_heading_line_out() -> None:
    source = "Chapter One\nThe keeper's log names the boat the Patience.\n"
    docs = [SourceDoc("log.pdf", "", len(source), 0, len(source))]
    layout = DocumentLayout((Page(0, "1"),), (Heading(0, 1, "Chapter One"),))
    headings = citation.heading_lines(docs, [layout], source)
    assert headings == [(0, len("Chapter One"))]
    q = "What does the keeper's log name the boat?"
    bare = answer_quote("the Patience", q, [whole(source)], source)
    assert bare is not None and bare.text.startswith("Chapter One")  # without the layout
    quote = answer_quote("the Patience", q, [whole(source)], source, headings=headings)
    assert quote is not None and quote.text == "The keeper's log names the boat the Patience."


def test_a_model_s_quote_leaves_the_heading_line_out() -> None:
    from lcr.answer.quotes import Quote

    source = "Chapter One\nThe keeper's log names the boat the Patience.\n"
    headings = [(0, len("Chapter One"))]
    whole_line = Quote(source.rstrip("\n"), "c0", ((0, len(source) - 1),))
    out = AnswerResult("the Patience", [whole(source)], 0, quotes=(whole_line,))
    shown = ground(
        "What does the log name the boat?", out, AnswerSettings(), source, headings=headings
    )
    (quote,) = shown.quotes
    assert quote.text == "The keeper's log names the boat the Patience."
    assert source[quote.spans[0][0] : quote.spans[0][1]] == quote.text


def test_a_pdf_quote_is_body_text(tmp_path: Path) -> None:
    from tests.docfiles import write_pdf

    pdf = write_pdf(tmp_path / "manual.pdf")
    idx = tmp_path / "manual.idx"
    lcr.index(pdf, idx, methods=["bm25"])
    q = "How many ships did the keeper count?"
    code, out, err = _run(["ask", str(idx), q, "--json", "-q"], Replying("forty ships"))
    assert code == 0, err
    (quote,) = json.loads(out)["quotes"]
    assert quote["text"] == "The keeper counted forty ships."
    assert quote["section"] == ["2 Results"]


# -- #73: pooled quotes cite where their own index cites them --------------------------


def _run(args: list[str], llm: Any) -> tuple[int, str, str]:
    models = lambda spec, progress: Models.with_objects(llm=llm, spec=spec)  # noqa: E731
    result = CliRunner().invoke(cli, args, prog_name="lcr", obj=Seams(models))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("How many ships did the keeper count?", "forty ships"),
        ("Where are the spanners kept?", "in the red toolbox"),
    ],
)
def test_a_pooled_quote_is_cited_as_its_own_index_cites_it(
    tmp_path: Path, question: str, reply: str
) -> None:
    from tests.docfiles import write_pdf

    story = tmp_path / "story.idx"
    lcr.index(STORY, story, methods=["bm25"])
    manual = tmp_path / "manual.idx"
    lcr.index(write_pdf(tmp_path / "manual.pdf"), manual, methods=["bm25"])
    code, alone, err = _run(["ask", str(manual), question, "--json", "-q"], Replying(reply))
    assert code == 0, err
    code, pooled, err = _run(
        ["ask", str(story), str(manual), question, "--json", "-q"], Replying(reply)
    )
    assert code == 0, err
    (own,) = json.loads(alone)["quotes"]
    (many,) = json.loads(pooled)["quotes"]
    assert many["index"] == str(manual)
    for key in ("text", "document", "span", "pages", "section", "citations", "start", "end"):
        assert many[key] == own[key], key
    source = (manual / "source.txt").read_text(encoding="utf-8")
    assert source[many["span"][0] : many["span"][1]] == many["text"]
    assert many["pages"] is not None


def test_a_real_model_s_quotes_hold_what_they_are_shown_for(tmp_path: Path, smollm: Any) -> None:
    """SmolLM2-135M asked the three questions of row 10, with quotes and without, alone and
    pooled: whatever it answers, every quote shown is the document's text where it is
    cited, keeps every word between its pieces that changes its sense, and holds the
    answer's own words."""
    from lcr.answer.quotes import changes_sense, missing_words

    doc = tmp_path / "inn.txt"
    doc.write_text(TREASURE + "\n\n" + BOATS + "\n\n" + BELL + "\n", encoding="utf-8")
    inn = tmp_path / "inn.idx"
    lcr.index(doc, inn, methods=["bm25"])
    story = tmp_path / "story.idx"
    lcr.index(STORY, story, methods=["bm25"])
    models = Models.with_objects(llm=smollm)
    questions = [
        "Where was the treasure hidden?",
        "What did the keepers call the boat in the old days?",
        "What was the fog bell made of?",
    ]
    sources = {str(p): (p / "source.txt").read_text(encoding="utf-8") for p in (inn, story)}
    for check in ("quote", "located"):
        for where in (inn, [story, inn]):
            results = lcr.ask(
                where, questions, models=models, max_new_tokens=48,
                settings={"answer.check": check},
            )  # fmt: skip
            for result in results:
                if result.answer == NOT_FOUND:
                    continue
                for quote in result.quotes:
                    source = sources[quote.get("index", str(inn))]
                    spans = quote.get("spans") or [quote["span"]]
                    assert " \u2026 ".join(source[s:e] for s, e in spans) == quote["text"]
                    for (_, end), (start, _) in itertools.pairwise(spans):
                        assert not changes_sense(source[end:start])
                assert result.quotes, result.answer
                held = [q["text"] for q in result.quotes]
                assert missing_words(result.answer, result.question, held) == [], result.answer


def test_english_questions_with_words_other_languages_share_stay_english() -> None:
    for question in (
        "Which war ended the Zorblax dynasty?",
        "Whose son founded Zorblax?",
        "Why did the Zorblax die out?",
    ):
        assert terms.is_english(question), question
        assert question_terms(question) == ["zorblax"]

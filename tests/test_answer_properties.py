"""The answer step's guarantees as properties over generated inputs (issue 71), each the
user's promise in one line (docs/answer-step.md):

(i)   every quote shown is cited where its text is: its document, spans, page and
      section hold the quote's text in source.txt, for one index and a pooled ask alike;
(ii)  an answer's own words (its content words the question does not give) are held by
      the quotes shown under it;
(iii) an elided quote keeps every word between its pieces that changes its sense (a
      negation at least), or it is refused;
(iv)  "not found" without asking the model is said only when no form of a question's
      term (NFKC, accents folded, invisible characters dropped, identifier parts split,
      a line-end hyphen joined) occurs in the text.

Hypothesis runs a fixed, derandomized set of examples, small enough for the quick tier.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lcr
from lcr.answer.grounding import ground
from lcr.answer.quotes import (
    changes_sense,
    check_quotes,
    content_words,
    locate,
    missing_words,
)
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.answer.terms import absent_terms, question_terms
from lcr.answer.wording import NEGATIONS
from lcr.evidence import EvidenceItem
from lcr.pipeline.many import PooledText
from lcr.result import cite_quotes
from lcr.store import Index, SourceDoc
from lcr.text.layout import DocumentLayout, Heading, Page

FAST = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

NAMES = ["Silas", "Prout", "Ambrose", "Kell", "Elsie", "Tobias", "Harrowmouth", "Patience"]
NOUNS = ["boat", "lamp", "stores", "key", "bell", "cellar", "stair", "log", "forge", "tide"]
VERBS = ["brought", "kept", "found", "hid", "rang", "lit", "carried", "named", "sold"]
PLACES = ["the inn", "the rock", "the quay", "the cottage", "the gallery", "the town"]


@st.composite
def sentences(draw: st.DrawFn) -> str:
    who = draw(st.sampled_from(NAMES))
    verb = draw(st.sampled_from(VERBS))
    what = draw(st.sampled_from(NOUNS))
    where = draw(st.sampled_from(PLACES))
    negated = draw(st.sampled_from(["", "never ", "not ", ""]))
    return f"{who} {negated}{verb} the {what} at {where}."


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]]]:
    """A document of paragraphs of sentences, and each paragraph's span."""
    paragraphs = draw(
        st.lists(st.lists(sentences(), min_size=1, max_size=4), min_size=1, max_size=4)
    )
    text = ""
    spans = []
    for para in paragraphs:
        start = len(text)
        text += " ".join(para)
        spans.append((start, len(text)))
        text += "\n\n"
    return text, spans


def items_of(source: str, spans: list[tuple[int, int]]) -> list[EvidenceItem]:
    return [
        EvidenceItem(f"c{i}", 0, 0, 1.0 / (i + 1), source[s:e], [(s, e)])
        for i, (s, e) in enumerate(spans)
    ]


def holds_its_text(source: str, spans: tuple[tuple[int, int], ...], text: str) -> bool:
    return " \u2026 ".join(source[s:e] for s, e in spans) == text


# -- (i) and (ii): quotes shown, on one index ---------------------------------------------


@FAST
@given(documents(), st.data())
def test_a_located_quote_holds_the_answer_and_its_citation_holds_the_quote(
    doc: tuple[str, list[tuple[int, int]]], data: st.DataObject
) -> None:
    source, spans = doc
    items = items_of(source, spans)
    picked = data.draw(st.sampled_from([s for it in items for s in it.text.split(". ")]))
    who, *rest = picked.rstrip(".").split(" ")
    question = f"What did {who} do?"
    answer = data.draw(st.sampled_from([" ".join(rest), rest[-1], "the " + rest[-1] + " Fe"]))
    out = ground(question, AnswerResult(answer, items, 0), AnswerSettings(), source)
    if out.text == NOT_FOUND:
        return
    for quote in out.quotes:
        assert holds_its_text(source, quote.spans, quote.text)  # (i)
    assert out.quotes  # the default withholds an answer without a quote
    assert missing_words(out.text, question, [q.text for q in out.quotes]) == []  # (ii)
    layout = DocumentLayout((Page(0, "1"),), (Heading(0, 1, "Story"),))
    record = cite_quotes(_One(source, layout), out.quotes)[0]
    for (s, e), cited in zip(out.quotes[0].spans, record["citations"], strict=True):
        assert source[cited["start"] : cited["end"]] == source[s:e]


class _One:
    def __init__(self, source: str, layout: DocumentLayout) -> None:
        self.documents = [SourceDoc("story.txt", "", len(source), 0, len(source))]
        self.layouts = (layout,)


@FAST
@given(documents(), st.data())
def test_a_verified_model_quote_holds_the_answer(
    doc: tuple[str, list[tuple[int, int]]], data: st.DataObject
) -> None:
    source, spans = doc
    items = items_of(source, spans)
    picked = data.draw(st.sampled_from([s for it in items for s in it.text.split(". ")]))
    words = picked.rstrip(".").split(" ")
    question = f"What did {words[0]} do?"
    answer = data.draw(st.sampled_from([words[-1], " ".join(words[1:]), "Bluebell"]))
    quoted = " ".join(data.draw(st.sampled_from([words, words[:-1], words[1:]])))
    checked = check_quotes(f"Answer: {answer}\nQuote: {quoted}", question, items, source)
    if not checked.holds:
        return
    for quote in checked.quotes:
        assert holds_its_text(source, quote.spans, quote.text)
    assert missing_words(checked.answer, question, [q.text for q in checked.quotes]) == []


# -- (i): a pooled ask cites its quotes as their own index does -----------------------------


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory: pytest.TempPathFactory) -> list[Index]:
    from tests.docfiles import write_pdf

    root = tmp_path_factory.mktemp("pooled")
    story = Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt"
    lcr.index(story, root / "story.idx", methods=["bm25"])
    lcr.index(write_pdf(root / "manual.pdf"), root / "manual.idx", methods=["bm25"])
    return [Index.open(root / "story.idx"), Index.open(root / "manual.idx")]


@FAST
@given(st.data())
def test_a_pooled_quote_is_cited_where_its_own_index_cites_it(
    two_indexes: list[Index], data: st.DataObject
) -> None:
    chosen = []
    for i, index in enumerate(two_indexes):
        paragraphs = _paragraphs(index)
        picks = data.draw(
            st.lists(st.integers(0, len(paragraphs) - 1), min_size=1, max_size=3, unique=True)
        )
        for p in picks:
            doc, (start, end) = paragraphs[p]
            text = index.source[start:end]
            chosen.append((i, EvidenceItem(f"{i}-{p}", doc, 0, 1.0, text, [(start, end)])))
    pooled = PooledText.of(two_indexes, [_numbered(it, i) for i, it in chosen])
    pool_items = [pooled.to_pooled(_numbered(it, i)) for i, it in chosen]
    target = data.draw(st.sampled_from(pool_items))
    pieces = [s for s in target.text.split(". ") if len(s.split()) >= 3] or [target.text]
    sentence = data.draw(st.sampled_from(pieces))
    found = locate(sentence, [target], pooled.source)
    if found is None:
        return
    record = pooled.cite_quote(cite_quotes(pooled, [found])[0])
    index = next(ix for ix in two_indexes if str(ix.path) == record["index"])
    (own,) = cite_quotes(index, [_own(found, pooled)])
    assert record == {**own, "index": str(index.path)}
    spans = record.get("spans") or [record["span"]]
    assert " \u2026 ".join(index.source[s:e] for s, e in spans) == record["text"]
    for citation, (s, e) in zip(record["citations"], spans, strict=True):
        doc = next(d for d in index.documents if d.name == citation["document"])
        assert (
            index.source[doc.start + citation["start"] : doc.start + citation["end"]]
            == index.source[s:e]
        )


def _paragraphs(index: Index) -> list[tuple[int, tuple[int, int]]]:
    """Each paragraph of the index's documents: its document and its span."""
    out = []
    for d, doc in enumerate(index.documents):
        for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", index.source[doc.start : doc.end]):
            out.append((d, (doc.start + m.start(), doc.start + m.end())))
    return out


def _numbered(item: EvidenceItem, i: int) -> EvidenceItem:
    return EvidenceItem(item.id, item.doc, 0, 1.0, item.text, list(item.spans), {"index_no": i})


def _own(found: object, pooled: PooledText) -> object:
    from lcr.answer.quotes import Quote

    assert isinstance(found, Quote)
    _, spans = pooled.own_spans(found.spans)
    return Quote(found.text, found.item, tuple(spans), found.found_by)


# -- (iii): an elision keeps what changes the sense ----------------------------------------

SENSE = sorted(NEGATIONS | {"hardly", "unless", "except", "without", "only"})


@FAST
@given(
    st.sampled_from(NAMES),
    st.sampled_from(VERBS),
    st.sampled_from(NOUNS),
    st.lists(
        st.sampled_from(["quietly", "once more", "at dusk", *SENSE, "wasn't", "did"]), max_size=3
    ),
)
def test_an_elided_quote_keeps_the_words_that_change_its_sense(
    who: str, verb: str, noun: str, middle: list[str]
) -> None:
    source = f"The keeper said that {who} {' '.join(middle)} {verb} the {noun} in the cellar."
    source = " ".join(source.split())
    quote = f"The keeper said that {who} \u2026 {verb} the {noun} in the cellar"
    found = locate(quote, [EvidenceItem("c0", 0, 0, 1.0, source, [(0, len(source))])], source)
    if found is None:
        return
    assert holds_its_text(source, found.spans, found.text)
    for (_, end), (start, _) in zip(found.spans, found.spans[1:], strict=False):
        assert not changes_sense(source[end:start])  # nothing elided changes the sense
    if any(w in SENSE or w.endswith("n't") for w in middle):
        assert len(found.spans) == 1  # kept whole, or not at all


# -- (iv): "not found" without asking only when no form of the term is written -------------

INVISIBLE = ["\u00ad", "\u200b", "\u200c", "\u200d", "\ufeff"]
ACCENTS = ["\u0301", "\u0308", "\u030c", "\u0303"]


@st.composite
def written_forms(draw: st.DrawFn) -> tuple[str, str]:
    """A made-up name (no list knows it) and a text that writes it in another form."""
    letters = draw(st.text("bcdfgklmnprstvz", min_size=3, max_size=4))
    vowels = draw(st.text("aeiou", min_size=3, max_size=4))
    term = "".join(a + b for a, b in zip(letters, vowels, strict=False)) + "x"
    form = draw(
        st.sampled_from(["accent", "invisible", "fullwidth", "split", "camel", "hyphen", "nfd"])
    )
    at = draw(st.integers(1, len(term) - 1))
    if form == "accent":
        shown = unicodedata.normalize("NFC", term[:at] + draw(st.sampled_from(ACCENTS)) + term[at:])
    elif form == "nfd":
        shown = term[:at] + draw(st.sampled_from(ACCENTS)) + term[at:]
    elif form == "invisible":
        shown = term[:at] + draw(st.sampled_from(INVISIBLE)) + term[at:]
    elif form == "fullwidth":
        shown = "".join(chr(ord(c) + 0xFEE0) for c in term)
    elif form == "split":
        shown = term[:at] + draw(st.sampled_from(["_", " ", "-"])) + term[at:]
    elif form == "camel":
        shown = term[:at] + term[at].upper() + term[at + 1 :]
    else:
        shown = term[:at] + "-\n" + term[at:]
    capital = draw(st.booleans())
    return (term.capitalize() if capital else term), shown


@FAST
@given(written_forms(), st.booleans())
def test_not_found_without_asking_only_when_no_form_is_written(
    pair: tuple[str, str], in_question_form: bool
) -> None:
    term, shown = pair
    text = f"The keeper met {shown} at the quay.\n\nThe lamp was lit."
    question = f"Who did the keeper meet, {term}?"
    terms = question_terms(question)
    assert absent_terms(terms, text) == []
    # and the other way about: the question writes the form, the text the plain word
    if in_question_form:
        assert absent_terms(question_terms(f"Who is {shown}?"), f"The keeper met {term}.") == []
    # a term no form of which is written is still absent
    assert absent_terms(["zqxjvw"], text) == ["zqxjvw"]


def test_the_properties_negations_are_the_quote_checks() -> None:
    assert {"not", "never", "no"} <= NEGATIONS
    assert content_words("not the Bluebell") == ["bluebell"]

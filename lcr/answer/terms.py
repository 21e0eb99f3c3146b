"""The question's terms, and whether a document ever uses them.

A *term* is a word of the question that is rare in English: rarer than
``answer.term_zipf`` on the Zipf scale of word frequency (wordfreq's English list; 3 is
once in a million words of running English). A program's, a package's or a person's
name is a term ("autopkgtest", "debconf", "gnuplot", "Kell"); the words a question
frames its ask with ("role", "nationality", "significance", "specifies") are not.

A document that never writes a term of the question cannot hold its answer in the
question's terms, so under ``answer.not_found=abstain`` lcr replies "not found" without
asking the model (:func:`absent_terms`). A term counts as written when the text has a
word that begins with it or with its Snowball stem ("codenames" for "codename",
"ontologies" for "ontology"), or the term split by a space, hyphen or underscore
("code name"), or, for a term of five letters or more, a word one edit away from it: a
question's typo ("approcimately") is a term no text writes, and the text's spelling then
stands for it.
Numbers and words under three letters are never terms: numbers are written in too many
ways, and two letters are too short to tell a typo from a word. The list is English's, so
a question in another language has no terms.

Pure: text in, words out; the frequency list and the stemmer load once.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence

from lcr.answer.support import ABOUT_THE_TEXT, content_words

TERM_ZIPF = 3.0
"""``answer.term_zipf``'s default: a question word rarer than once in a million English
words that the document never writes means "not found". Chosen on HotpotQA dev (no
answerable question has such a word missing from its corpus; 148 of 300 questions asked of
another corpus do) and SQuALITY dev (none of 125 questions of their own story):
docs/answer-step.md#a-term-the-document-never-uses-issue-53."""

# words that ask for something done to the text, not a thing in it: rare in English, yet
# no text need write them ("Summarise the whole story", "List them chronologically")
_ASKING = (
    "summar",
    "enumerat",
    "itemi",
    "paraphras",
    "recap",
    "chronolog",
    "characteri",
    "analys",
    "analyz",
    "elaborat",
    "explain",
    "tldr",
)
# the frequency list is English's: a question with none of these words is in another
# language, where every word would look rare, and it has no terms
_ENGLISH_WORDS = """what who whom whose which when where why how the is are was were do does
did of and that this with"""
_ENGLISH = frozenset(_ENGLISH_WORDS.split())
_SHORTEST_TERM = 3
_SHORTEST_TYPO = 5  # a term this long or longer is written when a word is one edit away
_WORD = re.compile(r"[^\W_]+")


@functools.cache
def _frequencies() -> dict[str, float]:
    from wordfreq import get_frequency_dict

    return get_frequency_dict("en", wordlist="large")


@functools.cache
def _stemmer() -> object:
    import Stemmer

    return Stemmer.Stemmer("english")


def zipf(word: str) -> float:
    """How common ``word`` (lower case) is in English, on the Zipf scale: log10 of its
    uses per billion words; 0 for a word the list does not have."""
    share = _frequencies().get(word, 0.0)
    return math.log10(share) + 9.0 if share > 0 else 0.0


def question_terms(question: str, floor: float = TERM_ZIPF) -> list[str]:
    """The question's words rarer in English than ``floor`` (Zipf), in order, lower case:
    function words, numbers, words under three letters, words about the text itself
    ("story", "narrator") and words asking for something done to it ("summarise",
    "chronologically") left out. A question with no English question or function word
    ("Quelle est la nationalité de Marie Curie ?") has none: the list is English."""
    if floor <= 0 or not _ENGLISH.intersection(re.findall(r"\w+", question.lower())):
        return []
    words = (w for chunk in content_words(question) for w in _WORD.findall(chunk))
    terms: list[str] = []
    for word in words:
        if len(word) < _SHORTEST_TERM or any(c.isdigit() for c in word) or word in terms:
            continue
        if word in ABOUT_THE_TEXT or word.startswith(_ASKING):
            continue
        if zipf(word) < floor:
            terms.append(word)
    return terms


def absent_terms(terms: Sequence[str], text: str) -> list[str]:
    """The ``terms`` that ``text`` never writes (the module's rules), in order."""
    if not terms:
        return []
    lower = text.lower()
    unseen = [t for t in terms if not _written(t, lower)]
    if not unseen:
        return []
    vocabulary = {w for w in _WORD.findall(lower) if len(w) >= _SHORTEST_TYPO - 1}
    return [t for t in unseen if not _typo_of_any(t, vocabulary)]


def _written(term: str, lower: str) -> bool:
    """Whether a word of ``lower`` begins with the term or its stem ("fenti" is not the
    start of "Fenty"), or is the term split once by a space, hyphen or underscore."""
    stem = str(_stemmer().stemWord(term)) or term  # type: ignore[attr-defined]
    if any(_starts_a_word(lower, form) for form in {term, stem}):
        return True
    for i in range(2, len(term) - 1):  # a literal first: the scan runs at C speed
        split = re.compile(re.escape(term[:i]) + r"[\s_-]+" + re.escape(term[i:]))
        if any(_word_start(lower, hit.start()) for hit in split.finditer(lower)):
            return True
    return False


def _starts_a_word(lower: str, needle: str) -> bool:
    at = lower.find(needle)
    while at >= 0:
        if _word_start(lower, at):
            return True
        at = lower.find(needle, at + 1)
    return False


def _word_start(text: str, at: int) -> bool:
    """Whether ``at`` starts a word: the text starts there, or what comes before is
    neither a letter nor a digit (an underscore starts a new word here)."""
    return at == 0 or not text[at - 1].isalnum()


def _typo_of_any(term: str, vocabulary: Iterable[str]) -> bool:
    """Whether a word of ``vocabulary`` is one edit (a letter added, dropped, changed, or
    two neighbours swapped) from a term long enough for that to be a typo."""
    if len(term) < _SHORTEST_TYPO:
        return False
    return any(abs(len(w) - len(term)) <= 1 and one_edit_apart(term, w) for w in vocabulary)


def one_edit_apart(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one insertion, deletion, substitution or
    swap of two neighbouring letters."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i, j = diff[0], diff[-1]
        return len(diff) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long[i]:
        i += 1
    return short[i:] == long[i + 1 :]

"""The question's terms, and whether a document ever uses them.

A *term* is a word of the question that is rare in English: rarer than
``answer.term_zipf`` on the Zipf scale of word frequency (wordfreq's English list; 3 is
once in a million words of running English). A program's, a package's or a person's
name is a term ("autopkgtest", "debconf", "gnuplot", "Kell"); the words a question
frames its ask with ("role", "nationality", "significance", "specifies") are not.

A document that never writes a term of the question cannot hold its answer in the
question's terms, so under ``answer.not_found=abstain`` lcr replies "not found" without
asking the model (:func:`absent_terms`). Text and question are compared after
:func:`comparable`: NFKC (ligatures, fullwidth letters), accents folded, invisible
characters (zero-width space and joiners, the soft hyphen, the byte-order mark) dropped,
a word split by a line-end or page-end hyphen joined, identifiers split into their parts
("getUserName", "get_user_name" and "GetUserName" are "get user name"; an identifier
with a rare part is one term, written with any separators or none). A term counts as
written when the text has a word that begins with it, with its Snowball stem
("codenames" for "codename", "ontologies" for "ontology") or with its root less a Latin or
Greek plural's ending ("cactus" for "cacti"), or the term split by spaces, hyphens or
underscores ("code name"), or, for a term of five letters or more, a word one edit away
from it: a question's typo ("approcimately") is a term no text writes, and the text's
spelling then stands for it.

Where the rule cannot be sure, the model is asked instead: numbers and words under three
letters are never terms (numbers are written in too many ways, and two letters are too
short to tell a typo from a word), nor are acronyms ("WPA", which a text may spell out),
Roman numerals, words of another script ("Пушкин", which a text may write "Pushkin"), or
lower-case words of the language a text may say otherwise ("skiff" for "boat":
:data:`SYNONYM_ZIPF`); a text with words of another script has no absent terms. The list
is English's, so a question in another language has no terms (:func:`is_english`
decides by more than one word).

Pure: text in, words out; the frequency list and the stemmer load once.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence

from lcr.answer.support import ABOUT_THE_TEXT, content_words
from lcr.text.folding import fold, join_line_breaks

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
# the frequency list is English's: a question is English when it has more of English's
# question and function words than of the commonest words of the other languages written
# in Latin letters, and at least one ("Was ist ...", "Wie was de ...", "Como se faz do
# ..." are not: "was" or "do" alone decides nothing)
_ENGLISH_WORDS = """what who whom whose which when where why how the is are was were do does
did of and that this with an to for from by it its has have had be been can could would
there their they he she his her in on at any many much"""
_ENGLISH = frozenset(_ENGLISH_WORDS.split())
_OTHER_WORDS = """der das des dem ein eine einer eines einem einen ist sind waren wer wie wo wann
warum welche welcher welches und oder nicht mit von zu auf haben het een wat waar wanneer
hoe welke waarom niet naar zijn heeft hebben ook le les une est sont qui quoi quel
quelle quels quelles pourquoi avec pour dans du el los las una unos es quien quién
cual cuál donde dónde cuando cuándo por para del o os uma uns umas foi eram quem qual
quais onde quando porque como com em na nas nos da dos que se lo gli il della delle
dei che chi perché sono è och att är var vem hvad hvem hvor og ikke"""
_OTHER = frozenset(_OTHER_WORDS.split())
"""The commonest words of German, Dutch, French, Spanish, Portuguese, Italian and the
Scandinavian languages that English does not use as words of its own ("die", "war",
"son", "do" and "no" left out)."""
_SHORTEST_TERM = 3
"""A shorter word is never a term. Chosen by hand, not measured."""
_SHORTEST_TYPO = 5  # a term this long or longer is written when a word is one edit away
"""Chosen by hand, not measured."""
_WORD = re.compile(r"[^\W_]+")
_OTHER_SCRIPT = re.compile(r"[^\W\d_\x00-\u024f\u1e00-\u1eff]")
"""A letter of another script than Latin (after :func:`~lcr.text.folding.fold`)."""
_OTHER_SCRIPT_WORD = re.compile(r"[^\W\d_\x00-\u024f\u1e00-\u1eff]{2,}")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")  # "getUser"
_CAPITALS = re.compile(r"([A-Z])([A-Z][a-z])")  # "HTTPServer"
_ROMAN = re.compile(r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})", re.I)
# the endings of Latin and Greek plurals English keeps ("cacti", "hippopotami", "larvae",
# "bacteria", "indices", "analyses", "phenomena"): a term without one is written when a
# word begins with what is left, in either number
_IRREGULAR = ("ices", "ae", "us", "um", "a", "i", "is", "es", "ex", "ix", "on", "en")
_SHORTEST_ROOT = 4
"""The fewest letters left of a term with a Latin or Greek plural's ending dropped. Chosen
by hand, not measured."""
SYNONYM_ZIPF = 1.5
"""A lower-case question word at least this common in English is a word of the language
("skiff"), which a document may say in other words ("boat"): it is never a term, and the
model is asked. Names ("Kell"), programs ("gnuplot", "debconf") and words the list lacks
are terms. Chosen by hand, not measured."""


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


def comparable(text: str) -> str:
    """``text`` as terms are compared in it: folded (:func:`~lcr.text.folding.fold`:
    NFKC, accents, invisible characters), a word split by a line-end hyphen joined,
    identifiers split into their parts ("getUserName" and "get_user_name" as "get user
    name"), lower case."""
    text = join_line_breaks(fold(text))
    return transliterate(_split_identifiers(text, " ").lower())


_CYRILLIC_LATIN = """a b v g d e e zh z i i k l m n o p r s t u f kh ts ch sh shch - y - e yu ya
i i e g u"""
_CYRILLIC = dict(
    zip("абвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґў", _CYRILLIC_LATIN.split(), strict=True)
)
_GREEK_LATIN = "a b g d e z e th i k l m n x o p r s s t y ph ch ps o"
_GREEK = dict(zip("αβγδεζηθικλμνξοπρσςτυφχψω", _GREEK_LATIN.split(), strict=True))
_LATIN_LETTERS = str.maketrans(
    {k: ("" if v == "-" else v) for k, v in {**_CYRILLIC, **_GREEK}.items()}
)


def transliterate(lower: str) -> str:
    """Lower-case Cyrillic and Greek letters in Latin ones ("пушкин" is "pushkin"), so a
    term written in Latin letters is found where a text writes it in those scripts."""
    if lower.isascii():
        return lower
    return _CYRILLIC_OR_GREEK.sub(lambda run: run.group().translate(_LATIN_LETTERS), lower)


_CYRILLIC_OR_GREEK = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]+")


def _split_identifiers(text: str, mark: str) -> str:
    """``text`` with ``mark`` between an identifier's parts ("getUserName", "HTTPServer")
    and for its underscores."""
    if mark != "_":
        text = text.replace("_", mark)
    between = rf"\1{mark}\2"
    return _CAPITALS.sub(between, _CAMEL.sub(between, text))


def is_english(question: str) -> bool:
    """Whether ``question`` is in English, by more than one word: it has at least one of
    English's question and function words, and more of them than of the commonest words
    of other languages written in Latin letters."""
    words = re.findall(r"[^\W\d_]+", fold(question).lower())
    english = sum(w in _ENGLISH for w in words)
    other = sum(w in _OTHER for w in words)
    return english > 0 and english > other


def _unsure(token: str) -> bool:
    """Whether a question's word (as written, folded) is one the rule cannot be sure a
    document lacks: a word of another script ("Пушкин", which a text may write
    "Pushkin"), an acronym ("WPA", "UNHCR", which a text may spell out) or a Roman
    numeral ("XIV", which a text may write 14)."""
    if _OTHER_SCRIPT.search(token):
        return True
    words = _WORD.findall(token)
    if any(len(w) >= 2 and w.isupper() for w in words):
        return True
    return any(w.islower() and _ROMAN.fullmatch(w) is not None for w in words)


def question_terms(question: str, floor: float = TERM_ZIPF) -> list[str]:
    """The question's words rarer in English than ``floor`` (Zipf), in order, lower case
    and folded (:func:`comparable`): function words, numbers, words under three letters,
    words about the text itself ("story", "narrator"), words asking for something done to
    it ("summarise", "chronologically"), and words the rule cannot be sure of (another
    script, acronyms, Roman numerals, words of the language a text may say otherwise:
    :data:`SYNONYM_ZIPF`) left out. A question not in English (:func:`is_english`) has
    none: the list is English's."""
    if floor <= 0 or not is_english(question):
        return []
    terms: list[str] = []
    for token in re.findall(r"\S+", fold(question)):
        if _unsure(token):
            continue
        lowered = token[:1].islower()
        for word in content_words(_split_identifiers(token, "_")):  # "get_user_name"
            parts = [p for p in word.split("_") if p]
            rare = [p for p in parts if _rare(p, floor, lowered)]
            # an identifier is one term, its parts joined, when any part of it is rare: a
            # text may write it with any separators or none ("get_user_name", "getUserName")
            term = "".join(parts) if len(parts) > 1 and rare else (rare[0] if rare else "")
            if term and term not in terms:
                terms.append(term)
    return terms


def _rare(word: str, floor: float, lowered: bool) -> bool:
    """Whether one word of a question is a term (:func:`question_terms`' rules)."""
    if len(word) < _SHORTEST_TERM or any(c.isdigit() for c in word):
        return False
    if word in ABOUT_THE_TEXT or word.startswith(_ASKING):
        return False
    common = zipf(word)
    return not (common >= floor or (lowered and common >= SYNONYM_ZIPF))


def absent_terms(terms: Sequence[str], text: str) -> list[str]:
    """The ``terms`` that ``text`` never writes (the module's rules), in order: none when
    at least :data:`OTHER_SCRIPT_SHARE` of its words are of a script :func:`comparable`
    does not transliterate, where a term may stand in that script."""
    if not terms:
        return []
    lower = _comparable_text(text)
    unseen = [t for t in terms if not _written(t, lower)]
    if not unseen or _other_script_share(lower) >= OTHER_SCRIPT_SHARE:
        return []
    vocabulary = {w for w in _WORD.findall(lower) if len(w) >= _SHORTEST_TYPO - 1}
    return [t for t in unseen if not _typo_of_any(t, vocabulary)]


OTHER_SCRIPT_SHARE = 0.01
"""The share of a text's words in a script other than Latin, Cyrillic or Greek (Han, Arabic,
Hebrew, ...) from which a term it never writes in Latin letters may stand in that script:
a passage in that script, not a name quoted once in it. Chosen by hand, not measured against
another value: with it 131 of HotpotQA dev's 300 questions asked of another text are still
"not found" without a call (148 before; commit 01ab10c)."""


@functools.lru_cache(maxsize=4)
def _other_script_share(lower: str) -> float:
    if lower.isascii():
        return 0.0
    other = len(_OTHER_SCRIPT_WORD.findall(lower))
    return other / max(1, len(lower.split())) if other else 0.0


@functools.lru_cache(maxsize=4)
def _comparable_text(text: str) -> str:
    """:func:`comparable` of a document's text, kept for the next question of it."""
    return comparable(text)


def _forms(term: str) -> set[str]:
    """The term, its Snowball stem, and its root without a Latin or Greek plural's or
    singular's ending ("cact" of "cacti" and of "cactus")."""
    stem = str(_stemmer().stemWord(term)) or term  # type: ignore[attr-defined]
    forms = {term, stem}
    for ending in _IRREGULAR:
        if term.endswith(ending) and len(term) - len(ending) >= _SHORTEST_ROOT:
            forms.add(term[: -len(ending)])
    return forms


def _written(term: str, lower: str) -> bool:
    """Whether a word of ``lower`` begins with the term or one of its :func:`_forms`
    ("fenti" is not the start of "Fenty"), or is the term split by spaces, hyphens or
    underscores ("code name", "get user name")."""
    if any(_starts_a_word(lower, form) for form in _forms(term)):
        return True
    if len(term) < 2:
        return False
    gap = r"[\s_-]*"
    split = re.compile(re.escape(term[0]) + "".join(gap + re.escape(c) for c in term[1:]))
    return any(_word_start(lower, hit.start()) for hit in split.finditer(lower))


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

"""The words of answers and quotes, compared as lcr compares them: text made comparable
(:func:`normalise`), words as forms and stems, the words that carry meaning, and what a
sentence states or only denies (:func:`stated`: "reply Seagull, not Bluebell" does not
state "Bluebell"). Pure: text in, words out; :mod:`lcr.answer.quotes` builds its checks
on them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lcr.text.folding import fold_char, line_break_hyphens

_ALIKE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_EDGE = "\"' .,;:!?-()[]"


def normalise(text: str, join: bool = True) -> tuple[str, list[int]]:
    """``text`` made comparable (lower case, folded as :func:`lcr.text.folding.fold`
    folds, one space for any run of blanks, quote marks, dashes and the ellipsis in one
    form each, and, with ``join``, a word a line or page end split by a hyphen joined:
    "drift-\\nwood" is "driftwood"), and for each character of the result the offset in
    ``text`` it came from (an ellipsis becomes ``...``, three from one)."""
    out: list[str] = []
    where: list[int] = []
    blank = False
    skip: set[int] = set()
    if join:
        for s, e in line_break_hyphens(text):
            skip.update(range(s, e))
    for i, ch in enumerate(text):
        if i in skip:
            continue
        if not ch.isascii():
            ch = fold_char(ch)
            if not ch:
                continue
        if ch.isspace():
            blank = bool(out)
            continue
        if blank:
            out.append(" ")
            where.append(i)
            blank = False
        if ch == "\u2026":
            out.extend("...")
            where.extend((i, i, i))
            continue
        for c in ch.translate(_ALIKE).lower():
            out.append(c)
            where.append(i)
    return "".join(out), where


def _normal(text: str) -> str:
    return normalise(text)[0]


_SENSE_WORD_LIST = """not no never none nor neither nobody nothing nowhere without except
excepting unless hardly barely scarcely seldom rarely cannot instead rather lest if whether might
perhaps maybe possibly allegedly supposedly reportedly falsely wrongly only almost
nearly false untrue fake denied deny denies refused failed fails fail lacks lacked
formerly until"""
SENSE_WORDS = frozenset(_SENSE_WORD_LIST.split())
"""Words an elision must never drop: left out from between a quote's pieces, each turns
what the pieces say into something else ("The treasure was never hidden in the cellar"
is not "The treasure was … hidden in the cellar"): negations, exceptions, conditions,
hedges, and "formerly" or "until", which end a fact."""


def changes_sense(text: str) -> bool:
    """Whether ``text`` (what an elision leaves out) has a word of :data:`SENSE_WORDS`,
    or a verb with "n't"."""
    return any(w in SENSE_WORDS or w.endswith("n't") for w in word_forms(text))


_NUMBER_WORDS = """zero one two three four five six seven eight nine ten eleven twelve
thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"""
_NUMBERS = {w: str(n) for n, w in enumerate(_NUMBER_WORDS.split())}
_NUMBERS.update(
    {"first": "1", "second": "2", "third": "3", "fourth": "4", "fifth": "5", "once": "1"}
)
_ORDINALS = """sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth fifteenth
sixteenth seventeenth eighteenth nineteenth twentieth"""
_NUMBERS.update({w: str(n) for n, w in enumerate(_ORDINALS.split(), 6)})
_FUNCTION_WORD_LIST = """a an the of in on at to for by with from and or but is are was were
be been being it its this that these those he she they his her their them as which who whom
what when where why how not no yes do does did has have had i you we there than
through into onto upon over under about after before between during within across along
among against toward towards via"""
_FUNCTION_WORDS = frozenset(_FUNCTION_WORD_LIST.split())


def word_forms(text: str) -> list[str]:
    """Words of ``text``, lower case, numbers as digits (``four`` is ``4``, ``1,000``
    is ``1000``)."""
    words = re.findall(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+(?:'[^\W\d_]+)?", _normal(text))
    return [_NUMBERS.get(w, w.replace(",", "")) for w in words]


_PAST_FORM_LIST = """bring brought; buy bought; catch caught; teach taught; think thought;
fight fought; seek sought; give gave given; take took taken; get got gotten; go went gone;
make made; say said; tell told; come came; keep kept; hold held; build built; send sent;
spend spent; lose lost; pay paid; sell sold; stand stood; write wrote written; speak spoke
spoken; break broke broken; choose chose chosen; drive drove driven; eat ate eaten; fall
fell fallen; forget forgot forgotten; grow grew grown; know knew known; begin began begun;
drink drank drunk; fly flew flown; hide hid hidden; steal stole stolen; wake woke woken;
sleep slept; hear heard; mean meant; win won; run ran; throw threw
thrown; wear wore worn; ride rode ridden; sing sang sung; swim swam swum;
find found"""
_BASE_FORMS = {
    form: forms.split()[0] for forms in _PAST_FORM_LIST.split(";") for form in forms.split()[1:]
}
"""Irregular past forms and their verb ("brought" is "bring"), so that an answer's
"brought" is the question's "bring" (#73); ambiguous forms (left, saw, born, felt) are
left out, and so are forms that are also common names: rose, sat, met."""


def stem(word: str) -> str:
    """A word with a possessive or plural ending dropped, and an irregular past form as
    its verb (:data:`_BASE_FORMS`), as quotes compare words."""
    if word in _BASE_FORMS:
        return _BASE_FORMS[word]
    for ending in ("'s", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


_MODAL_LIST = "can could may might must shall should will would"
MODALS = frozenset(_MODAL_LIST.split())
"""Modal verbs: function words when judging what a question asks ("What ... can it carry?"
asks nothing of "can"; #73's first-hour measurement)."""


def root(word: str) -> str:
    """:func:`stem`, then an ``-ing`` or ``-ed`` ending and a final ``e`` dropped, so
    that "used" is "use" and "loaded" is "load", "file" is "files": how a quote's
    relatedness to the question compares words (coarser than :func:`stem`, which
    compares an answer's own words)."""
    base = stem(word)
    for ending in ("ing", "ed"):
        if base.endswith(ending) and len(base) - len(ending) >= 2:
            base = base[: -len(ending)]
            break
    return base[:-1] if base.endswith("e") and len(base) >= 3 else base


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry its meaning: function words dropped."""
    return [w for w in word_forms(text) if w not in _FUNCTION_WORDS]


_NEGATION_LIST = """not no never nor neither none nobody nothing nowhere without cannot instead"""
NEGATIONS = frozenset(_NEGATION_LIST.split())
"""Words that deny what follows them in their clause ("Seagull, not Bluebell")."""
_NOT_DENYING_LIST = "only until just least later less sooner more merely"
_NOT_DENYING = frozenset(_NOT_DENYING_LIST.split())
NEGATION_REACH = 8
"""The most words after a negation, in its clause, that it denies. Chosen by hand, not
measured."""
_CLAUSE = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+(?:'[^\W\d_]+)?|[,;:.!?()\u2026]| -+ ")


def _is_negation(word: str) -> bool:
    return word in NEGATIONS or word.endswith("n't")


def negates(text: str) -> bool:
    """Whether ``text`` has a negation (:data:`NEGATIONS`, or "n't")."""
    return any(_is_negation(w) for w in word_forms(text))


def stated(text: str, key: Callable[[str], str] | None = None) -> tuple[set[str], set[str]]:
    """The stems of ``text``'s words that it states, and those only a negation before
    them in their clause denies ("not Bluebell": "bluebell" is denied; "not only" and
    "not until" deny nothing; a clause ends at punctuation or "but"); ``key`` makes the
    stem (:func:`stem` by default)."""
    key = key or stem
    said: set[str] = set()
    denied: set[str] = set()
    since = NEGATION_REACH + 1
    tokens = [t.group() for t in _CLAUSE.finditer(_normal(text))]
    for i, token in enumerate(tokens):
        if not token[0].isalnum() or token == "but":
            since = NEGATION_REACH + 1
            continue
        word = _NUMBERS.get(token, token.replace(",", ""))
        if _is_negation(word):
            after = tokens[i + 1] if i + 1 < len(tokens) else ""
            since = NEGATION_REACH + 1 if after in _NOT_DENYING else 0
            continue
        since += 1
        (denied if since <= NEGATION_REACH else said).add(key(word))
    return said, denied - said

"""Telling a reply that says the answer is missing: pure text in, verdict out."""

from __future__ import annotations

import re

NOT_FOUND = "not found in the document"
"""The fixed reply of ``answer.not_found=abstain`` when the evidence lacks the answer."""


# A reply that says the excerpts lack the answer, in the words smollm2-135m uses when
# told to reply NOT_FOUND (tests/test_answer_settings.py holds its real replies). Each
# names what is missing (the answer, the excerpts, "I"), so an answer that merely
# contains a negation ("They do not know the way") is not taken for one.
_NOT_FOUND_SAYINGS = re.compile(
    r"\b(not found in the (document|excerpts?|text)"
    r"|i (do not|don't|cannot|can't) (know|tell|find)"
    r"|(cannot|can't) be (determined|found|answered)"
    r"|(excerpts?|text|document|passages?|context) (does|do) not "
    r"(contain|mention|say|state|provide|specify|include)"
    r"|(answer|information) is not (in|mentioned|given|stated|provided|specified|available)"
    r"|no (information|mention) (of|about|on)"
    r"|not enough information)\b"
)
_LONG_REPLY_WORDS = 30  # past this a saying counts only at the reply's start
"""Chosen by hand, not measured."""


def says_not_found(reply: str) -> bool:
    """Whether ``reply`` says the answer is not in the excerpts (in any of a few wordings):
    the fixed phrase anywhere, or another saying at the start or in a short reply."""
    text = " ".join(re.sub(r"[^\w\s']", " ", reply.lower().replace("\u2019", "'")).split())
    if NOT_FOUND in text:
        return True
    hit = _NOT_FOUND_SAYINGS.search(text)
    return hit is not None and (hit.start() == 0 or len(text.split()) <= _LONG_REPLY_WORDS)

"""PECAN's prompts (Tables A1 and A2, word for word) as token pieces.

Prompts are assembled as token ids piece by piece, not as one string, because
PECAN needs to know which tokens belong to which input node (edge weights), to
the question (r), and to reuse the node pieces in a KV cache. Each segment is
shown on one line as ``* text`` (the papers' examples show segments so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lcr.answer.quotes import ask_for_quote, reply_form
from lcr.errors import ModelError
from lcr.models.base import Message

if TYPE_CHECKING:
    from lcr.models.base import AttentionLLM

PROMPT_VERSION = "pecan-v1"

# Table A1 (Attention Graph Construction); the segments go where {segments} is.
BUILD_HEAD = (
    "Summary the following information. Each segment is separated by a new line symbol.\n\n"
)
BUILD_TAIL = (
    "\n"
    "Split your summary into different summary points according to the semantic information "
    "in these information points. It is not necessary to generate each summary point for each "
    "information point. Gather and organize information into summary points. In each summary "
    "point, try to avoid using pronouns like he/she/they and instead use full names. Generate "
    "in the format of:\n\n"
    "* summary point\n* summary point\n* summary point\n.....\n\n"
    "Do not provide any explanation and start the summary directly."
)

# Table A2 (Graph Search): first turn, then second turn.
SEARCH_HEAD = (
    'Can this question be answered by the following information? Response "Yes" or "No" in '
    "one word. Do not provide any explanation.\n\nQuestion:\n"
)
SEARCH_MID = "\n\nInformation:\n"
SECOND_TURN = (
    "Given the above information and question, answer the question as concisely as you can."
)
# pecan.second_turn=question: the second turn restates the question (small models
# otherwise keep the first turn's one-word format and reply "Yes")
RESTATED = "\n\nQuestion:\n"
SECOND_TURNS = ("paper", "question")  # PecanQuery.second_turn

_SLOT = "\u0000PECAN-SLOT\u0000"


class PromptTokens(Protocol):
    """What assembling a build prompt reads of a model: its tokens and chat template
    (an :class:`~lcr.models.base.AttentionLLM`, or its tokenizer alone for an estimate)."""

    model_id: str

    def encode(self, text: str) -> list[int]: ...

    def render_text(self, messages: Sequence[Message]) -> str: ...


class WindowedTokens(PromptTokens, Protocol):
    """:class:`PromptTokens` and the window a build prompt must fit."""

    @property
    def context_window(self) -> int: ...


def segment_line(text: str) -> str:
    """A node as one line of a prompt."""
    return "* " + " ".join(text.split()) + "\n"


def render_text(llm: PromptTokens, messages: Sequence[Message]) -> str:
    """The chat-templated conversation as text, ending with the assistant's turn opening
    (a tokenizer without a template: contents joined by blank lines, as the backend does)."""
    return llm.render_text(messages)


def _split(llm: PromptTokens, messages: Sequence[Message]) -> tuple[str, str]:
    text = render_text(llm, messages)
    if text.count(_SLOT) != 1:
        raise ModelError(f"the chat template of {llm.model_id} does not keep the message text")
    before, _, after = text.partition(_SLOT)
    return before, after


@dataclass
class BuildPrompt:
    """Token ids of one batch's prompt and the ``[start, end)`` span of each input node."""

    ids: list[int]
    spans: list[tuple[int, int]]


def build_prompt(llm: PromptTokens, texts: Sequence[str]) -> BuildPrompt:
    before, after = _split(llm, [{"role": "user", "content": BUILD_HEAD + _SLOT + BUILD_TAIL}])
    ids = llm.encode(before)
    spans: list[tuple[int, int]] = []
    for t in texts:
        piece = llm.encode(segment_line(t))
        spans.append((len(ids), len(ids) + len(piece)))
        ids.extend(piece)
    ids.extend(llm.encode(after))
    return BuildPrompt(ids, spans)


def build_overhead(llm: PromptTokens) -> int:
    """Tokens of the build prompt around the segments."""
    return len(build_prompt(llm, []).ids)


@dataclass
class SearchPrompt:
    """The cached prefix, where the question sits in it, and the two suffixes.

    ``prefix`` ends right before the first node; ``check`` closes the first turn
    and opens the answer (Yes/No read after it); ``answers[word]`` is the check
    suffix, the first-turn reply ``word``, and the second turn, ready to generate.
    """

    prefix: list[int]
    question: tuple[int, int]
    check: list[int]
    answers: dict[str, list[int]]


def second_turn_text(question: str, second_turn: str = "question", quote: bool = False) -> str:
    """The second turn's words (Table A2's; ``question``: the question restated). With
    ``quote`` (``answer.check`` quote or both) the shared step's request for the sentence
    the answer rests on follows the paper's instruction, and its reply form ends the
    turn: the quote is checked against the nodes the search visited."""
    q = " ".join(question.split())
    if second_turn not in SECOND_TURNS:
        raise ModelError(f"unknown second turn {second_turn!r}")
    ask = ask_for_quote("information") if quote else ""
    form = "\n\n" + reply_form("information") if quote else ""
    return SECOND_TURN + ask + (RESTATED + q if second_turn == "question" else "") + form


def search_prompt(
    llm: AttentionLLM, question: str, second_turn: str = "question", quote: bool = False
) -> SearchPrompt:
    q = " ".join(question.split())
    turn = second_turn_text(question, second_turn, quote)
    first: Message = {"role": "user", "content": SEARCH_HEAD + q + SEARCH_MID + _SLOT}
    before, after = _split(llm, [first])
    head_end = before.rfind(SEARCH_HEAD + q + SEARCH_MID)
    if head_end < 0:
        raise ModelError(f"the chat template of {llm.model_id} changes the message text")
    q_start = head_end + len(SEARCH_HEAD)
    ids = llm.encode(before[:q_start])
    q_ids = llm.encode(q)
    span = (len(ids), len(ids) + len(q_ids))
    ids = ids + q_ids + llm.encode(before[q_start + len(q) :])
    answers: dict[str, list[int]] = {}
    for word in ("Yes", "No"):
        convo: list[Message] = [
            first,
            {"role": "assistant", "content": word},
            {"role": "user", "content": turn},
        ]
        b2, a2 = _split(llm, convo)
        if b2 != before:
            raise ModelError(f"the chat template of {llm.model_id} rewrites earlier turns")
        answers[word] = llm.encode(a2)
    return SearchPrompt(ids, span, llm.encode(after), answers)

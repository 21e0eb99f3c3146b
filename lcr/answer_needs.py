"""What answering a query needs beyond retrieval, and what happens when the support
check of ``answer.not_found=abstain`` cannot run (a server without log-probabilities):
the answer is given unchecked, said in a note and recorded as ``not_found=guess``,
rather than refused, so lcr's defaults work against any OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lcr.answer import AnswerSettings
from lcr.errors import NoLogprobsError
from lcr.methods.base import Needs
from lcr.models.base import Capability

if TYPE_CHECKING:
    from lcr.models.container import Models

# one line within 80 columns after "lcr: "; docs/answer-step.md says what to do instead
UNCHECKED = "note: server has no log-probabilities: answered as answer.not_found=guess"

Require = Callable[["Models", Needs, str], None]


def support_needs(answer: AnswerSettings, shared: bool) -> Needs:
    """The support check reads P(yes) from the answering LLM's logits (an OpenAI-compatible
    server must return log-probabilities); only the shared answer step (``shared``) runs it."""
    if answer.not_found == "abstain" and shared:
        return Needs(llm=frozenset({Capability.CHOICE_PROBABILITY}))
    return Needs()


def require_answer(
    models: Models,
    needs: Needs,
    answer: AnswerSettings,
    shared: bool,
    purpose: str,
    require: Require,
    note: Callable[[str], None] | None = None,
) -> AnswerSettings:
    """Check (with ``require``) what answering needs: ``needs`` and the support check's;
    the answer settings to answer with."""
    check = support_needs(answer, shared)
    if not check.llm:
        require(models, needs, purpose)
        return answer
    try:
        require(models, needs | check, f"{purpose} (answer.not_found=abstain's support check)")
    except NoLogprobsError:
        require(models, needs, purpose)
        if note is not None:
            note(UNCHECKED)
        return answer.replace(not_found="guess")
    return answer

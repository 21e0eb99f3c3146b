"""What answering a query needs beyond retrieval, and what happens when the support
check's scoring call (made when the support constants weigh P(yes):
:data:`~lcr.answer.support.ASK_P_YES`) cannot run on a server without
log-probabilities: the check reads the words alone, said in a note, rather than
refused. lcr's defaults make no scoring call, so they work against any
OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lcr.answer.shared import AnswerSettings
from lcr.errors import NoLogprobsError
from lcr.models.base import Capability
from lcr.models.needs import Needs

if TYPE_CHECKING:
    from lcr.models.container import Models

# one line within 80 columns after "lcr: "; docs/answer-step.md says what to do instead
UNCHECKED = "note: server has no log-probabilities: support checked without P(yes)"

Require = Callable[["Models", Needs, str], "Models"]


def support_needs(answer: AnswerSettings, shared: bool) -> Needs:
    """The support check's scoring call (``p_yes``) reads P(yes) from the answering
    LLM's logits (an OpenAI-compatible server must return log-probabilities). The shared
    answer step (``shared``) runs the check; a method's own step runs it only beside the
    quote check (``answer.check=both``)."""
    beside_quotes = answer.check == "both"
    if answer.not_found == "abstain" and answer.p_yes and (shared or beside_quotes):
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
) -> tuple[Models, AnswerSettings]:
    """Check (with ``require``) what answering needs: ``needs`` and the support check's;
    the models bound for them and the answer settings to answer with."""
    check = support_needs(answer, shared)
    if not check.llm:
        return require(models, needs, purpose), answer
    try:
        bound = require(models, needs | check, f"{purpose} (the support check's scoring call)")
    except NoLogprobsError:
        bound = require(models, needs, purpose)
        if note is not None:
            note(UNCHECKED)
        return bound, answer.replace(p_yes=False)
    return bound, answer

"""What one phase of a method needs from the models: roles and capabilities.

It sits with the models, below the methods, because the answer step, the plans and
the estimate all read it: a method declares it (``lcr.methods.base`` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lcr.models.base import Capability, describe_capabilities

GENERATE = frozenset({Capability.GENERATE})


@dataclass(frozen=True)
class Needs:
    """What one phase of a method needs: model roles and the LLM capabilities of each.

    An empty capability set means the role is not used (the model is never loaded).
    ``why`` is said to the user when retrieval loads an LLM, with how to avoid it.
    """

    llm: frozenset[Capability] = frozenset()  # the answering LLM (--llm)
    embedder: bool = False
    scorer: frozenset[Capability] = frozenset()  # a second LLM (LightPAL's scorer)
    scorer_model: str = ""  # the model the scorer role loads (a setting's value)
    why: str = ""
    # said after the error when the scorer model is not there: how to do without it
    scorer_missing: str = field(default="", compare=False)

    def __or__(self, other: Needs) -> Needs:
        return Needs(
            self.llm | other.llm,
            self.embedder or other.embedder,
            self.scorer | other.scorer,
            self.scorer_model or other.scorer_model,
            self.why or other.why,
            self.scorer_missing or other.scorer_missing,
        )

    @property
    def uses_llm(self) -> bool:
        return bool(self.llm)

    def describe(self) -> str:
        """``embedder + LLM (generate, attention)``, or ``nothing``."""
        parts = []
        if self.embedder:
            parts.append("embedder")
        if self.llm:
            parts.append(f"LLM ({describe_capabilities(self.llm)})")
        if self.scorer:
            parts.append(f"scorer LLM ({describe_capabilities(self.scorer)})")
        return " + ".join(parts) or "nothing"


NOTHING = Needs()
ANSWER_WITH_LLM = Needs(llm=GENERATE)

"""What an answer step returns: the answer, the evidence it read, and what each check
found, kept apart from the step so that the checks (:mod:`lcr.answer.grounding`) and the
methods' own steps share one record of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lcr.answer.quotes import Quote, QuoteCheck
from lcr.answer.support import SupportSignals
from lcr.evidence import EvidenceItem, Usage


@dataclass(frozen=True)
class AnswerResult:
    """What an answer step made of its evidence, built once: each later stage (the
    quote check, the support check, the step's name) returns a new value."""

    text: str
    used: list[EvidenceItem]
    dropped: int
    usage: Usage = field(default_factory=Usage)
    info: dict[str, Any] = field(default_factory=dict)  # what the step did, for the record
    # abstain: the support check's score and signals, and the answer a check withheld
    support: float | None = None
    signals: SupportSignals | None = None
    withheld: str | None = None
    # the step that answered, when not the method's own (GraphReader without a notebook)
    step: str = ""
    # the quotes found in the evidence read; the quote check's finding (None: not asked)
    quotes: tuple[Quote, ...] = ()
    quote_check: QuoteCheck | None = None

    def support_json(self) -> dict[str, Any]:
        """The checks' fields of ``--json`` and eval records: ``support`` (the score) and
        ``support_signals``; ``quote_check`` (``unfound`` quotes and the ``problem``, when
        the quote check ran); ``withheld_answer``. Quotes are cited where the index is
        known (:func:`lcr.pipeline.answering.answer_evidence`). None when no check ran."""
        out: dict[str, Any] = {}
        if self.support is not None:
            out["support"] = round(self.support, 4)
        if self.signals is not None:
            out["support_signals"] = self.signals.to_json()
        if self.quote_check is not None:
            out["quote_check"] = {
                "holds": self.quote_check.holds,
                "problem": self.quote_check.problem,
                "unfound": list(self.quote_check.unfound),
                "reply": self.quote_check.reply,
            }
        if self.withheld is not None:
            out["withheld_answer"] = self.withheld
        return out

"""The shared answer step: fitting evidence to the window, reporting what was used."""

from __future__ import annotations

from lcr.answer import answer, build_messages, fit_to_budget
from lcr.evidence import EvidenceItem
from tests.fakes import ScriptedLLM


def item(i: int, text: str, start: int) -> EvidenceItem:
    return EvidenceItem(f"c{i}", 0, 0, 1.0, text, [(start, start + len(text))])


def test_everything_fits() -> None:
    llm = ScriptedLLM()
    items = [item(0, "The key was in the weight.", 0), item(1, "Toby found it.", 30)]
    fitted = fit_to_budget("Who found the key?", items, llm, 1000)
    assert fitted.items == items and fitted.dropped == 0 and not fitted.truncated


def test_overflow_cuts_one_item_and_its_span_then_drops_the_rest() -> None:
    llm = ScriptedLLM()
    long_text = " ".join(f"word{i}" for i in range(400))
    items = [item(0, "Short first excerpt.", 0), item(1, long_text, 100), item(2, "Tail.", 9000)]
    fitted = fit_to_budget("Q?", items, llm, 200)
    assert [it.id for it in fitted.items] == ["c0", "c1"]
    cut = fitted.items[1]
    assert cut.extra["truncated"] is True and long_text.startswith(cut.text)
    assert cut.spans == [(100, 100 + len(cut.text))] and len(cut.text) < len(long_text)
    assert fitted.dropped == 1 and fitted.truncated
    prompt = build_messages("Q?", fitted.items)
    assert sum(llm.count_tokens(m["content"]) for m in prompt) <= 200


def test_answer_counts_only_its_own_call() -> None:
    llm = ScriptedLLM(words=3)
    llm.usage.add(1000, 1000, 5)  # earlier calls must not be charged to this answer
    out = answer("Who?", [item(0, "Ambrose rowed the boat.", 0)], llm, max_new_tokens=8)
    assert out.usage.calls == 1 and out.usage.prompt_tokens > 0
    assert out.text and out.used[0].id == "c0"

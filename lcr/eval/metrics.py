"""The papers' metrics: answer scores, evidence recall and query cost.

Pure functions of strings and spans, so each can be checked against hand-worked
cases. Answer scores take the best over several references, as SQuAD, NarrativeQA
and SQuALITY do; RULER's string-match scores instead ask for every (``all``) or
any (``part``) reference inside the prediction.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from lcr.evidence import merge_spans

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces.

    Beyond SQuAD's ASCII punctuation, Unicode punctuation (curly quotes, dashes,
    common in the stories) is removed too, so "“Mars”" and "Mars" agree.
    """
    text = text.lower()
    text = "".join(
        ch for ch in text if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1; two empty answers agree (1.0), one empty answer scores 0."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(ref)
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure from Google's ``rouge-score`` (Porter stemming, as in SQuALITY).

    Its tokenizer keeps only ASCII letters and digits, so a text of other scripts
    scores 0 against anything.
    """
    if not prediction.strip() or not reference.strip():
        return float(not prediction.strip() and not reference.strip())
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


def best_over(metric: Any, prediction: str, references: Sequence[str]) -> float | None:
    """The best score of ``prediction`` over ``references``; None when there are none."""
    if not references:
        return None
    return max(float(metric(prediction, r)) for r in references)


def string_match_all(prediction: str, references: Sequence[str]) -> float | None:
    """RULER: the share of references found (case-insensitive) inside the prediction."""
    if not references:
        return None
    low = prediction.lower()
    return sum(r.lower() in low for r in references) / len(references)


def string_match_part(prediction: str, references: Sequence[str]) -> float | None:
    """RULER: 1 when any reference is found (case-insensitive) inside the prediction."""
    if not references:
        return None
    low = prediction.lower()
    return float(any(r.lower() in low for r in references))


def answer_found(evidence_text: str, references: Sequence[str]) -> float | None:
    """1 when any reference occurs in ``evidence_text``, both normalised as for EM/F1.

    The match is on whole words (``4`` is not found in ``1984``), so with the answer
    scores it separates "not retrieved" from "retrieved but not read"; None without
    references (or when every reference normalises to nothing).
    """
    wanted = [n for n in (normalize_answer(r) for r in references) if n]
    if not wanted:
        return None
    text = f" {normalize_answer(evidence_text)} "
    return float(any(f" {n} " in text for n in wanted))


def answer_scores(prediction: str | None, references: Sequence[str]) -> dict[str, float]:
    """Every answer metric of one prediction; empty when there is nothing to score."""
    if prediction is None or not references:
        return {}
    return {
        "em": best_over(exact_match, prediction, references) or 0.0,
        "f1": best_over(token_f1, prediction, references) or 0.0,
        "rouge_l": best_over(rouge_l, prediction, references) or 0.0,
        "match_all": string_match_all(prediction, references) or 0.0,
        "match_part": string_match_part(prediction, references) or 0.0,
    }


# --------------------------------------------------------------------------- retrieval

Span = tuple[int, int]


def covered_chars(span: Span, union: Sequence[Span]) -> int:
    """Characters of ``span`` inside ``union`` (a merged span list)."""
    s, e = span
    total = 0
    for us, ue in union:
        if ue <= s:
            continue
        if us >= e:
            break
        total += min(e, ue) - max(s, us)
    return total


def evidence_recall(gold: Sequence[Span | None], returned: Sequence[Span]) -> dict[str, float]:
    """Recall of gold spans (source.txt offsets) by the returned evidence spans.

    ``recall``: share of gold items wholly covered (a needle or fact found in
    full); ``char_recall``: share of gold characters covered (for long spans such
    as QMSum's turn ranges). A gold string that could not be located (None)
    counts as missed in ``recall``; having no length, it is left out of ``char_recall``.
    """
    if not gold:
        return {}
    union = merge_spans(returned)
    whole = 0
    chars = 0
    total = 0
    for g in gold:
        if g is None:
            continue
        length = g[1] - g[0]
        got = covered_chars(g, union)
        whole += got >= length
        chars += got
        total += length
    return {"recall": whole / len(gold), "char_recall": chars / total if total else 0.0}


def doc_recall(gold_docs: Sequence[int], returned_docs: Sequence[int]) -> float | None:
    """Share of gold documents that at least one returned item comes from."""
    if not gold_docs:
        return None
    got = set(returned_docs)
    return sum(d in got for d in gold_docs) / len(gold_docs)


# --------------------------------------------------------------------------- cost

# Parameter counts of the offline presets (with tied embeddings counted once).
KNOWN_PARAMETERS: dict[str, float] = {
    "qwen2.5-coder-1.5b": 1.54e9,
    "qwen2.5-coder-0.5b": 0.49e9,
    "smollm2-135m": 0.135e9,
}


def llm_parameters(llm_id: str | None, llm: Any = None) -> float | None:
    """The LLM's parameter count: asked of the loaded model, else the preset table."""
    if llm is not None:
        for attr in ("num_parameters", "parameters_count"):
            value = getattr(llm, attr, None)
            if callable(value):
                value = value()
            if isinstance(value, int | float) and value > 0:
                return float(value)
        model = getattr(llm, "model", None)
        counter = getattr(model, "num_parameters", None)
        if callable(counter):
            try:
                return float(counter())
            except Exception:  # a backend without torch parameters
                pass
    if llm_id is None:
        return None
    return KNOWN_PARAMETERS.get(llm_id)


def query_flops(parameters: float | None, prompt_tokens: int, completion_tokens: int) -> float:
    """lcr's approximation of compute: 2 x parameters x tokens processed (prompt +
    generated). PECAN compares methods by cost but gives no formula (its Appendix F
    discusses attention's quadratic cost); this one ignores attention."""
    if parameters is None:
        return 0.0
    return 2.0 * parameters * (prompt_tokens + completion_tokens)

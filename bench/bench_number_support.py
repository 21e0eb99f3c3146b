"""Measure the rule for answers of numbers alone (``RELATED_SHARE``, #73) on HotpotQA dev.

Pure text, no model: for every dev question whose gold answer is numbers alone
(:func:`lcr.answer.quotes.numeric_answer`), the supporting-fact sentences that hold the
answer are the quotes a right answer can have ("right passed": one of them is accepted);
every other sentence of the question's corpus that holds a number other than the answer
and shares at least two of the question's words is a quote a wrong number could have
("wrong accepted": the number with that sentence is accepted). Each share given is
tried in turn::

    python bench/bench_number_support.py ../shared/data/hotpotqa/dev.jsonl --share 0.5 0.4

Choose nothing on hotpotqa/test.jsonl: the script refuses a file named test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lcr.answer import quotes
from lcr.answer.wording import content_words, stem, word_forms
from lcr.text.chunking import split_sentences


def accepted(answer: str, question: str, text: str, share: float) -> bool:
    """Whether ``text`` is accepted as the quote of ``answer`` under ``share``, as
    :func:`lcr.answer.quotes.unsupported` judges it."""
    if quotes.listing(text):
        return False
    if not quotes.numeric_answer(answer, question):
        return True
    return not quotes.bare(text) and quotes.relates(question, [text], share)


def cases(records: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(right, wrong): right as (question, answer, sentences stating it); wrong as
    (question, another number, its sentence)."""
    corpora = {d["id"]: d["text"] for r in records for d in r["documents"] if "text" in d}
    right: list[Any] = []
    wrong: list[Any] = []
    for r in records:
        q, a = r["question"], r["answers"][0]
        if not quotes.numeric_answer(a, q):
            continue
        keys, _ = quotes.answer_keys(a, q)
        facts = [e["text"] for e in r["evidence"]]
        stating = [t for t in facts if all(k in quotes.held_stems([t], a, q) for k in keys)]
        right.append((q, a, stating))
        asked = {stem(w) for w in content_words(q)}
        corpus = corpora[r["evidence"][0]["doc"]]
        for c in split_sentences(corpus, 0):
            text = corpus[c.start : c.end]
            numbers = [w for w in word_forms(text) if w.isdigit() and w not in keys]
            if (
                text not in facts
                and numbers
                and len(asked & {stem(w) for w in word_forms(text)}) >= 2
            ):
                wrong.append((q, numbers[0], text))
    return right, wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="HotpotQA dev in lcr eval JSONL (never test)")
    parser.add_argument("--share", type=float, nargs="+", default=[quotes.RELATED_SHARE])
    args = parser.parse_args(argv)
    if "test" in Path(args.data).name:
        print("bench_number_support: choose nothing on a test set", file=sys.stderr)
        return 2
    lines = Path(args.data).read_text(encoding="utf-8").splitlines()
    right, wrong = cases([json.loads(line) for line in lines])
    print("| share | right passed | wrong accepted |\n|---|---|---|")
    for share in args.share:
        ok = sum(any(accepted(a, q, t, share) for t in ts) for q, a, ts in right)
        bad = sum(accepted(a, q, t, share) for q, a, t in wrong)
        print(f"| {share} | {ok} of {len(right)} | {bad} of {len(wrong)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

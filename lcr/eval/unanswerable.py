"""Unanswerable questions from an answerable data set: each asked of another corpus.

The support check of ``answer.not_found=abstain`` must say "not found" where the
evidence holds no answer. A data set whose questions come in several corpora (the
HotpotQA dev set: three corpora of 50 questions) makes such questions for free:
each question is asked of the next corpus (in order of first appearance) whose
text holds neither its gold answers nor its gold evidence, so retrieval finds
only unrelated text. Gold answers are kept (``lcr eval``'s ``answer_found`` shows
one that occurs anyway), gold evidence is dropped (it is in no document read).

    python -m lcr.eval.unanswerable dev.jsonl -o dev.unanswerable.jsonl

Pure apart from :func:`main`: :func:`unanswerable` maps questions to questions.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from lcr.eval import dataset
from lcr.eval.dataset import Document, Question

_TRIVIAL = frozenset({"yes", "no"})  # answers any corpus holds as words


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _holds(corpus: str, question: Question) -> bool:
    """Whether ``corpus`` (normalised) holds a gold answer or a gold evidence text."""
    answers = [a for a in question.answers if _normal(a) not in _TRIVIAL]
    texts = [g.text for g in question.evidence if g.text]
    return any(f" {_normal(t)} " in corpus for t in [*answers, *texts] if _normal(t))


def unanswerable(questions: Sequence[Question]) -> list[Question]:
    """Each single-document question asked of the next other document (in order of first
    appearance) that holds none of its gold answers and gold evidence texts; a question
    no other document qualifies for is left out. Ids get ``@<document id>``."""
    corpora: dict[str, Document] = {}
    for q in questions:
        for d in q.documents:
            corpora.setdefault(d.id, d)
    order = list(corpora)
    normal = {k: f" {_normal(d.text)} " for k, d in corpora.items()}
    out: list[Question] = []
    for q in questions:
        if len(q.documents) != 1:
            continue
        home = order.index(q.documents[0].id)
        for step in range(1, len(order)):
            other = order[(home + step) % len(order)]
            if not _holds(normal[other], q):
                out.append(
                    Question(
                        id=f"{q.id}@{other}",
                        question=q.question,
                        answers=list(q.answers),
                        documents=[corpora[other]],
                        evidence=[],
                        task="unanswerable",
                        meta={**q.meta, "asked_of": other, "answered_in": q.documents[0].id},
                    )
                )
                break
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="an lcr eval data set (JSONL) of several corpora")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args(argv)
    made = unanswerable(dataset.load(args.data))
    dataset.save(made, args.out)
    print(f"{len(made)} unanswerable questions in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Unanswerable questions from an answerable data set: each asked of another corpus.

The support check of ``answer.not_found=abstain`` must say "not found" where the
evidence holds no answer. A data set whose questions come in several corpora (the
HotpotQA dev set: three corpora of 50 questions) makes such questions for free:
each question is asked of the next corpus (in order of first appearance) whose
text holds neither its gold answers nor its gold evidence, so retrieval finds
only unrelated text. Gold answers are kept (``lcr eval``'s ``answer_found`` shows
one that occurs anyway), gold evidence is dropped (it is in no document read).

    python -m lcr.eval.unanswerable dev.jsonl -o dev.unanswerable.jsonl
    python -m lcr.eval.unanswerable dev.jsonl -o dev.borrowed.jsonl --borrow-evidence

``--borrow-evidence`` gives each question, as its gold evidence, the gold sentences
of the question at the same place in the other corpus (``lcr eval -m gold`` then
reads a few sentences that do not answer it: the cheap reading of the same test).

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


def borrow_evidence(questions: Sequence[Question], made: Sequence[Question]) -> list[Question]:
    """Each unanswerable question with the gold evidence of the question at the same
    place among those of the corpus it is asked of (text evidence only); one whose
    borrowed evidence holds a gold answer of its own is left out."""
    by_corpus: dict[str, list[Question]] = {}
    for q in questions:
        if len(q.documents) == 1:
            by_corpus.setdefault(q.documents[0].id, []).append(q)
    place = {q.id: by_corpus[q.documents[0].id].index(q) for qs in by_corpus.values() for q in qs}
    home = {q.id: q for q in questions}
    out = []
    for u in made:
        lender_pool = by_corpus[u.documents[0].id]
        own = home[u.id.split("@")[0]]
        lender = lender_pool[place[own.id] % len(lender_pool)]
        texts = [g for g in lender.evidence if g.text]
        if not texts or any(_holds(f" {_normal(g.text or '')} ", own) for g in texts):
            continue
        out.append(
            Question(
                u.id,
                u.question,
                u.answers,
                u.documents,
                texts,
                u.task,
                {**u.meta, "evidence_of": lender.id},
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="an lcr eval data set (JSONL) of several corpora")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--borrow-evidence", action="store_true", help="see the module's doc")
    args = ap.parse_args(argv)
    questions = dataset.load(args.data)
    made = unanswerable(questions)
    if args.borrow_evidence:
        made = borrow_evidence(questions, made)
    dataset.save(made, args.out)
    print(f"{len(made)} unanswerable questions in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

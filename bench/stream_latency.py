"""Time to the first streamed piece of an answer and to the whole answer (issue #40).

    python bench/stream_latency.py INDEX -m bm25 -k 5 --llm MODEL "question" ...

For each question, the shared answer step is run as ``lcr ask`` runs it on a terminal
(its :class:`~lcr.answer.shared.AnswerStream` timed): from the start of the question, when
the evidence starts being read, when the first piece of the answer arrives, and when
the whole answer is done. Before streaming, a terminal showed the answer only then.
Prints one JSON line per question; the load average is printed with each.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from lcr import pipeline
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.store import Index


class TimedStream:
    def __init__(self, start: float) -> None:
        self.start = start
        self.reading_s: float | None = None
        self.first_s: float | None = None
        self.tokens = 0
        self.pieces = 0

    def reading(self, tokens: int) -> None:
        self.reading_s = time.perf_counter() - self.start
        self.tokens = tokens

    def text(self, piece: str) -> None:
        if self.first_s is None:
            self.first_s = time.perf_counter() - self.start
        self.pieces += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("index")
    parser.add_argument("questions", nargs="+")
    parser.add_argument("-m", "--method", default="bm25")
    parser.add_argument("-k", type=int, default=None)
    parser.add_argument("--llm", default="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    index = Index.open(args.index)
    models = Models(spec=ModelSpec(llm=args.llm))
    loaded = time.perf_counter()
    _ = models.llm
    print(json.dumps({"llm_load_s": round(time.perf_counter() - loaded, 1)}))
    for question in args.questions:
        load = os.getloadavg()
        plan = pipeline.plan_query(args.method, k=args.k)
        start = time.perf_counter()
        stream = TimedStream(start)
        asked = pipeline.checked_question(question)
        result = pipeline.ask_query(index, plan, asked, models, stream=stream)
        whole = time.perf_counter() - start
        row = {
            "method": args.method,
            "question": question,
            "answer": result.answer,
            "evidence_tokens": stream.tokens,
            "prompt_tokens": result.usage.prompt_tokens,
            "reading_at_s": round(stream.reading_s or 0.0, 2),
            "first_piece_s": round(stream.first_s or whole, 1),
            "whole_answer_s": round(whole, 1),
            "pieces": stream.pieces,
            "load_before": [round(x, 1) for x in load],
            "load_after": [round(x, 1) for x in os.getloadavg()],
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

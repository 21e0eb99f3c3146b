"""The book of issue #55's cost table: SQuALITY dev stories joined until 100k+ tokens.

Reads ``../shared/data/squality/dev.jsonl`` (public-domain stories, the Project
Gutenberg licence in each record's ``metadata``), joins the stories in file order,
separated by a blank line, until the joined text passes ``--tokens`` tokens of the
LLM's own tokenizer (the default LLM's GGUF vocabulary, read as ``lcr index
--estimate`` reads it: no weights loaded), and writes it to ``--out``. Prints one
JSON line per story taken (its id, title and the running token count), then a
summary line. The file is for measuring: keep it out of git.

    .venv/bin/python bench/archive/make_book.py --out /tmp/book61/book.txt
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr

from lcr.estimate.tokenizers import load_tokenizer
from lcr.models.spec import ModelSpec

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "squality" / "dev.jsonl"
SKIP = ("produced by", "distributed proofreading", "***", "[transcriber")


def title_of(text: str) -> str:
    """A story's title: its first line that is not Project Gutenberg's front matter."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.lower().startswith(SKIP):
            return line.removesuffix("***").strip()
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=Path("/tmp/book61/book.txt"))
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--llm", default="qwen2.5-coder-1.5b")
    parser.add_argument("--backend", default="llamacpp")
    args = parser.parse_args(argv)
    tokenizer = load_tokenizer(args.llm, args.backend, ModelSpec(llm=args.llm))
    parts: list[str] = []
    tokens = 0
    with args.data.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            story = record["document"].strip()
            parts.append(story)
            tokens = tokenizer.count_tokens("\n\n".join(parts))
            row = {"passage_id": record["metadata"]["passage_id"], "title": title_of(story)}
            print(json.dumps({**row, "characters": len(story), "book_tokens": tokens}))
            if tokens > args.tokens:
                break
    if tokens <= args.tokens:
        print(f"make_book: the stories hold only {tokens} tokens", file=sys.stderr)
        return 1
    book = "\n\n".join(parts) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(book, encoding="utf-8")
    summary = {"out": str(args.out), "stories": len(parts), "characters": len(book)}
    print(json.dumps({**summary, "tokens": tokens, "tokenizer": args.llm}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Small generated multi-hop tasks for MixPR's linking measurement (fixed seeds).

Variable tracking (RULER's recipe, with distractor chains) and Hash-Hop, hidden
in real prose filler (SQuALITY stories from ../shared/data), as BABILong hides
its facts in books. Gold evidence: every line of the asked chain.
"""

from __future__ import annotations

import json
import os
import random
import string
from dataclasses import dataclass
from pathlib import Path

from lcr.text.chunking import split_sentences

# the full data sets, as the tests find them: $LCR_SHARED_DATA, else ../shared/data
DATA = Path(
    os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


@dataclass
class Task:
    text: str
    question: str
    gold: list[str]  # exact lines that must be retrieved


def filler_sentences(count: int, skip_stories: int = 0) -> list[str]:
    out: list[str] = []
    with (DATA / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i < skip_stories:
                continue
            doc = json.loads(line)["document"]
            out.extend(" ".join(c.text.split()) for c in split_sentences(doc))
            if len(out) >= count:
                break
    return out[:count]


def _hide(lines: list[list[str]], filler: list[str], rng: random.Random) -> str:
    inserts: list[tuple[int, int, str]] = []
    for c, chain in enumerate(lines):
        for pos, line in zip(
            sorted(rng.sample(range(len(filler)), len(chain))), chain, strict=True
        ):
            inserts.append((pos, c, line))
    inserts.sort()
    out: list[str] = []
    j = 0
    for i, sentence in enumerate(filler):
        while j < len(inserts) and inserts[j][0] == i:
            out.append(inserts[j][2])
            j += 1
        out.append(sentence)
    return " ".join(out)


def variable_tracking(seed: int, n_filler: int = 3000, chains: int = 4, hops: int = 4) -> Task:
    """``VAR A = 81234.`` then ``VAR B = VAR A.`` ... ``hops`` times; chain 0 is asked."""
    rng = random.Random(seed)
    used: set[str] = set()

    def fresh() -> str:
        while True:
            name = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
            if name not in used:
                used.add(name)
                return name

    all_lines = []
    for _ in range(chains):
        names = [fresh() for _ in range(hops + 1)]
        value = str(rng.randint(10000, 99999))
        lines = [f"VAR {names[0]} = {value}."]
        lines += [f"VAR {names[i + 1]} = VAR {names[i]}." for i in range(hops)]
        all_lines.append(lines)
    last = all_lines[0][-1].split()[1]
    question = (
        f"Find the value assigned to VAR {last} in the text above, following each "
        "variable back to the number it was set to."
    )
    filler = filler_sentences(n_filler, skip_stories=seed % 5)
    return Task(_hide(all_lines, filler, rng), question, all_lines[0])


def hash_hop(seed: int, n_filler: int = 3000, chains: int = 4, hops: int = 4) -> Task:
    """Hash-Hop: ``H1 = H2.`` lines with random 16-letter hashes; chain 0 is asked."""
    rng = random.Random(seed + 1000)

    def h() -> str:
        # a capital first, so each line starts a sentence of its own
        tail = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(15))
        return rng.choice(string.ascii_uppercase) + tail

    all_lines = []
    for _ in range(chains):
        hashes = [h() for _ in range(hops + 1)]
        all_lines.append([f"{hashes[i]} = {hashes[i + 1]}." for i in range(hops)])
    first = all_lines[0][0].split()[0]
    question = f"Which hashes can be reached from {first} by following the assignments?"
    filler = filler_sentences(n_filler, skip_stories=seed % 5)
    return Task(_hide(all_lines, filler, rng), question, all_lines[0])

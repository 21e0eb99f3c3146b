"""Synthetic long-context tasks from their published recipes, with gold evidence.

- RULER needle-in-a-haystack (Hsieh et al., 2024): needles "One of the special
  magic numbers for {key} is: {value}." (keys adjective-noun words, values
  7-digit numbers) in RULER's repeated "noise" haystack. Variants: ``single``
  (one needle), ``multikey`` (4 keys, one asked, three distractors),
  ``multivalue`` (one key, 4 values, all asked), ``multiquery`` (4 keys, all asked).
- RULER variable tracking: ``VAR X = 12345`` then a chain ``VAR Y = VAR X``
  of ``hops`` (4 by default, RULER's) assignments, in order, in the noise.
- Hash-Hop (magic.dev, 2024): the text is nothing but ``A = B`` lines between
  random 16-character strings, chains of 1-6 hops, all lines shuffled; the
  question asks where ``hops`` links from a chain's first string lead.

Needles sit at evenly spread depths: the i-th of n needles of sample j is at
depth (j + 0.5) / count + i / n (mod 1), so a set sweeps every depth and the
needles of one sample are evenly spaced. Length is in tokens of
:func:`lcr.text.tokens.count_tokens` (an approximate, tokenizer-free BPE count,
close to Qwen's on prose; it counts random strings as fewer tokens than a real
BPE does), so files are byte-identical for a seed whatever models are installed.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lcr.errors import UsageError
from lcr.eval.dataset import Document, GoldEvidence, Question
from lcr.text.tokens import count_tokens

# RULER's "noise" haystack unit.
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic numbers for {key} is: {value}."
NIAH_QUESTION = "What are all the special magic numbers for {query} mentioned in the provided text?"
VT_QUESTION = "Find all variables that are assigned the value {value} in the text above."
HASHHOP_QUESTION = (
    "Each line 'A = B' links A to B. Starting from {start} and following {hops} "
    "link(s), which string do you reach?"
)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Word lists for RULER's adjective-noun keys (RULER draws them from wonderwords).
ADJECTIVES = _words(
    "abandoned able absurd adorable adventurous aggressive agreeable alert amused ancient "
    "anxious arrogant ashamed attractive awful bad beautiful bewildered black bloody blue "
    "blushing boiling brave breakable bright busy calm careful cautious charming cheerful "
    "clean clear clever cloudy clumsy colorful combative comfortable concerned confused "
    "cooperative courageous crazy creepy crowded cruel curious cute dangerous dark dead "
    "defiant delightful depressed determined different difficult disgusted distinct "
    "dizzy doubtful drab dull eager elated elegant embarrassed enchanting energetic "
    "envious evil excited expensive exuberant fair faithful famous fancy fantastic fierce "
    "filthy fine foolish fragile frail frantic friendly frightened funny gentle gifted "
    "glamorous gleaming glorious good gorgeous graceful grieving grotesque grumpy handsome "
    "happy healthy helpful helpless hilarious homeless homely horrible hungry hurt icy "
    "ill important impossible inexpensive innocent inquisitive itchy jealous jittery jolly "
    "joyous kind lazy light lively lonely long lovely lucky magnificent misty modern "
    "motionless muddy mushy mysterious nasty naughty nervous nice noisy obedient obnoxious "
    "odd old open outrageous outstanding panicky perfect plain pleasant poised poor "
    "powerful precious prickly proud puzzled quaint real relieved repulsive rich scary "
    "selfish shiny shy silly sleepy smiling smoggy sore sparkling splendid spotless stormy "
    "strange stupid successful super talented tame tender tense terrible thankful "
    "thoughtful thoughtless tired tough troubled ugliest unusual upset uptight vast "
    "victorious vivacious wandering weary wicked wide wild witty worried wrong zany zealous"
)
NOUNS = _words(
    "actor airport anchor animal answer apple army arrow artist attic autumn badge "
    "balloon banana barn basket beach bell bicycle bird blanket boat bone book bottle "
    "bridge brother bucket butter cabin cactus camera candle canyon captain carpet castle "
    "cattle cellar chair chalk cheese cherry chimney church circle cloud coast coffee "
    "comet copper cottage cotton crayon cricket crown cup curtain cushion daisy desert "
    "diamond dinner doctor dolphin donkey dragon drawer dream drum eagle engine feather "
    "fiddle field finger flag flame flower forest fountain fox frog garden garlic ghost "
    "giant glacier glove goat grape guitar hammer harbor harvest helmet hill honey horse "
    "island jacket jelly jungle kettle kitten ladder lake lamp lantern lemon letter "
    "library lighthouse lion lizard magnet maple market meadow mirror monkey moon "
    "mountain needle nest ocean orange orchard otter owl painter palace panther paper "
    "parrot peach pencil pepper piano pillow pirate planet pocket pond potato puzzle "
    "quilt rabbit radio rainbow river robot rocket saddle sailor salmon sandal scarf "
    "school shadow shell ship shoe silver skate sky snake spider spoon squirrel stone "
    "storm sugar sunset swan sword table tiger tomato tower tractor train treasure tree "
    "trumpet tunnel turtle umbrella valley vase violin volcano wagon walrus whale window "
    "wizard wolf yacht zebra"
)

KINDS = ("niah-single", "niah-multikey", "niah-multivalue", "niah-multiquery", "vt", "hashhop")


@dataclass(frozen=True)
class Insert:
    """A line to place in the haystack at ``depth`` (0..1) and whether it is gold."""

    text: str
    depth: float
    gold: bool = True


def _noise_lines(tokens: int) -> list[str]:
    unit = count_tokens(NOISE)
    return [NOISE] * max(1, tokens // unit)


def assemble(filler: list[str], inserts: list[Insert]) -> tuple[str, list[tuple[int, int]]]:
    """Join ``filler`` lines with the inserts placed at their depths (stable order).

    Returns the text and the character span of every gold insert, in insert order.
    """
    slots = len(filler)
    placed: dict[int, list[int]] = {}
    for i, ins in enumerate(inserts):
        pos = min(slots, max(0, round(ins.depth * slots)))
        placed.setdefault(pos, []).append(i)
    parts: list[str] = []
    spans: dict[int, tuple[int, int]] = {}
    offset = 0

    def add(line: str) -> None:
        nonlocal offset
        if parts:
            offset += 1  # the "\n" before it
        parts.append(line)
        offset += len(line)

    for pos in range(slots + 1):
        for i in placed.get(pos, []):
            add(inserts[i].text)
            spans[i] = (offset - len(inserts[i].text), offset)
        if pos < slots:
            add(filler[pos])
    gold = [spans[i] for i, ins in enumerate(inserts) if ins.gold]
    return "\n".join(parts), gold


def _spread_depths(n: int, sample: int, count: int) -> list[float]:
    base = (sample + 0.5) / max(count, 1)
    return [(base + i / n) % 1.0 for i in range(n)]


def _key(rng: random.Random, used: set[str]) -> str:
    while True:
        key = f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"
        if key not in used:
            used.add(key)
            return key


def _value(rng: random.Random, used: set[str]) -> str:
    while True:
        value = str(rng.randint(1_000_000, 9_999_999))
        if value not in used:
            used.add(value)
            return value


def _document_question(
    kind: str,
    j: int,
    text: str,
    gold: list[tuple[int, int]],
    question: str,
    answers: list[str],
    meta: dict[str, Any],
) -> Question:
    doc = Document(f"{kind}-{j}", f"{kind} haystack {j}", text)
    ev = [GoldEvidence(doc.id, s, e) for s, e in gold]
    return Question(f"{kind}-{j}", question, answers, [doc], ev, kind, meta)


def niah(variant: str, length: int, count: int, seed: int, *, needles: int = 4) -> list[Question]:
    """RULER NIAH ``variant`` in {single, multikey, multivalue, multiquery}."""
    kind = f"niah-{variant}"
    rng = random.Random(f"{kind}:{seed}")
    out = []
    for j in range(count):
        keys: set[str] = set()
        values: set[str] = set()
        if variant == "single":
            pairs = [(_key(rng, keys), _value(rng, values))]
            asked = [0]
        elif variant == "multikey":
            pairs = [(_key(rng, keys), _value(rng, values)) for _ in range(needles)]
            asked = [rng.randrange(needles)]
        elif variant == "multivalue":
            key = _key(rng, keys)
            pairs = [(key, _value(rng, values)) for _ in range(needles)]
            asked = list(range(needles))
        elif variant == "multiquery":
            pairs = [(_key(rng, keys), _value(rng, values)) for _ in range(needles)]
            asked = list(range(needles))
        else:
            raise UsageError(f"unknown NIAH variant {variant!r}")
        order = list(range(len(pairs)))
        rng.shuffle(order)
        depths = _spread_depths(len(pairs), j, count)
        inserts = [
            Insert(NEEDLE.format(key=pairs[i][0], value=pairs[i][1]), depths[slot], i in asked)
            for slot, i in enumerate(order)
        ]
        needle_tokens = sum(count_tokens(ins.text) for ins in inserts)
        text, gold_spans = assemble(_noise_lines(length - needle_tokens), inserts)
        gold_idx = [i for i in order if i in asked]
        queries = list(dict.fromkeys(pairs[i][0] for i in asked))
        query = (
            queries[0] if len(queries) == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
        )
        answers = [pairs[i][1] for i in asked]
        meta = {
            "seed": seed,
            "length": length,
            "depths": [round(depths[order.index(i)], 4) for i in gold_idx],
        }
        q = _document_question(
            kind, j, text, gold_spans, NIAH_QUESTION.format(query=query), answers, meta
        )
        out.append(q)
    return out


def _var_name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
        if name not in used:
            used.add(name)
            return name


def variable_tracking(length: int, count: int, seed: int, *, hops: int = 4) -> list[Question]:
    """RULER VT: one chain of ``hops`` assignments after ``VAR X = value``."""
    if not 1 <= hops <= 20:
        raise UsageError("--hops must be between 1 and 20 for variable tracking")
    rng = random.Random(f"vt:{seed}:{hops}")
    out = []
    for j in range(count):
        used: set[str] = set()
        names = [_var_name(rng, used) for _ in range(hops + 1)]
        value = str(rng.randint(10_000, 99_999))
        lines = [f"VAR {names[0]} = {value}."] + [
            f"VAR {names[i + 1]} = VAR {names[i]}." for i in range(hops)
        ]
        chain_tokens = sum(count_tokens(x) for x in lines)
        filler = _noise_lines(length - chain_tokens)
        slots = sorted(rng.sample(range(len(filler) + 1), len(lines)))
        inserts = [
            Insert(line, slot / len(filler)) for line, slot in zip(lines, slots, strict=True)
        ]
        text, gold = assemble(filler, inserts)
        meta = {"seed": seed, "length": length, "hops": hops}
        out.append(
            _document_question(
                "vt", j, text, gold, VT_QUESTION.format(value=value), list(names), meta
            )
        )
    return out


def _hash(rng: random.Random, used: set[str], size: int = 16) -> str:
    alphabet = string.ascii_letters + string.digits
    while True:
        h = "".join(rng.choice(alphabet) for _ in range(size))
        if h not in used:
            used.add(h)
            return h


def hashhop(length: int, count: int, seed: int, *, hops: int = 2) -> list[Question]:
    """Hash-Hop: shuffled ``A = B`` lines of many ``hops``-long chains; one chain asked."""
    if not 1 <= hops <= 6:
        raise UsageError("--hops must be between 1 and 6 for Hash-Hop")
    rng = random.Random(f"hashhop:{seed}:{hops}")
    line_tokens = count_tokens("a = b") - 2 + 2 * count_tokens("x" * 16)
    out = []
    for j in range(count):
        used: set[str] = set()
        n_chains = max(1, length // (line_tokens * hops))
        chains = [[_hash(rng, used) for _ in range(hops + 1)] for _ in range(n_chains)]
        asked = rng.randrange(n_chains)
        lines = [(c, h) for c in range(n_chains) for h in range(hops)]
        rng.shuffle(lines)
        texts = [f"{chains[c][h]} = {chains[c][h + 1]}" for c, h in lines]
        text = "\n".join(texts)
        starts = []
        pos = 0
        for t in texts:
            starts.append(pos)
            pos += len(t) + 1
        where = {ln: i for i, ln in enumerate(lines)}
        gold = [
            (starts[where[(asked, h)]], starts[where[(asked, h)]] + len(texts[where[(asked, h)]]))
            for h in range(hops)
        ]
        chain = chains[asked]
        meta = {"seed": seed, "length": length, "hops": hops, "chain": chain}
        question = HASHHOP_QUESTION.format(start=chain[0], hops=hops)
        out.append(_document_question("hashhop", j, text, gold, question, [chain[-1]], meta))
    return out


# the longest document and the most text one run generates: the questions are held in
# memory until written (about 4 bytes a token), so a typo's 999999999999k is refused
MAX_LENGTH = 16 * 1024**2
MAX_TOTAL_TOKENS = 256 * 1024**2


def generate(
    kind: str, length: int, count: int, seed: int, *, hops: int | None = None
) -> list[Question]:
    """Questions of a synthetic ``kind`` (see :data:`KINDS`) at ``length`` tokens."""
    if length < 100:
        raise UsageError("--length must be at least 100 tokens")
    if length > MAX_LENGTH:
        raise UsageError(f"--length is at most {MAX_LENGTH // 1024**2}m tokens, got {length:,}")
    if count < 1:
        raise UsageError("--count must be at least 1")
    if count * length > MAX_TOTAL_TOKENS:
        raise UsageError(
            f"--count {count} of --length {length:,} is {count * length:,} tokens in all; "
            f"at most {MAX_TOTAL_TOKENS // 1024**2}m (about 1 GB of text) are generated at "
            "once: lower --count or --length, or write several files with other --seed values"
        )
    makers: dict[str, Callable[[], list[Question]]] = {
        "niah-single": lambda: niah("single", length, count, seed),
        "niah-multikey": lambda: niah("multikey", length, count, seed),
        "niah-multivalue": lambda: niah("multivalue", length, count, seed),
        "niah-multiquery": lambda: niah("multiquery", length, count, seed),
        "vt": lambda: variable_tracking(length, count, seed, hops=4 if hops is None else hops),
        "hashhop": lambda: hashhop(length, count, seed, hops=2 if hops is None else hops),
    }
    if kind not in makers:
        raise UsageError(f"unknown task {kind!r}; known: {', '.join(KINDS)}")
    if hops is not None and kind not in ("vt", "hashhop"):
        raise UsageError("--hops applies to vt and hashhop only")
    return makers[kind]()


def parse_length(text: str) -> int:
    """``"32k"`` -> 32768 (binary k, as RULER's 4k..128k), ``"1m"``, or a plain number."""
    t = text.strip().lower()
    mult = 1
    if t.endswith("k"):
        mult, t = 1024, t[:-1]
    elif t.endswith("m"):
        mult, t = 1024 * 1024, t[:-1]
    try:
        value = int(float(t) * mult)
    except (ValueError, OverflowError):  # OverflowError: "inf", "1e400"
        raise UsageError(f"--length takes a token count like 4096 or 32k, got {text!r}") from None
    if value <= 0:
        raise UsageError("--length must be positive")
    return value

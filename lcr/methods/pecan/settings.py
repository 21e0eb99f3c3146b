"""PECAN's settings: one frozen dataclass per phase (``--set pecan.KEY=VALUE``).

Defaults are the paper's where it gives one (``paper=True``); the longer story of
each setting (why a default, what was measured) is in docs/methods/pecan.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lcr.config import MOST_NEW_TOKENS, Fixed, Settings, retired, setting

# A guard the paper does not have: with the default s and points cap ten levels bind only
# past 3.2 x 10^14 tokens: docs/methods/pecan.md#where-max_levels-binds
MAX_LEVELS = 10
# Table 2's fixed-node ablation reads -k nodes, else this many: the held-out SQuALITY
# searches read 8.9 (6-11): docs/methods/pecan.md#fixed_nodes-against-the-recorded-searches
FIXED_NODES = 10


@dataclass(frozen=True)
class PecanBuild(Settings):
    """Attention Graph Construction (section 3.1)."""

    chunk_tokens: int = setting(
        300,
        "level-1 chunk size in tokens of the LLM's tokenizer (sentences kept whole)",
        paper=True,
        low=16,
    )
    s: int = setting(
        8192,
        "batch size in tokens (the paper's s); lowered, with a warning, to fit a small "
        "model's window",
        paper=True,
        low=64,
    )
    points_max_new_tokens: int = setting(
        512,
        "most tokens of one batch's bullet-point reply (the paper gives no limit)",
        measured="docs/methods/pecan.md#information-points-replies-against-the-cap",
        low=8,
        high=MOST_NEW_TOKENS,
    )
    top: Literal["summary", "fit"] = setting(
        "summary",
        "summary: up to one batch's points (paper: Table A4 summarises texts under s); "
        "fit: a level that fits",
        # lcr's: the paper states no stopping rule; Tables A3-A4 (LLM construction cost on
        # data sets whose every text fits s) are what lcr reads one from (pecan.md)
    )
    graph: Literal["points", "tree"] = setting(
        "points",
        "points: many-to-many IP graph (paper); tree: one summary per batch, Table 2's ablation",
        paper=True,
    )
    # execution only: the same replies whatever the value (cached by prompt, not by batch)
    llm_batch: int = setting(
        0,
        "batches of a level the LLM decodes together; 0 = auto: 1 on a CPU, by free memory on CUDA",
        measured="docs/speed.md#pecans-batches-decoded-together-issue-55",
        low=0,
        high=64,
    )
    fixed = retired(
        max_levels=Fixed(MAX_LEVELS, "a guard that binds past 10^14 tokens"),
        # held out, pooled and truncated recall within chance (pecan.md#embed_long-on-pecans-chunks)
        embed_long=Fixed("pooled", "lcr's; no measurement chose it: truncated was within chance"),
    )


@dataclass(frozen=True)
class PecanQuery(Settings):
    """Dynamic Graph Search (section 3.2) and the answer turn."""

    patience: int = setting(
        1, "stop after the LLM has said Yes this many times (the paper's p)", paper=True, low=1
    )
    yes_threshold: float = setting(
        0.5,
        "a check counts as Yes when P(Yes) / (P(Yes) + P(No)) is above this (0.5: the likelier)",
        paper=True,  # the paper takes the model's one-word reply: the likelier word
        low=0.0,
        high=1.0,
    )
    # the node score (section 3.2.2) and Table 2's two ablations (search.SCORES)
    score: Literal["attention+embedding", "attention", "embedding"] = setting(
        "attention+embedding",
        "node score: z = E^T r + embedding cosine (paper), or Table 2's ablation of either part",
        paper=True,
    )
    progress_control: bool = setting(
        True,
        "ask the LLM Yes/No after each node (paper); false: Table 2's fixed count (-k, else 10)",
        paper=True,
    )
    max_nodes: int | None = setting(
        None,
        "nodes the search visits at most (-k); none: until it stops or the window fills",
        paper=True,  # the paper's search has no node cap: progress control and s end it
        low=1,
    )
    # Table A2's answer turn word for word, or with the question restated (prompts.SECOND_TURNS)
    second_turn: Literal["paper", "question"] = setting(
        "question",
        "the answer turn: 'paper' is Table A2's; 'question' restates the question after it",
        measured="docs/methods/pecan.md#squality",  # chosen on 20 questions, then held out on 10
    )
    max_context: int = setting(
        8192,
        "search input window in tokens (the paper caps it by s = 8K); also capped by the model's",
        paper=True,
        low=256,
    )
    fixed = retired(
        fixed_nodes=Fixed(FIXED_NODES, "-k, pecan.max_nodes, sets the ablation's count")
    )

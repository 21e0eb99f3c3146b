"""Metrics and bootstrap statistics against hand-computed cases."""

from __future__ import annotations

import math

import pytest

from lcr.eval import metrics as m
from lcr.eval.stats import bootstrap_mean, paired_bootstrap
from lcr.evidence import merge_spans


def test_normalize_follows_squad_and_strips_unicode_punctuation() -> None:
    assert m.normalize_answer("The  Cat, sat!") == "cat sat"
    assert m.normalize_answer("An apple a day") == "apple day"
    assert m.normalize_answer("“Mars” — the red planet…") == "mars red planet"
    assert m.normalize_answer("Café Ünïcode") == "café ünïcode"  # letters are kept
    assert m.normalize_answer("") == ""


def test_exact_match() -> None:
    assert m.exact_match("the Kitchen.", "kitchen") == 1.0
    assert m.exact_match("the kitchen garden", "kitchen") == 0.0
    assert m.exact_match("", "") == 1.0
    assert m.exact_match("", "kitchen") == 0.0


def test_token_f1_hand_computed() -> None:
    # pred: [cat, sat, on, mat]; ref: [cat, on, mat, today] -> 3 common: P=3/4 R=3/4
    assert m.token_f1("The cat sat on the mat", "cat on mat today") == pytest.approx(0.75)
    # pred [a b]? articles removed: "a b c" -> [b, c]; ref [b] -> P=1/2, R=1 -> 2/3
    assert m.token_f1("a b c", "b") == pytest.approx(2 / 3)
    # repeated tokens are counted with multiplicity: pred [x x], ref [x] -> P=1/2, R=1
    assert m.token_f1("x x", "x") == pytest.approx(2 / 3)
    assert m.token_f1("", "") == 1.0
    assert m.token_f1("", "x") == 0.0
    assert m.token_f1("y", "x") == 0.0
    assert m.token_f1("Zürich café", "café in Zürich") == pytest.approx(0.8)


def test_best_over_several_references() -> None:
    refs = ["in the bedroom", "kitchen", "hallway door"]
    assert m.best_over(m.exact_match, "Kitchen", refs) == 1.0
    assert m.best_over(m.token_f1, "hallway", refs) == pytest.approx(2 / 3)
    assert m.best_over(m.token_f1, "x", []) is None
    scores = m.answer_scores("Kitchen", refs)
    assert scores["em"] == 1.0 and scores["f1"] == 1.0 and scores["match_part"] == 1.0
    assert scores["match_all"] == pytest.approx(1 / 3)
    assert m.answer_scores(None, refs) == {}
    assert m.answer_scores("x", []) == {}
    empty = m.answer_scores("", ["kitchen"])
    assert empty["em"] == 0.0 and empty["f1"] == 0.0 and empty["rouge_l"] == 0.0


def test_rouge_l_hand_computed() -> None:
    # LCS of "the cat sat" and "the cat was sat" is 3 tokens: P=1, R=3/4 -> F=6/7
    assert m.rouge_l("the cat sat", "the cat was sat") == pytest.approx(6 / 7)
    assert m.rouge_l("completely different", "nothing shared") == 0.0
    # Porter stemming: "running" and "runs" share the stem "run"
    assert m.rouge_l("running", "runs") == 1.0
    assert m.rouge_l("", "") == 1.0
    assert m.rouge_l("", "x") == 0.0
    # the rouge-score tokenizer keeps ASCII letters and digits only
    assert m.rouge_l("東京", "東京") == 0.0


def test_ruler_string_match() -> None:
    pred = "The numbers are 1234567 and 7654321."
    assert m.string_match_all(pred, ["1234567", "7654321", "1111111"]) == pytest.approx(2 / 3)
    assert m.string_match_part(pred, ["1111111", "7654321"]) == 1.0
    assert m.string_match_part(pred, ["1111111"]) == 0.0
    assert m.string_match_all("VAR abcde", ["ABCDE"]) == 1.0  # case-insensitive
    assert m.string_match_all("x", []) is None


def test_merge_and_cover_spans() -> None:
    assert merge_spans([(5, 10), (0, 3), (2, 6), (20, 20)]) == [(0, 10)]
    assert merge_spans([(0, 2), (3, 4)]) == [(0, 2), (3, 4)]
    union = merge_spans([(0, 10), (20, 30)])
    assert m.covered_chars((5, 25), union) == 10


def test_evidence_recall() -> None:
    gold = [(10, 20), (40, 50), None]
    got = m.evidence_recall(gold, [(0, 15), (15, 25), (45, 100)])
    # gold 1 fully covered by two adjacent items, gold 2 half, gold 3 not located
    assert got["recall"] == pytest.approx(1 / 3)
    assert got["char_recall"] == pytest.approx(15 / 20)
    assert m.evidence_recall([], [(0, 1)]) == {}
    assert m.evidence_recall([(0, 5)], [])["recall"] == 0.0


def test_doc_recall() -> None:
    assert m.doc_recall([2], [0, 2, 2]) == 1.0
    assert m.doc_recall([1, 3], [1]) == 0.5
    assert m.doc_recall([], [1]) is None


def test_flops_is_two_params_tokens() -> None:
    assert m.query_flops(1e9, 100, 20) == pytest.approx(2.4e11)
    assert m.query_flops(None, 100, 20) == 0.0
    assert m.llm_parameters("qwen2.5-coder-1.5b") == pytest.approx(1.54e9)
    assert m.llm_parameters("unknown/model") is None

    class WithCount:
        def num_parameters(self) -> int:
            return 1234

    assert m.llm_parameters("unknown", WithCount()) == 1234.0


def test_bootstrap_mean_interval() -> None:
    iv = bootstrap_mean([1.0] * 10)
    assert (iv.mean, iv.low, iv.high, iv.n) == (1.0, 1.0, 1.0, 10)
    vals = [0.0] * 50 + [1.0] * 50
    iv = bootstrap_mean(vals)
    assert iv.mean == 0.5
    # binomial standard error 0.05 -> interval about 0.4..0.6
    assert 0.38 < iv.low < 0.45 and 0.55 < iv.high < 0.62
    assert bootstrap_mean(vals) == iv  # fixed seed: repeatable
    assert math.isnan(bootstrap_mean([]).mean)


def test_paired_bootstrap() -> None:
    a = [1.0] * 30 + [0.0] * 10
    b = [0.0] * 30 + [0.0] * 10
    t = paired_bootstrap(a, b)
    assert t.diff == pytest.approx(0.75)
    assert t.low > 0.5 and t.p_value < 0.01
    same = paired_bootstrap([0.3, 0.7, 0.5], [0.3, 0.7, 0.5])
    assert same.diff == 0.0 and same.p_value == 1.0
    noisy = paired_bootstrap([1.0, 0.0] * 10, [0.0, 1.0] * 10)
    assert noisy.diff == 0.0 and noisy.p_value > 0.5 and noisy.low < 0 < noisy.high
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])

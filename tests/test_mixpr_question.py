"""MixPR's two readings of the question (issue 42): the paper's last chunk(s), its
words counted in the idf (``mixpr.question=last-chunks``), and lcr's whole question
as one node over the stored vocabulary (``whole``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.feature_extraction.text import TfidfVectorizer

from lcr.cli.main import cli
from lcr.methods.mixpr import question_chunks, refit_question_vector
from lcr.scoring.tfidf import TfidfModel
from lcr.text.chunking import sentence_word_chunks

FILLER = [
    "The harbour was quiet in the grey morning light.",
    "Gulls circled above the fishing boats near the pier.",
    "A cold wind came in from the north over the water.",
    "Nets were drying on the wall beside the old inn.",
]


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, prog_name="lcr")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_the_walk_starts_from_the_last_chunk_or_the_last_two_when_it_is_short() -> None:
    chunks, starts = question_chunks("Tell me about the captain. Where was the lamp?", 32)
    assert chunks == ["Tell me about the captain.", "Where was the lamp?"]
    assert starts == [("Where was the lamp?", 1.0)]
    _, starts = question_chunks("Where was the lamp hung? Answer:", 32)
    assert starts == [("Where was the lamp hung?", 0.5), ("Answer:", 0.5)]
    _, starts = question_chunks("Answer:", 32)  # nothing before it: the one chunk
    assert starts == [("Answer:", 1.0)]


def test_the_refit_vector_is_scikit_learns_fit_over_the_chunks_and_the_question() -> None:
    """The question chunk's vector equals its row in a fit over context + question
    chunks, on the context's terms (the words only the question has count in its norm,
    then match no chunk)."""
    context = [c.text for c in sentence_word_chunks(" ".join(FILLER * 3), 32)]
    question = "Which boats near the pier had dragons painted on them? Answer:"
    chunks, starts = question_chunks(question, 32)
    model, _ = TfidfModel.fit(context)
    fit = TfidfVectorizer(token_pattern=model.token_pattern, dtype=np.float64)
    rows = fit.fit_transform(context + chunks).toarray()
    for text, _ in starts:
        want_row = rows[len(context) + chunks.index(text)]
        got = refit_question_vector(model, text, chunks, len(context))
        want = np.array([want_row[fit.vocabulary_[t]] for t in model.terms])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        assert np.linalg.norm(got) < 1.0  # "dragons", "painted" count in the norm


@pytest.mark.parametrize(("reading", "first"), [("last-chunks", "lamp"), ("whole", "captain")])
def test_the_question_setting_picks_where_the_walk_starts(
    tmp_path: Path, reading: str, first: str
) -> None:
    """A question whose earlier sentence is about the captain and whose last one asks
    about the lamp: the paper's reading starts from the last sentence alone."""
    doc = tmp_path / "harbour.txt"
    lines = [*FILLER * 10, "The lamp hung in the tower.", "The captain sailed the old boat."]
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = run(["index", str(doc), "-m", "mixpr", "-q"])
    assert code == 0, err
    question = "The captain sailed the boat far away. Where was the lamp?"
    args = ["retrieve", str(doc.with_suffix(".idx")), question, "-m", "mixpr", "-k", "1"]
    code, out, err = run([*args, "--json", "--set", f"mixpr.question={reading}"])
    assert code == 0, err
    result = json.loads(out)
    assert result["info"]["question"] == reading
    assert first in result["evidence"][0]["text"]

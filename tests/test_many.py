"""One question, many indexes (issue 53): ``lcr ask A.idx B.idx ... QUESTION``, a folder
of indexes, ``--each``, and ``lcr.ask`` with a list; pooled evidence names its index and
its spans are its own index's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lcr
from lcr.cli.main import cli
from lcr.cli.models import Seams
from lcr.evidence import EvidenceItem
from lcr.models.container import Models
from lcr.pipeline.many import pooled_ranking
from tests.fakes import ScriptedLLM

BOAT = (
    "The Keeper of Gull Rock\n\nSilas Prout brought the stores every Thursday in a "
    "broad-beamed boat called the Patience.\n\nThe lamp was lit at dusk."
)
FARM = "Spring Farm\n\nThe farmer kept six cows and a grey horse.\n\nHe sold milk in town."
QUESTION = "What boat brought the stores every Thursday?"


@pytest.fixture()
def library(tmp_path: Path) -> Path:
    """A folder of two indexes: one holds the answer, one does not."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, text in (("rock", BOAT), ("farm", FARM)):
        doc = tmp_path / f"{name}.txt"
        doc.write_text(text, encoding="utf-8")
        lcr.index(doc, lib / f"{name}.idx", methods=["bm25"])
    return lib


def run(args: list[str], llm: Any = None) -> tuple[int, str, str]:
    models = (
        None if llm is None else (lambda spec, progress: Models.with_objects(llm=llm, spec=spec))
    )
    result = CliRunner().invoke(cli, args, prog_name="lcr", obj=Seams(models))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def test_pooled_ranking_puts_the_index_sharing_the_question_s_words_first() -> None:
    def item(text: str, rank: int) -> EvidenceItem:
        return EvidenceItem("c0", 0, 0, 9.0, text, [(0, len(text))], {"rank": rank})

    items = [item("The farmer kept six cows.", 1), item("A boat brought the stores.", 1)]
    order, scores = pooled_ranking(QUESTION, items)
    assert order == [1, 0] and scores[0] == 0.0 < scores[1]


def test_ask_pools_many_indexes_and_cites_each_one(library: Path) -> None:
    """A scripted LLM (it echoes its prompt) answers once from both indexes' evidence:
    every item names its index, and its spans are that index's own source text."""
    rock, farm = library / "rock.idx", library / "farm.idx"
    llm = ScriptedLLM(words=40)
    code, out, err = run(["ask", str(farm), str(rock), QUESTION, "--json", "-q"], llm)
    assert code == 0, err
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record["indexes"] == [str(farm), str(rock)]
    assert len(llm.prompts) == 1  # one answer from the pool
    read = record["evidence"]
    assert read and read[0]["index"] == str(rock)  # the index holding the answer first
    assert any("Patience" in ev["text"] for ev in read if ev["index"] == str(rock))
    sources = {str(p): (p / "source.txt").read_text(encoding="utf-8") for p in (rock, farm)}
    for ev in read:
        assert ev["document"] == Path(ev["index"]).stem + ".txt"
        for s, e in ev["spans"]:
            assert sources[ev["index"]][s:e] in ev["text"]
        assert ev["citations"][0]["document"] == ev["document"]
    # a folder of indexes is the same question of each index in it
    code, out_folder, err = run(["ask", str(library), QUESTION, "--json", "-q"], llm)
    assert code == 0, err
    assert json.loads(out_folder)["indexes"] == [str(farm), str(rock)]


def test_each_answers_from_every_index_and_names_it(library: Path) -> None:
    llm = ScriptedLLM(words=40)
    code, out, err = run(["ask", str(library), QUESTION, "--each", "--json", "-q"], llm)
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in records] == [str(library / "farm.idx"), str(library / "rock.idx")]
    assert all(ev.get("document") for r in records for ev in r["evidence"])
    code, out, err = run(["ask", str(library), QUESTION, "--each", "-q"], llm)
    assert code == 0, err
    assert out.index(f"== {library / 'farm.idx'}") < out.index(f"== {library / 'rock.idx'}")
    code, out, err = run(["ask", str(library), QUESTION, "--each", "--answer-only", "-q"], llm)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [
        str(library / n) for n in ("farm.idx", "rock.idx")
    ]


def test_many_indexes_refuse_what_cannot_be_pooled(library: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["ask", str(empty), QUESTION])
    assert code != 0 and "neither an lcr index nor a folder of indexes" in err
    code, _, err = run(["ask", str(library), QUESTION, "-m", "mixpr"])
    assert code != 0 and "has no mixpr index" in err  # before any model loads
    code, _, err = run(["ask", str(library), QUESTION, "-m", "pecan"])
    assert code == 2 and "cannot be pooled across indexes: add --each" in err


def test_api_refuses_what_cannot_be_pooled_in_its_own_terms(library: Path) -> None:
    """The API names its own argument, not the CLI's flag, with the CLI's exit code."""
    with pytest.raises(lcr.LcrError, match=r"pooled across indexes: pass each=True") as caught:
        lcr.ask(library, QUESTION, method="pecan")
    assert "--each" not in str(caught.value) and caught.value.exit_code == 2


@pytest.mark.slow
def test_api_asks_a_list_of_indexes_with_a_real_model(library: Path, smollm: Any) -> None:
    """The same route with SmolLM2-135M: one pooled answer, its evidence from the index
    that holds the answer first; and one answer per index with ``each=True``."""
    models = Models.with_objects(llm=smollm)
    indexes = [library / "farm.idx", library / "rock.idx"]
    pooled = lcr.ask(indexes, QUESTION, models=models, max_new_tokens=16)
    assert isinstance(pooled, lcr.Result)
    assert pooled.indexes == [str(p) for p in indexes]
    assert pooled.basis()[0].extra["index"] == str(library / "rock.idx")
    assert pooled.usage.calls >= 1 and pooled.answer
    each = lcr.ask(indexes, QUESTION, models=models, max_new_tokens=16, each=True)
    assert [r.index for r in each] == [str(p) for p in indexes]


def test_pooled_text_maps_spans_there_and_back(library: Path) -> None:
    """Items of two indexes (one of two spans) read from the pooled text exactly as
    from their own source.txt, and come back onto their own spans."""
    from lcr.pipeline.many import PooledText
    from lcr.store import Index

    rock, farm = Index.open(library / "rock.idx"), Index.open(library / "farm.idx")
    lamp, cows = rock.source.index("The lamp"), farm.source.index("The farmer")
    items = [
        EvidenceItem("a", 0, 0, 1.0, "x", [(0, 9), (lamp, lamp + 8)], {"index_no": 0}),
        EvidenceItem("b", 0, 0, 1.0, "y", [(cows, cows + 10)], {"index_no": 1}),
    ]
    pooled = PooledText.of([rock, farm], items)
    for item, index in zip(items, (rock, farm), strict=True):
        there = pooled.to_pooled(item)
        assert [pooled.source[s:e] for s, e in there.spans] == [
            index.source[s:e] for s, e in item.spans
        ]
        back = pooled.back(there)
        assert back.spans == item.spans and back.extra["index"] == str(index.path)
    assert "\u2042" in pooled.source  # regions apart, never read as touching

"""``lcr retrieve`` of many indexes as ``lcr ask`` takes them (#73), and ``--each``
over a folder where one index cannot be asked (#72 row 13b): the good ones answered,
the bad one said in one line, exit 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lcr
from lcr.cli.main import cli
from lcr.cli.models import Seams
from lcr.models.container import Models
from tests.fakes import ScriptedLLM

BOAT = (
    "The Keeper of Gull Rock\n\nSilas Prout brought the stores every Thursday in a "
    "broad-beamed boat called the Patience.\n\nThe lamp was lit at dusk."
)
FARM = "Spring Farm\n\nThe farmer kept six cows and a grey horse.\n\nHe sold milk in town."
MILL = "The Old Mill\n\nThe miller ground wheat by the river.\n\nHis boat was small."
QUESTION = "What boat brought the stores every Thursday?"


@pytest.fixture()
def library(tmp_path: Path) -> Path:
    """A folder of three indexes: one holds the answer."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name, text in (("farm", FARM), ("mill", MILL), ("rock", BOAT)):
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


# ------------------------------------------------------------------ retrieve, many


def test_retrieve_pools_a_folder_and_several_indexes_as_ask_does(
    library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rock, farm, mill = (library / f"{n}.idx" for n in ("rock", "farm", "mill"))
    code, out, err = run(["retrieve", str(library), QUESTION, "--json"])
    assert code == 0, err
    (record,) = [json.loads(line) for line in out.splitlines()]
    assert record["indexes"] == [str(farm), str(mill), str(rock)]  # in name order
    assert record["answer"] is None and "index" not in record
    evidence = record["evidence"]
    assert evidence[0]["index"] == str(rock) and "Patience" in evidence[0]["text"]
    assert [ev["rank"] for ev in evidence] == list(range(1, len(evidence) + 1))
    sources = {str(p): (p / "source.txt").read_text(encoding="utf-8") for p in (rock, farm, mill)}
    for ev in evidence:
        assert ev["ranked_by"] == "pooled bm25"
        assert {"index_rank", "index_score"} <= set(ev)
        for s, e in ev["spans"]:  # spans into the index's own source.txt
            assert sources[ev["index"]][s:e] == ev["text"]
        # cited where the same piece is cited retrieved from its own index alone
        code, alone, err = run(["retrieve", ev["index"], QUESTION, "--json", "-k", "20"])
        assert code == 0, err
        own = {tuple(map(tuple, it["spans"])): it for it in json.loads(alone)["evidence"]}
        same = own[tuple(map(tuple, ev["spans"]))]
        assert ev["citations"] == same["citations"] and ev["index_score"] == same["score"]
    # two indexes named: the same, over those two
    code, out, err = run(["retrieve", str(farm), str(rock), QUESTION, "--json"])
    assert code == 0, err
    assert json.loads(out)["indexes"] == [str(farm), str(rock)]
    # plain output: each piece names its index, and every line fits 80 columns
    monkeypatch.chdir(library.parent)
    code, out, err = run(["retrieve", "lib", QUESTION])
    assert code == 0, err
    assert (
        out.splitlines()[1] == "[1] score 2.289 (pooled bm25)  lib/rock.idx: rock.txt chars 0-114"
    )
    assert max(len(line) for line in out.splitlines()) <= 80


def test_retrieve_each_lists_every_index_on_its_own(library: Path) -> None:
    code, out, err = run(["retrieve", str(library), QUESTION, "--each", "--json", "-k", "2"])
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in records] == [
        str(library / f"{n}.idx") for n in ("farm", "mill", "rock")
    ]
    assert all(len(r["evidence"]) <= 2 and "indexes" not in r for r in records)
    code, out, err = run(["retrieve", str(library), QUESTION, "--each"])
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("== ")] == [
        f"== {library / n}.idx" for n in ("farm", "mill", "rock")
    ]


def test_retrieve_of_one_index_is_as_before(library: Path) -> None:
    rock = library / "rock.idx"
    code, out, err = run(["retrieve", str(rock), QUESTION, "--json"])
    assert code == 0, err
    record = json.loads(out)
    assert record["index"] == str(rock) and "indexes" not in record
    code, _, err = run(["retrieve", str(library / "nothing.idx"), QUESTION])
    assert code == 1 and err.count("\n") == 1, err


# ------------------------------------------------------------------ --each, one bad index


def damage(index: Path, how: str) -> None:
    manifest = index / "manifest.json"
    if how == "schema":
        data = json.loads(manifest.read_text())
        data["schema_version"] = 99
        manifest.write_text(json.dumps(data))
    elif how == "manifest":
        manifest.write_text("{not json")
    elif how == "source":
        (index / "source.txt").write_text("other text entirely")
    elif how == "method":
        shutil.rmtree(next(p for p in index.iterdir() if p.name.startswith("bm25")))


@pytest.mark.parametrize("how", ["schema", "manifest", "source", "method"])
@pytest.mark.parametrize("command", ["ask", "retrieve"])
def test_each_answers_every_good_index_and_names_the_bad_one(
    library: Path, how: str, command: str
) -> None:
    damage(library / "mill.idx", how)
    llm = ScriptedLLM(words=5) if command == "ask" else None
    args = [command, str(library), QUESTION, "--each", "--json", "-q"]
    code, out, err = run(args, llm)
    assert code == 1, (out, err)
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in records] == [str(library / "farm.idx"), str(library / "rock.idx")]
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lcr: ") and "mill.idx" in lines[0], err
    assert "internal error" not in err
    assert all((r["answer"] is None) == (command == "retrieve") for r in records)


def test_each_with_every_index_bad_says_each_and_exits_1(library: Path) -> None:
    for name in ("farm", "mill", "rock"):
        damage(library / f"{name}.idx", "schema")
    code, out, err = run(["retrieve", str(library), QUESTION, "--each"])
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 3 and all("schema" in line for line in err.splitlines())


def test_pooled_ask_still_refuses_a_bad_index(library: Path) -> None:
    """Pooled, a bad index fails the question: an answer from part of the pool would
    not say it is missing one (--each is the way past it)."""
    damage(library / "mill.idx", "schema")
    code, out, err = run(["retrieve", str(library), QUESTION])
    assert code == 1 and out == "" and err.count("\n") == 1 and "mill.idx" in err
